//! `cordis config`: the composed tree written back as one YAML document.
//!
//! The document is the root list after every patch layer, with each include
//! expanded in place as a `cordis:group` holding the included rows (after
//! the include's patches). Ids therefore stay the same when the output is
//! loaded again: a group scopes its children's ids exactly as the include
//! did. Relative library paths in included files are written as absolute
//! paths, since they were relative to the included file's folder. `!!js`
//! values are written as `!!js "source"`, with the value they have now in a
//! comment after them. Comments say which file each run of rows came from,
//! which files patched a row, and on each key a patch set, where it was
//! set.

use std::path::Path;
use std::sync::Arc;

use serde_yaml::Value as Yaml;

use crate::composition::{js_source, Composition, Entry, EntryKind};
use crate::source::{Role, Source};
use crate::yaml::is_js_tag;

/// The composed tree of `composition` as YAML text, the current value of
/// a `!!js` expression that reads `process.env` hidden (see
/// [`composed_yaml_with`]).
pub fn composed_yaml(composition: &Composition) -> String {
    composed_yaml_with(composition, false)
}

/// The composed tree of `composition` as YAML text. The current value of a
/// `!!js` expression is written in a comment after it, except, unless
/// `show_values`, for an expression that reads `process.env`: that is
/// where secrets come from (a token in a header, a password in a
/// variable), so its value is shown only when asked for.
pub fn composed_yaml_with(composition: &Composition, show_values: bool) -> String {
    let mut out = String::new();
    out.push_str(&format!("# composed from {}", composition.file));
    let layers: Vec<String> = composition
        .sources
        .iter()
        .filter(|s| matches!(s.role, Role::UserPatch | Role::Patch(_)))
        .map(|s| format!("{} ({})", s.file, s.role))
        .collect();
    if !layers.is_empty() {
        out.push_str(&format!(" with patch layers: {}", layers.join(", ")));
    }
    out.push('\n');
    if composition.entries.is_empty() {
        out.push_str("[]\n");
        return out;
    }
    list(&mut out, &composition.entries, 0, Some(composition.root()), composition.root().dir.as_path(), show_values);
    out
}

fn describe(source: &Source) -> String {
    match source.role {
        Role::Root => source.file.clone(),
        _ => format!("{} ({})", source.file, source.role),
    }
}

/// Writes `entries` as a block list; `context` is the file of the row
/// that holds the list (a `# from` comment precedes every run of rows from
/// another file).
fn list(out: &mut String, entries: &[Entry], indent: usize, context: Option<&Arc<Source>>, root_dir: &Path, show: bool) {
    let pad = " ".repeat(indent);
    let mut current: Option<Arc<Source>> = context.cloned();
    for entry in entries {
        let source = &entry.origin.source;
        if !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, source)) {
            out.push_str(&format!("{pad}# from {}\n", describe(source)));
            current = Some(source.clone());
        }
        let mut patchers: Vec<String> = Vec::new();
        for (_, node) in &entry.raw.keys {
            let own = Arc::ptr_eq(&node.origin.source, source) && node.origin.path.starts_with(&entry.origin.path);
            if !own {
                let d = describe(&node.origin.source);
                if !patchers.contains(&d) {
                    patchers.push(d);
                }
            }
        }
        if !patchers.is_empty() {
            out.push_str(&format!("{pad}# patched by {}\n", patchers.join(", ")));
        }
        let mut row = serde_yaml::Mapping::new();
        // Keys another file set, with where: `file:line (layer)`.
        let mut set_by: Vec<(Yaml, String)> = Vec::new();
        let container = entry.is_container() && entry.problems.is_empty();
        for (key, node) in &entry.raw.keys {
            let name = key.as_str().unwrap_or_default();
            let own = Arc::ptr_eq(&node.origin.source, source) && node.origin.path.starts_with(&entry.origin.path);
            if !own {
                set_by.push((key.clone(), format!("{} ({})", node.origin.locate(), node.origin.source.role)));
            }
            if container && matches!(name, "config" | "group" | "name") {
                continue;
            }
            let mut value = node.value.clone();
            if name == "name" && entry.base_dir != root_dir {
                if let Some(n) = value.as_str().filter(|n| n.starts_with("./") || n.starts_with("../")) {
                    value = Yaml::String(absolute(&entry.base_dir.join(n)));
                }
            }
            // An include left unexpanded (it failed) keeps pointing at the
            // same file wherever the output is saved.
            if name == "config" && !container && matches!(entry.kind, EntryKind::Include { .. }) {
                if let Yaml::Mapping(map) = &mut value {
                    if let Some(Yaml::String(p)) = map.get_mut("path") {
                        if !Path::new(p.as_str()).is_absolute() {
                            *p = absolute(&entry.base_dir.join(p.as_str()));
                        }
                    }
                }
            }
            row.insert(key.clone(), value);
        }
        let mut text = String::new();
        if container {
            let mut head = serde_yaml::Mapping::new();
            if let Some(id) = entry.raw.get("id") {
                head.insert(Yaml::String("id".into()), id.value.clone());
            }
            head.insert(Yaml::String("name".into()), Yaml::String("cordis:group".into()));
            head.insert(Yaml::String("group".into()), Yaml::Bool(true));
            for (k, v) in row {
                if k.as_str() != Some("id") {
                    head.insert(k, v);
                }
            }
            block(&mut text, &Yaml::Mapping(head), indent + 2, show);
            out.push_str(&pad);
            out.push_str("- ");
            out.push_str(text.get(indent + 2..).unwrap_or_default());
            if let EntryKind::Include { file, patches } = &entry.kind {
                out.push_str(&format!("{pad}  # include of {} with {patches} patches, expanded\n", file.display()));
            }
            if entry.children.is_empty() {
                out.push_str(&format!("{pad}  config: []\n"));
            } else {
                out.push_str(&format!("{pad}  config:\n"));
                list(out, &entry.children, indent + 4, Some(source), root_dir, show);
            }
        } else if row.is_empty() {
            out.push_str(&format!("{pad}- {{}}\n"));
        } else {
            for (key, value) in row {
                let mut one = serde_yaml::Mapping::new();
                let at = set_by.iter().find(|(k, _)| *k == key).map(|(_, at)| at.clone());
                one.insert(key, value);
                let mut part = String::new();
                block(&mut part, &Yaml::Mapping(one), indent + 2, show);
                if let Some(at) = at {
                    // On the key's own line (the first), joined to the
                    // comment there already.
                    let end = part.find('\n').unwrap_or(part.len());
                    let joined = if part[..end].contains("  # now: ") { format!("; set by {at}") } else { format!("  # set by {at}") };
                    part.insert_str(end, &joined);
                }
                text.push_str(&part);
            }
            out.push_str(&pad);
            out.push_str("- ");
            out.push_str(text.get(indent + 2..).unwrap_or("{}\n"));
        }
    }
}

