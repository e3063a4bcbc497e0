//! The composition (`cordis.yml`): a YAML list of entries.
//!
//! Entry keys are `id`, `name`, `config`, `disabled` and `group`. A group
//! (`group: true`, name `cordis:group`) holds its nested entries as a list in
//! `config`. Problems with the file as a whole (not YAML, empty, not a list,
//! too large, too deep) fail the whole composition with a line and column;
//! problems with one entry (an unknown key, a missing `name`) fail only that
//! entry, so the others still load.

use std::sync::OnceLock;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use serde_yaml::Value as Yaml;

use super::positions::{Position, Positions, Step};

/// The largest composition accepted, in bytes.
pub const MAX_COMPOSITION_BYTES: u64 = 4 * 1024 * 1024;

/// The entry keys a composition accepts.
pub const ENTRY_KEYS: [&str; 5] = ["id", "name", "config", "disabled", "group"];

/// A parsed composition.
#[derive(Debug)]
pub struct Composition {
    /// The file as the user named it (used in messages).
    pub file: String,
    /// The folder relative paths and the default state directory resolve
    /// against.
    pub dir: PathBuf,
    /// The file's text (without a byte-order mark).
    pub text: String,
    /// Top-level entries in file order.
    pub entries: Vec<Entry>,
    positions: OnceLock<Positions>,
}

/// One entry of a composition.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The entry's id: as written, or generated from its position and name
    /// (`tool-todo@2`, nested `group@0/tool-todo@1`).
    pub id: String,
    /// Whether `id` was generated.
    pub id_generated: bool,
    /// The plugin name (`tool-todo`, `./lib/libx.so`, `cordis:group`).
    pub name: String,
    /// The entry's config as JSON (`None` when absent or null).
    pub config: Option<Json>,
    /// `disabled: true`.
    pub disabled: bool,
    /// `group: true`; `children` then holds the nested entries.
    pub group: bool,
    /// Nested entries of a group.
    pub children: Vec<Entry>,
    /// The entry's path in the YAML document.
    pub path: Vec<Step>,
    /// Where the entry starts.
    pub position: Position,
    /// Problems that keep this entry from loading (each a full message).
    pub problems: Vec<String>,
}

