//! Config values a plugin marks secret, hidden where a config is shown.
//!
//! A plugin marks a config key secret with the JSON Schema annotation
//! `writeOnly: true` (the value is written, never read back). Where the
//! host shows an entry's evaluated config (the dev console's `status`),
//! every string, number and boolean under such a key is replaced by
//! [`HIDDEN`]; object keys stay, so a header's or variable's name is
//! still seen. `$ref` to `#/$defs/…` or `#/definitions/…` is followed.

use serde_json::Value;

/// What a hidden value is shown as.
pub const HIDDEN: &str = "(hidden)";

/// `config` with the values under `writeOnly` keys of `schema` hidden.
pub fn redact(config: &Value, schema: &Value) -> Value {
    walk(config, schema, schema, 0)
}

/// How deep `$ref`s and nesting are followed.
const MAX_DEPTH: usize = 64;

fn walk(value: &Value, node: &Value, root: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return value.clone();
    }
    let node = resolve(node, root, depth);
    if node.get("writeOnly").and_then(Value::as_bool) == Some(true) {
        return hide(value);
    }
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, inner)| {
                    let child = node
                        .get("properties")
                        .and_then(|p| p.get(key))
                        .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
                        .unwrap_or(&Value::Null);
                    (key.clone(), walk(inner, child, root, depth + 1))
                })
                .collect(),
        ),
        Value::Array(items) => {
            let child = node.get("items").unwrap_or(&Value::Null);
            Value::Array(items.iter().map(|item| walk(item, child, root, depth + 1)).collect())
        }
        other => other.clone(),
    }
}

/// `node`, or what its `$ref` names in `root`.
pub(super) fn resolve<'a>(node: &'a Value, root: &'a Value, depth: usize) -> &'a Value {
    let Some(reference) = node.get("$ref").and_then(Value::as_str) else { return node };
    let Some(pointer) = reference.strip_prefix('#') else { return node };
    match root.pointer(pointer) {
        Some(target) if depth < MAX_DEPTH => resolve(target, root, depth + 1),
        _ => node,
    }
}

fn hide(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), hide(v))).collect()),
        Value::Array(items) => Value::Array(items.iter().map(hide).collect()),
        Value::Null => Value::Null,
        _ => Value::String(HIDDEN.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn write_only_values_are_hidden_and_their_keys_kept() {
        let schema = json!({
            "type": "object",
            "properties": {
                "headers": {"type": "object", "additionalProperties": {"type": "string"}, "writeOnly": true},
                "url": {"type": "string"},
                "nested": {"$ref": "#/$defs/Nested"},
                "list": {"type": "array", "items": {"type": "string", "writeOnly": true}}
            },
            "$defs": {"Nested": {"type": "object", "properties": {"password": {"type": "string", "writeOnly": true}, "user": {"type": "string"}}}}
        });
        let config = json!({
            "headers": {"Authorization": "Bearer secret"},
            "url": "https://x",
            "nested": {"password": "pw", "user": "me"},
            "list": ["a", "b"],
            "other": {"k": "v"}
        });
        assert_eq!(
            redact(&config, &schema),
            json!({
                "headers": {"Authorization": HIDDEN},
                "url": "https://x",
                "nested": {"password": HIDDEN, "user": "me"},
                "list": [HIDDEN, HIDDEN],
                "other": {"k": "v"}
            })
        );
    }
}