/// `path` as an absolute path (against the current folder when relative),
/// `.` and `..` resolved lexically.
fn absolute(path: &Path) -> String {
    let full = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = std::path::PathBuf::new();
    for part in full.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.display().to_string()
}

/// A scalar's text, or an empty collection's (`[]`, `{}`); `None` for a
/// collection with items.
fn scalar(v: &Yaml) -> Option<String> {
    Some(match v {
        Yaml::Null => "null".into(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Number(n) => n.to_string(),
        Yaml::String(s) => string(s),
        Yaml::Sequence(items) if items.is_empty() => "[]".into(),
        Yaml::Mapping(map) if map.is_empty() => "{}".into(),
        Yaml::Sequence(_) | Yaml::Mapping(_) => return None,
        Yaml::Tagged(t) if is_js_tag(&t.tag) => format!("!!js {}", string_quoted(&js_source(v).unwrap_or_default())),
        Yaml::Tagged(t) => format!("{} {}", t.tag, scalar(&t.value).unwrap_or_else(|| "null".into())),
    })
}

/// For a `!!js` value, a comment with the value it has now
/// (`  # now: 2`), evaluated as the host would for this run with what
/// `cordis config` has: the environment and the platform, but no running
/// services (an expression that reads `ctx` says it is known only once the
/// host runs). An expression that reads `process.env` is not evaluated
/// unless `show`. Empty for any other value.
fn value_now(v: &Yaml, show: bool) -> String {
    let Yaml::Tagged(t) = v else { return String::new() };
    if !is_js_tag(&t.tag) {
        return String::new();
    }
    let Some(source) = js_source(v) else { return String::new() };
    if !show && source.contains("process.env") {
        return "  # now: hidden, it reads process.env (`cordis config --show-values` shows it)".into();
    }
    let text = match crate::expr::evaluate(&source, &serde_json::Map::new()) {
        Ok(Some(value)) => value.to_string(),
        Ok(None) => "undefined (a key with this value is left out)".into(),
        Err(_) if source.contains("ctx") => "known once the host runs (it reads a service)".into(),
        Err(e) => format!("does not evaluate: {}", e.to_string().lines().next().unwrap_or_default()),
    };
    let text: String = text.chars().map(|c| if c.is_control() || needs_escape(c) { ' ' } else { c }).collect();
    let short: String = text.chars().take(160).collect();
    let ellipsis = if short.len() < text.len() { "…" } else { "" };
    format!("  # now: {short}{ellipsis}")
}

/// A double-quoted YAML string. JSON's escapes are YAML's, but JSON leaves
/// some characters raw that YAML does not read back as written: DEL and
/// the C1 controls are refused, and U+0085, U+2028 and U+2029 are line
/// breaks to a YAML reader. Those are escaped as `\uXXXX`.
fn string_quoted(s: &str) -> String {
    let json = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    if !json.chars().any(needs_escape) {
        return json;
    }
    json.chars().map(|c| if needs_escape(c) { format!("\\u{:04x}", c as u32) } else { c.to_string() }).collect()
}

fn needs_escape(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// A string as a plain scalar when it reads back as the same string, else
/// double-quoted (JSON escapes are valid YAML escapes).
fn string(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_'))
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-' | '@' | ':' | '+'))
        && !s.ends_with(':')
        && matches!(serde_yaml::from_str::<Yaml>(s), Ok(Yaml::String(ref back)) if back == s);
    if safe {
        s.to_string()
    } else {
        string_quoted(s)
    }
}

/// Writes a collection with items as block YAML, every line indented by
/// `indent` spaces.
fn block(out: &mut String, v: &Yaml, indent: usize, show: bool) {
    let pad = " ".repeat(indent);
    match v {
        Yaml::Mapping(map) => {
            for (k, val) in map {
                let key = scalar(k).unwrap_or_else(|| "\"?\"".into());
                match scalar(val) {
                    Some(s) => out.push_str(&format!("{pad}{key}: {s}{}\n", value_now(val, show))),
                    None => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        block(out, val, indent + 2, show);
                    }
                }
            }
        }
        Yaml::Sequence(items) => {
            for item in items {
                match scalar(item) {
                    Some(s) => out.push_str(&format!("{pad}- {s}{}\n", value_now(item, show))),
                    None => {
                        let mut inner = String::new();
                        block(&mut inner, item, indent + 2, show);
                        out.push_str(&pad);
                        out.push_str("- ");
                        out.push_str(inner.get(indent + 2..).unwrap_or_default());
                    }
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other).unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn strings_yaml_reads_as_breaks_or_refuses_are_escaped() {
        for text in ["a\u{7f}b", "a\u{80}b\u{9f}", "a \u{2028} b", "a\u{85}b", "x\u{2029}", "\u{feff}bom"] {
            let quoted = string_quoted(text);
            let back: String =
                serde_yaml::from_str(&format!("v: {quoted}\n")).map(|m: std::collections::BTreeMap<String, String>| m["v"].clone()).unwrap();
            assert_eq!(back, text, "{quoted}");
        }
    }

    #[test]
    fn composed_output_reads_back_as_the_same_tree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        std::fs::write(
            dir.path().join("sub/base.yml"),
            "- id: a\n  name: x\n  config: {k: 1, s: 'yes', n: '12', e: ''}\n- id: b\n  name: ./lib/liby.so\n",
        )
        .unwrap();
        let root = dir.path().join("cordis.yml");
        std::fs::write(
            &root,
            "- id: inc\n  name: '@deepseek-ai/cordis-plugin-include'\n  config:\n    path: sub/base.yml\n    patches:\n      - id: a\n        config: {k: 2, when: !!js \"process.env.X ?? 'z'\"}\n- id: t\n  name: '@deepseek-ai/dsh-tool-todo'\n  disabled: !!js process.platform === 'win32'\n  isolate: {svc: true}\n  config:\n    list: [1, {a: [x, 'two words']}]\n",
        )
        .unwrap();
        let c = Composition::read(&root).unwrap();
        let text = composed_yaml(&c);
        assert!(text.contains("# from "), "{text}");
        assert!(text.contains("!!js \"process.env.X ?? 'z'\""), "{text}");
        let again = Composition::parse("out.yml", dir.path().to_path_buf(), text.clone()).unwrap();
        let ids = |c: &Composition| c.walk().iter().map(|e| (e.id.clone(), e.name.clone())).collect::<Vec<_>>();
        let first: Vec<(String, String)> = ids(&c).into_iter().map(|(id, n)| (id, if n.ends_with("liby.so") { "lib".into() } else { n })).collect();
        let second: Vec<(String, String)> =
            ids(&again).into_iter().map(|(id, n)| (id, if n.ends_with("liby.so") { "lib".into() } else { n })).collect();
        assert_eq!(first.iter().map(|p| &p.0).collect::<Vec<_>>(), second.iter().map(|p| &p.0).collect::<Vec<_>>(), "{text}");
        let a1 = c.walk()[1].config().unwrap().value.clone();
        let a2 = again.walk()[1].config().unwrap().value.clone();
        assert_eq!(a1, a2, "{text}");
        let t2 = again.walk().into_iter().find(|e| e.id == "t").unwrap();
        assert!(t2.problems.is_empty(), "{:?}\n{text}", t2.problems);
        assert_eq!(t2.disabled, crate::composition::Switch::Expr("process.platform === 'win32'".into()));
        assert_eq!(t2.config().unwrap().value, c.walk().into_iter().find(|e| e.id == "t").unwrap().config().unwrap().value);
        let b = again.walk().into_iter().find(|e| e.id == "inc/b").unwrap();
        assert_eq!(PathBuf::from(&b.name), dir.path().join("sub/lib/liby.so"));
    }
}