/// The composition as a whole could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CompositionError {
    /// The file could not be read.
    #[error("{file}: cannot read the composition: {source}")]
    Read {
        /// The file.
        file: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_COMPOSITION_BYTES`].
    #[error("{file}: the composition is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Not UTF-8.
    #[error("{file}: the composition is not UTF-8 text: {detail}")]
    NotText {
        /// The file.
        file: String,
        /// What is wrong.
        detail: String,
    },
    /// YAML syntax or structure error.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// Empty or only comments.
    #[error("{file}: the composition is empty; expected a list of entries such as `- name: tool-todo`")]
    Empty {
        /// The file.
        file: String,
    },
    /// The top level is not a list.
    #[error("{file}:{line}:{column}: expected a list of entries (`- name: ...`), found {found}")]
    NotAList {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was found.
        found: String,
    },
}

impl Composition {
    /// Reads and parses the composition at `path`; `file` is how messages
    /// name it.
    ///
    /// # Errors
    /// [`CompositionError`] when the file cannot be read or is not a YAML
    /// list; entry-level problems are kept on the entries instead.
    pub fn read(path: &Path) -> Result<Composition, CompositionError> {
        let file = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|source| CompositionError::Read { file: file.clone(), source })?;
        if meta.len() > MAX_COMPOSITION_BYTES {
            return Err(CompositionError::TooLarge { file, size: meta.len(), limit: MAX_COMPOSITION_BYTES });
        }
        let bytes = std::fs::read(path).map_err(|source| CompositionError::Read { file: file.clone(), source })?;
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
                let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
                let column = valid.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
                return Err(CompositionError::Syntax {
                    file,
                    line,
                    column,
                    message: "the composition is not UTF-8 text (save it as UTF-8)".into(),
                });
            }
        };
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        Composition::parse(&file, dir, text)
    }

    /// Parses composition text. `file` names it in messages and `dir` is
    /// the folder relative names resolve against.
    ///
    /// # Errors
    /// See [`Composition::read`].
    pub fn parse(file: &str, dir: PathBuf, text: String) -> Result<Composition, CompositionError> {
        let file = file.to_string();
        if text.len() as u64 > MAX_COMPOSITION_BYTES {
            return Err(CompositionError::TooLarge { file, size: text.len() as u64, limit: MAX_COMPOSITION_BYTES });
        }
        let text = match text.strip_prefix('\u{feff}') {
            Some(rest) => rest.to_string(),
            None => text,
        };
        if text.contains('\0') {
            let line = text[..text.find('\0').unwrap_or(0)].matches('\n').count() + 1;
            return Err(CompositionError::Syntax { file, line, column: 1, message: "the composition contains a NUL byte".into() });
        }
        let doc: Yaml = match serde_yaml::from_str(&text) {
            Ok(doc) => doc,
            Err(e) => {
                if e.to_string().contains("duplicate entry") {
                    if let Some((path, p)) = Positions::of(&text).first_duplicate() {
                        let key = match path.last() {
                            Some(Step::Key(k)) => k.clone(),
                            _ => String::new(),
                        };
                        return Err(CompositionError::Syntax {
                            file,
                            line: p.line,
                            column: p.column,
                            message: format!("duplicate key `{key}`: each key may appear once in a mapping"),
                        });
                    }
                }
                return Err(syntax_error(&file, &text, &e));
            }
        };
        let mut composition =
            Composition { file: file.clone(), dir, text, entries: Vec::new(), positions: OnceLock::new() };
        let items = match doc {
            Yaml::Null => return Err(CompositionError::Empty { file }),
            Yaml::Sequence(items) => items,
            other => {
                let p = composition.position(&[]);
                return Err(CompositionError::NotAList { file, line: p.line, column: p.column, found: kind(&other) });
            }
        };
        let mut ids = HashMap::new();
        let mut entries = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            entries.push(composition.entry(item, vec![Step::Index(i)], i, "", &mut ids));
        }
        composition.entries = entries;
        Ok(composition)
    }

    /// Where the node at `path` starts (ancestors when it does not exist).
    pub fn position(&self, path: &[Step]) -> Position {
        self.positions
            .get_or_init(|| Positions::of(&self.text))
            .find(path)
            .unwrap_or(Position { line: 1, column: 1 })
    }

    /// `file:line` for the node at `path`.
    pub fn locate(&self, path: &[Step]) -> String {
        format!("{}:{}", self.file, self.position(path).line)
    }

    /// Every entry, depth first (groups before their children).
    pub fn walk(&self) -> Vec<&Entry> {
        fn push<'a>(out: &mut Vec<&'a Entry>, entries: &'a [Entry]) {
            for e in entries {
                out.push(e);
                push(out, &e.children);
            }
        }
        let mut out = Vec::new();
        push(&mut out, &self.entries);
        out
    }

    fn entry(&self, item: &Yaml, path: Vec<Step>, index: usize, prefix: &str, ids: &mut HashMap<String, usize>) -> Entry {
        let position = self.position(&path);
        let mut entry = Entry {
            id: String::new(),
            id_generated: true,
            name: String::new(),
            config: None,
            disabled: false,
            group: false,
            children: Vec::new(),
            path: path.clone(),
            position,
            problems: Vec::new(),
        };
        let at = |p: &[Step]| self.locate(p);
        // Problems with where they are; formatted with the entry's id at the
        // end, once the id is known.
        let mut problems: Vec<(Vec<Step>, String)> = Vec::new();
        let map = match item {
            Yaml::Mapping(map) => map,
            other => {
                entry.id = format!("{prefix}entry@{index}");
                entry.problems.push(format!(
                    "{}: entry {}: expected an entry (a mapping with at least `name`), found {}",
                    at(&path),
                    entry.id,
                    kind(other)
                ));
                return entry;
            }
        };
        let mut config_yaml = None;
        for (key, value) in map {
            let Some(key) = key.as_str() else {
                problems.push((path.clone(), format!("entry keys must be strings, found {}", kind(key))));
                continue;
            };
            let mut key_path = path.clone();
            key_path.push(Step::Key(key.to_string()));
            match key {
                "id" => match scalar_text(value) {
                    Some(id) if !id.trim().is_empty() => {
                        entry.id = id;
                        entry.id_generated = false;
                    }
                    _ => problems.push((key_path, format!("`id` must be a non-empty string, found {}", kind(value)))),
                },
                "name" => match value.as_str() {
                    Some(name) if !name.trim().is_empty() => entry.name = name.trim().to_string(),
                    _ => problems.push((key_path, format!("`name` must be a non-empty string, found {}", kind(value)))),
                },
                "disabled" => match bool_of(value) {
                    Ok(b) => entry.disabled = b,
                    Err(m) => problems.push((key_path, format!("`disabled` {m}"))),
                },
                "group" => match bool_of(value) {
                    Ok(b) => entry.group = b,
                    Err(m) => problems.push((key_path, format!("`group` {m}"))),
                },
                "config" => config_yaml = Some(value),
                other => problems.push((
                    key_path.clone(),
                    format!("unknown entry key `{other}` (entry keys are {})", ENTRY_KEYS.map(|k| format!("`{k}`")).join(", ")),
                )),
            }
        }
        if entry.name.is_empty() && !map.keys().any(|k| k.as_str() == Some("name")) {
            problems.push((path.clone(), "the entry has no `name` (the plugin to load)".into()));
        }
        let local = if entry.name.is_empty() { "entry".to_string() } else { entry.name.clone() };
        if entry.id.is_empty() {
            entry.id = format!("{prefix}{local}@{index}");
        }
        let mut id_path = path.clone();
        id_path.push(Step::Key("id".into()));
        let line = self.position(&id_path).line;
        if let Some(first) = ids.get(&entry.id) {
            problems.push((id_path, format!("duplicate entry id `{}` (first used at line {first}); ids must be unique", entry.id)));
        } else {
            ids.insert(entry.id.clone(), line);
        }
        let mut config_path = path.clone();
        config_path.push(Step::Key("config".into()));
        if entry.group {
            if !matches!(entry.name.as_str(), "cordis:group" | "group" | "") {
                problems.push((path.clone(), format!("a group entry must be named `cordis:group`, found `{}`", entry.name)));
            }
            match config_yaml {
                Some(Yaml::Sequence(items)) => {
                    let child_prefix = format!("{}/", entry.id);
                    for (j, child) in items.iter().enumerate() {
                        let mut child_path = config_path.clone();
                        child_path.push(Step::Index(j));
                        entry.children.push(self.entry(child, child_path, j, &child_prefix, ids));
                    }
                }
                None | Some(Yaml::Null) => {}
                Some(other) => problems.push((
                    config_path.clone(),
                    format!("a group's `config` must be a list of entries, found {}", kind(other)),
                )),
            }
        } else if let Some(value) = config_yaml {
            match to_json(value) {
                Ok(Json::Null) => {}
                Ok(json) => entry.config = Some(json),
                Err((rel, message)) => {
                    let mut p = config_path.clone();
                    p.extend(rel);
                    problems.push((p, message));
                }
            }
        }
        let id = entry.id.clone();
        entry.problems.extend(problems.into_iter().map(|(p, m)| format!("{}: entry {id}: {m}", at(&p))));
        entry
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.id, self.name)
    }
}

fn syntax_error(file: &str, text: &str, e: &serde_yaml::Error) -> CompositionError {
    let (line, column) = match e.location() {
        Some(l) => (l.line(), l.column()),
        None => (1, 1),
    };
    let mut message = e.to_string();
    // serde_yaml appends " at line X column Y"; we lead with the position.
    if let Some(cut) = message.find(" at line ") {
        message.truncate(cut);
    }
    if message.contains("repetition limit exceeded") {
        message = "too many alias expansions (is this a YAML alias bomb?); write the values out instead".into();
    }
    let (line, column) = if message.contains("more than one document") {
        let second = text.lines().enumerate().filter(|(_, l)| l.starts_with("---")).map(|(i, _)| i + 1).find(|&l| l > 1 || !text.starts_with("---"));
        match second {
            Some(l) if text.lines().take(l - 1).any(|x| !x.trim().is_empty() && !x.trim_start().starts_with('#')) => (l, 1),
            _ => (line, column),
        }
    } else {
        (line, column)
    };
    let line_text = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
    if line_text.contains('\t') {
        message.push_str(" (the line contains a tab: YAML indents with spaces only)");
    }
    CompositionError::Syntax { file: file.to_string(), line, column, message }
}

/// A short description of a YAML value for messages.
fn kind(value: &Yaml) -> String {
    match value {
        Yaml::Null => "nothing (null)".into(),
        Yaml::Bool(b) => format!("the boolean {b}"),
        Yaml::Number(n) => format!("the number {n}"),
        Yaml::String(s) => format!("the string {s:?}"),
        Yaml::Sequence(_) => "a list".into(),
        Yaml::Mapping(_) => "a mapping".into(),
        Yaml::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

fn scalar_text(value: &Yaml) -> Option<String> {
    match value {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The hint added when a boolean was expected and a YAML 1.1 spelling was
/// found: this parser reads YAML 1.2, where those are plain strings.
pub const YAML11_BOOL_HINT: &str = "YAML 1.1 spellings such as yes/no/on/off are strings in YAML 1.2: write true or false";

/// What to say when the string `s` was given where a boolean is expected.
pub fn bool_hint(s: &str) -> &'static str {
    match s {
        "true" | "false" => "remove the quotes: a quoted value is a string",
        _ if is_yaml11_bool(s) => YAML11_BOOL_HINT,
        _ => "write true or false",
    }
}

/// Whether `s` is a YAML 1.1 boolean spelling.
pub fn is_yaml11_bool(s: &str) -> bool {
    matches!(s.to_ascii_lowercase().as_str(), "yes" | "no" | "on" | "off" | "y" | "n" | "true" | "false")
}

fn bool_of(value: &Yaml) -> Result<bool, String> {
    match value {
        Yaml::Bool(b) => Ok(*b),
        Yaml::String(s) => Err(format!("must be true or false, found the string {s:?} ({})", bool_hint(s))),
        other => Err(format!("must be true or false, found {}", kind(other))),
    }
}

/// Converts a YAML value to JSON. Errors carry the relative path of the
/// offending node.
fn to_json(value: &Yaml) -> Result<Json, (Vec<Step>, String)> {
    Ok(match value {
        Yaml::Null => Json::Null,
        Yaml::Bool(b) => Json::Bool(*b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Json::from(i)
            } else if let Some(u) = n.as_u64() {
                Json::from(u)
            } else {
                match n.as_f64().and_then(serde_json::Number::from_f64) {
                    Some(f) => Json::Number(f),
                    None => return Err((vec![], format!("the number {n} has no JSON form (NaN and infinities are not allowed)"))),
                }
            }
        }
        Yaml::String(s) => Json::String(s.clone()),
        Yaml::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(to_json(item).map_err(|(mut p, m)| {
                    p.insert(0, Step::Index(i));
                    (p, m)
                })?);
            }
            Json::Array(out)
        }
        Yaml::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    other => return Err((vec![], format!("config keys must be strings, found {}", kind(other)))),
                };
                let json = to_json(v).map_err(|(mut p, m)| {
                    p.insert(0, Step::Key(key.clone()));
                    (p, m)
                })?;
                out.insert(key, json);
            }
            Json::Object(out)
        }
        Yaml::Tagged(t) => {
            return Err((vec![], format!("the tag {} is not supported: config values are plain YAML", t.tag)));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Composition, CompositionError> {
        Composition::parse("cordis.yml", PathBuf::from("."), text.to_string())
    }

    #[test]
    fn parses_entries_with_generated_ids() {
        let c = parse("- name: tool-todo\n  config:\n    allowParallelInProgress: true\n- id: b\n  name: other\n  disabled: true\n").unwrap();
        assert_eq!(c.entries.len(), 2);
        assert_eq!(c.entries[0].id, "tool-todo@0");
        assert!(c.entries[0].id_generated);
        assert_eq!(c.entries[0].config, Some(serde_json::json!({"allowParallelInProgress": true})));
        assert_eq!(c.entries[1].id, "b");
        assert!(c.entries[1].disabled);
        assert!(c.entries.iter().all(|e| e.problems.is_empty()));
    }

    #[test]
    fn unknown_key_fails_only_that_entry_with_its_line() {
        let c = parse("- name: a\n- name: b\n  isolate:\n    x: true\n").unwrap();
        assert!(c.entries[0].problems.is_empty());
        assert_eq!(c.entries[1].problems.len(), 1);
        assert!(c.entries[1].problems[0].starts_with("cordis.yml:3: entry b@1: unknown entry key `isolate`"), "{:?}", c.entries[1].problems);
    }

    #[test]
    fn whole_file_errors() {
        assert!(matches!(parse(""), Err(CompositionError::Empty { .. })));
        assert!(matches!(parse("# only a comment\n"), Err(CompositionError::Empty { .. })));
        assert!(matches!(parse("name: x\n"), Err(CompositionError::NotAList { line: 1, .. })));
        let tab = parse("- name: a\n\tconfig: 1\n").unwrap_err().to_string();
        assert!(tab.contains("cordis.yml:2:"), "{tab}");
        let dup = parse("- name: a\n  name: b\n").unwrap_err().to_string();
        assert!(dup.contains("cordis.yml:2:"), "{dup}");
    }

    #[test]
    fn byte_order_mark_is_accepted() {
        let c = parse("\u{feff}- name: a\n").unwrap();
        assert_eq!(c.entries[0].name, "a");
    }

    #[test]
    fn groups_nest_entries() {
        let c = parse("- id: g\n  name: cordis:group\n  group: true\n  config:\n    - name: a\n    - id: b\n      name: b\n").unwrap();
        let g = &c.entries[0];
        assert_eq!(g.children.len(), 2);
        assert_eq!(g.children[0].id, "g/a@0");
        assert_eq!(g.children[1].position.line, 6);
        assert_eq!(c.walk().len(), 3);
    }

    #[test]
    fn yaml11_booleans_get_a_hint() {
        let c = parse("- name: a\n  disabled: yes\n").unwrap();
        assert!(c.entries[0].problems[0].contains("write true or false"), "{:?}", c.entries[0].problems);
    }
}
