//! Where the harness store keeps a session:
//! `<root>/--<project key>--/<escaped id>/session.jsonl[.zstd]`, or
//! `<root>/_no-cwd/...` for a session without a working folder.
//!
//! Both escapes work on UTF-16 code units, as the harness (a JavaScript
//! program) does, so the same id or folder gives the same path here: ASCII
//! letters, digits, `.`, `_` and `-` stay as they are, every other unit
//! becomes `~` and four upper-case hex digits (`~` itself is `~007E`).
//! Source: `@deepseek-ai/dsh-session-persistence-jsonl` 0.1.0-rc.8.

use std::path::{Path, PathBuf};

use super::Compression;

/// Longest project key body kept (the `--` marks add 4 bytes), so a key
/// fits a file name (255 bytes).
const PROJECT_KEY_MAX: usize = 251;

fn safe_unit(unit: u16) -> bool {
    unit < 0x80 && {
        let c = unit as u8;
        c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-')
    }
}

fn push_escaped(out: &mut String, unit: u16) {
    out.push_str(&format!("~{unit:04X}"));
}

/// The one path segment that names session `id`: injective, never `.` or
/// `..`, never containing a separator.
///
/// # Errors
/// When `id` is empty.
pub fn encode_segment(id: &str) -> Result<String, String> {
    match id {
        "" => return Err("a session id cannot be empty".into()),
        "." => return Ok("~002E".into()),
        ".." => return Ok("~002E~002E".into()),
        _ => {}
    }
    let mut out = String::with_capacity(id.len());
    for unit in id.encode_utf16() {
        if safe_unit(unit) {
            out.push(unit as u8 as char);
        } else {
            push_escaped(&mut out, unit);
        }
    }
    Ok(out)
}

/// The session id a folder named `segment` holds: the inverse of
/// [`encode_segment`], or `None` when `segment` is not a name it makes
/// (an escape that is not `~` and four upper-case hex digits, a unit that
/// should have been escaped, or UTF-16 that does not decode).
pub fn decode_segment(segment: &str) -> Option<String> {
    let mut units = Vec::with_capacity(segment.len());
    let bytes = segment.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'~' {
            let hex = segment.get(i + 1..i + 5)?;
            if !hex.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)) {
                return None;
            }
            units.push(u16::from_str_radix(hex, 16).ok()?);
            i += 5;
        } else {
            units.push(u16::from(bytes[i]));
            i += 1;
        }
    }
    let id = String::from_utf16(&units).ok()?;
    (encode_segment(&id).ok()? == segment).then_some(id)
}

/// The folder name of a working folder: runs of `/`, `\` and `:` become one
/// `-`, other units are escaped as in [`encode_segment`], leading `-` are
/// dropped (an empty result is `root`), the body is cut to 251 units and
/// framed by `--`. Different folders can share a key; ids keep sessions
/// apart.
///
/// # Errors
/// When `cwd` is empty.
pub fn project_key(cwd: &str) -> Result<String, String> {
    if cwd.is_empty() {
        return Err("a working folder cannot be empty".into());
    }
    let mut readable = String::with_capacity(cwd.len());
    let mut in_separators = false;
    for unit in cwd.encode_utf16() {
        if matches!(unit, 0x2F | 0x5C | 0x3A) {
            if !in_separators {
                readable.push('-');
            }
            in_separators = true;
        } else {
            if safe_unit(unit) {
                readable.push(unit as u8 as char);
            } else {
                push_escaped(&mut readable, unit);
            }
            in_separators = false;
        }
    }
    let body = readable.trim_start_matches('-');
    let body = if body.is_empty() { "root" } else { body };
    // Every character is ASCII here, so bytes and UTF-16 units agree.
    Ok(format!("--{}--", &body[..body.len().min(PROJECT_KEY_MAX)]))
}

/// The project folder of `cwd` under `root`.
///
/// # Errors
/// As [`project_key`].
pub fn project_dir(root: &Path, cwd: Option<&str>) -> Result<PathBuf, String> {
    Ok(match cwd {
        None => root.join("_no-cwd"),
        Some(cwd) => root.join(project_key(cwd)?),
    })
}

/// The file name of a session log in `compression`.
pub fn file_name(compression: Compression) -> &'static str {
    match compression {
        Compression::Zstd => "session.jsonl.zstd",
        Compression::None => "session.jsonl",
    }
}

/// The log file of session `id` with working folder `cwd`.
///
/// # Errors
/// As [`encode_segment`] and [`project_key`].
pub fn log_path(root: &Path, cwd: Option<&str>, id: &str, compression: Compression) -> Result<PathBuf, String> {
    Ok(project_dir(root, cwd)?.join(encode_segment(id)?).join(file_name(compression)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_escape_per_utf16_unit() {
        assert_eq!(encode_segment("228b7b82-84ed").unwrap(), "228b7b82-84ed");
        assert_eq!(encode_segment("{{sessionId}}").unwrap(), "~007B~007BsessionId~007D~007D");
        assert_eq!(encode_segment("a/b~c").unwrap(), "a~002Fb~007Ec");
        assert_eq!(encode_segment("..").unwrap(), "~002E~002E");
        assert_eq!(encode_segment("é😀").unwrap(), "~00E9~D83D~DE00");
        assert!(encode_segment("").is_err());
        for id in ["228b7b82-84ed", "{{sessionId}}", "a/b~c", "..", ".", "é😀", "x.jsonl"] {
            assert_eq!(decode_segment(&encode_segment(id).unwrap()).as_deref(), Some(id));
        }
        for not_ours in ["a~002", "~002e", "a b", "~D83D", "~002E~002E~", ""] {
            assert_eq!(decode_segment(not_ours), None, "{not_ours}");
        }
    }

    #[test]
    fn project_keys_collapse_separators() {
        assert_eq!(project_key("/project").unwrap(), "--project--");
        assert_eq!(project_key("/home/me/src/app").unwrap(), "--home-me-src-app--");
        assert_eq!(project_key("C:\\\\Users\\x").unwrap(), "--C-Users-x--");
        assert_eq!(project_key("/").unwrap(), "--root--");
        assert_eq!(project_key("/a b").unwrap(), "--a~0020b--");
        assert_eq!(project_key(&format!("/{}", "x".repeat(300))).unwrap().len(), 251 + 4);
    }
}
