//! Config places where a plugin needs a value, so that a `!!js` expression
//! that is `undefined` there fails the entry instead of vanishing.
//!
//! A composition leaves out a key whose expression is `undefined`, as
//! `JSON.stringify` does, which suits an optional setting
//! (`!!js process.env.MODE`). For a value handed on as it is, such as a
//! variable set for a server (`GH_TOKEN: !!js process.env.GH_TOKEN`), a
//! silently missing key is a fault found much later. A plugin marks such a
//! key with the JSON Schema annotation [`KEYWORD`]` : true`; every
//! `undefined` expression at or below it is then an error naming the file,
//! line, entry, key, expression and the variables it read that are not
//! set. `$ref` to `#/$defs/…` or `#/definitions/…` is followed.

use serde_json::Value;

use cordis_composition::composition::UndefinedValue;
use cordis_composition::positions::Step;
use cordis_composition::Entry;

use super::redact::resolve;

/// The annotation a plugin's config schema puts on a key whose values
/// must not be `undefined`.
pub const KEYWORD: &str = "x-cordis-defined";

/// How deep `$ref`s and nesting are followed.
const MAX_DEPTH: usize = 64;

/// One message for each place of `undefined` that `schema` marks with
/// [`KEYWORD`], naming `plugin`; empty when there is none.
pub fn refused(entry: &Entry, plugin: &str, schema: &Value, undefined: &[UndefinedValue]) -> Vec<String> {
    undefined
        .iter()
        .filter(|u| marked(schema, &u.path))
        .map(|u| {
            let unset = unset_variables(&u.source);
            let why = match unset.as_slice() {
                [] => String::new(),
                [one] => format!(" ({one} is not set in cordis's environment)"),
                many => format!(" ({} are not set in cordis's environment)", many.join(", ")),
            };
            format!(
                "{}: entry {}: config{} is `!!js {}`, which is undefined{why}; plugin {plugin} needs a value there",
                entry.locate_config(&u.path),
                entry.id,
                dotted(&u.path),
                u.source.trim()
            )
        })
        .collect()
}

/// Whether a schema node on the way from `schema`'s root to `path`
/// carries [`KEYWORD`]` : true`.
fn marked(schema: &Value, path: &[Step]) -> bool {
    let mut node = schema;
    for (depth, step) in path.iter().enumerate() {
        node = resolve(node, schema, depth);
        if is_marked(node) {
            return true;
        }
        let child = match step {
            Step::Key(key) => node.get("properties").and_then(|p| p.get(key)).or_else(|| node.get("additionalProperties").filter(|a| a.is_object())),
            Step::Index(_) => node.get("items").filter(|i| i.is_object()),
        };
        match child {
            Some(child) if depth < MAX_DEPTH => node = child,
            _ => return false,
        }
    }
    is_marked(resolve(node, schema, path.len()))
}

fn is_marked(node: &Value) -> bool {
    node.get(KEYWORD).and_then(Value::as_bool) == Some(true)
}

/// `.env.GH_TOKEN`, `.args[2]`, `["a b"]`.
fn dotted(path: &[Step]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Key(k) if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') => format!(".{k}"),
            Step::Key(k) => format!("[{k:?}]"),
            Step::Index(i) => format!("[{i}]"),
        })
        .collect()
}

/// The names an expression reads as `process.env.NAME` or
/// `process.env['NAME']` that are not set in this process's environment,
/// each once, in order of appearance.
fn unset_variables(source: &str) -> Vec<String> {
    const PREFIX: &str = "process.env";
    let mut names: Vec<String> = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(PREFIX) {
        rest = &rest[at + PREFIX.len()..];
        let name: String = if let Some(after) = rest.strip_prefix('.') {
            after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$').collect()
        } else if let Some(after) = rest.strip_prefix('[') {
            let after = after.trim_start();
            match after.chars().next() {
                Some(quote @ ('\'' | '"' | '`')) => after[1..].split(quote).next().unwrap_or_default().to_string(),
                _ => String::new(),
            }
        } else {
            String::new()
        };
        if !name.is_empty() && std::env::var_os(&name).is_none() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(k: &str) -> Step {
        Step::Key(k.into())
    }

    #[test]
    fn a_mark_covers_its_key_and_everything_below() {
        let schema = json!({
            "type": "object",
            "properties": {
                "env": {"type": "object", "additionalProperties": {"type": "string"}, "x-cordis-defined": true},
                "nested": {"$ref": "#/$defs/Nested"},
                "list": {"type": "array", "items": {"type": "string", "x-cordis-defined": true}},
                "free": {"type": "object", "additionalProperties": {"type": "string"}}
            },
            "$defs": {"Nested": {"type": "object", "properties": {"token": {"type": "string", "x-cordis-defined": true}}}}
        });
        assert!(marked(&schema, &[key("env"), key("GH_TOKEN")]));
        assert!(marked(&schema, &[key("env")]));
        assert!(marked(&schema, &[key("nested"), key("token")]));
        assert!(marked(&schema, &[key("list"), Step::Index(3)]));
        assert!(!marked(&schema, &[key("nested"), key("other")]));
        assert!(!marked(&schema, &[key("free"), key("X")]));
        assert!(!marked(&schema, &[key("unknown")]));
        assert!(!marked(&json!(true), &[key("env"), key("X")]));
    }

    #[test]
    fn unset_variables_are_named_once_in_order() {
        let unset = "CORDIS_DEFINED_TEST_SURELY_UNSET";
        assert!(std::env::var_os(unset).is_none());
        let source = format!("process.env.{unset} ?? process.env['{unset}2'] ?? process.env[\"PATH\"] ?? process.env.{unset}");
        assert_eq!(unset_variables(&source), vec![unset.to_string(), format!("{unset}2")]);
        assert!(unset_variables("undefined").is_empty());
        assert!(unset_variables("process.env[name]").is_empty());
    }

    #[test]
    fn paths_read_as_in_javascript() {
        assert_eq!(dotted(&[key("env"), key("GH_TOKEN")]), ".env.GH_TOKEN");
        assert_eq!(dotted(&[key("args"), Step::Index(2)]), ".args[2]");
        assert_eq!(dotted(&[key("a b")]), "[\"a b\"]");
    }
}
