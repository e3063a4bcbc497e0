//! The durable-log invariant of `todo/write` events.
//!
//! The host runs it on every append and again on every replay (DESIGN §7), so
//! it describes what a stored list may look like, independent of the
//! deployment:
//!
//! - the data is an object `{"todos": [...]}` with no other key;
//! - every item is an object with exactly `content` and `status`;
//! - `content` is a string, non-empty, already trimmed (equal to its
//!   [`js_trim`]) and unique within the list (case-sensitive);
//! - `status` is one of `pending`, `in_progress`, `completed`.
//!
//! It is deliberately **silent on how many items are `in_progress`**: a log
//! written while a deployment allowed parallel work must still replay after
//! the deployment tightens its policy (seed note "Allow several `in_progress`
//! todos at once"; DESIGN §8). For the same reason it does not enforce the
//! tool's size limits ([`crate::tool::MAX_TODOS`],
//! [`crate::tool::MAX_CONTENT_CHARS`]): those are call policy and may change
//! between versions; the log must not.

use std::collections::HashMap;

use cordis_abi::schema::describe_value;
use cordis_abi::sdk::EventInvariant;
use serde_json::Value;

use crate::item::Status;
use crate::trim::js_trim;

/// The `todo/write` invariant as an [`EventInvariant`] object, registered by
/// the plugin's `apply` with the event type.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoWriteInvariant;

impl EventInvariant for TodoWriteInvariant {
    fn validate(&self, data: &str) -> Result<(), String> {
        check_todo_write(data)
    }
}

/// Checks one `todo/write` event's data (JSON text) against the invariant
/// described in the [module docs](self).
///
/// # Errors
/// One line naming the first offending `$`-rooted path and value, e.g.
/// `$.todos[1].status "done" is not a known status (pending, in_progress, completed)`.
pub fn check_todo_write(data: &str) -> Result<(), String> {
    let value: Value = serde_json::from_str(data)
        .map_err(|e| format!("todo/write data is not valid JSON ({e})"))?;
    check_todo_write_value(&value)
}

/// [`check_todo_write`] on already parsed data.
///
/// # Errors
/// As [`check_todo_write`].
pub fn check_todo_write_value(value: &Value) -> Result<(), String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "$ must be an object holding a todos list, got {}",
            describe_value(value)
        ));
    };
    if let Some(key) = map.keys().find(|k| k.as_str() != "todos") {
        return Err(format!(
            "{} is not an allowed key in todo/write data (allowed: todos)",
            key_path("$", key)
        ));
    }
    let Some(todos) = map.get("todos") else {
        return Err("$.todos is required".into());
    };
    let Value::Array(items) = todos else {
        return Err(format!(
            "$.todos must be an array, got {}",
            describe_value(todos)
        ));
    };
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let at = format!("$.todos[{index}]");
        let Value::Object(fields) = item else {
            return Err(format!(
                "{at} must be an object, got {}",
                describe_value(item)
            ));
        };
        let content = match fields.get("content") {
            None => return Err(format!("{at}.content is required")),
            Some(Value::String(s)) => s.as_str(),
            Some(other) => {
                return Err(format!(
                    "{at}.content must be a string, got {}",
                    describe_value(other)
                ))
            }
        };
        if content.is_empty() {
            return Err(format!("{at}.content must not be empty"));
        }
        if js_trim(content) != content {
            return Err(format!(
                "{at}.content {} has leading or trailing whitespace; stored contents are trimmed",
                Value::String(content.to_string())
            ));
        }
        if let Some(first) = seen.insert(content, index) {
            return Err(format!(
                "{at}.content {} repeats $.todos[{first}].content; contents must be unique",
                Value::String(content.to_string())
            ));
        }
        match fields.get("status") {
            None => return Err(format!("{at}.status is required")),
            Some(Value::String(s)) if Status::from_wire(s).is_some() => {}
            Some(Value::String(s)) => {
                return Err(format!(
                    "{at}.status {} is not a known status (pending, in_progress, completed)",
                    Value::String(s.clone())
                ))
            }
            Some(other) => {
                return Err(format!(
                    "{at}.status must be a string, got {}",
                    describe_value(other)
                ))
            }
        }
        if let Some(key) = fields
            .keys()
            .find(|k| !matches!(k.as_str(), "content" | "status"))
        {
            return Err(format!(
                "{} is not an allowed key (allowed: content, status)",
                key_path(&at, key)
            ));
        }
    }
    Ok(())
}

fn key_path(parent: &str, key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", Value::String(key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(value: Value) -> Result<(), String> {
        check_todo_write(&value.to_string())
    }

    #[test]
    fn accepts_several_in_progress() {
        let data = json!({"todos": [
            {"content": "read the code", "status": "in_progress"},
            {"content": "watch the background build", "status": "in_progress"},
            {"content": "write the fix", "status": "pending"},
        ]});
        assert_eq!(check(data), Ok(()));
    }

    #[test]
    fn accepts_empty_list_and_every_status() {
        assert_eq!(check(json!({"todos": []})), Ok(()));
        let data = json!({"todos": [
            {"content": "a", "status": "pending"},
            {"content": "b", "status": "in_progress"},
            {"content": "c", "status": "completed"},
        ]});
        assert_eq!(check(data), Ok(()));
    }

    #[test]
    fn rejects_untrimmed_content() {
        let err =
            check(json!({"todos": [{"content": " padded", "status": "pending"}]})).unwrap_err();
        assert!(err.starts_with("$.todos[0].content \" padded\""), "{err}");
        let err =
            check(json!({"todos": [{"content": "bom\u{FEFF}", "status": "pending"}]})).unwrap_err();
        assert!(err.contains("$.todos[0].content"), "{err}");
        // U+0085 is not JavaScript whitespace, so a content ending in it is trimmed.
        assert_eq!(
            check(json!({"todos": [{"content": "nel\u{0085}", "status": "pending"}]})),
            Ok(())
        );
    }

    #[test]
    fn rejects_empty_content() {
        let err = check(json!({"todos": [{"content": "ok", "status": "pending"}, {"content": "", "status": "pending"}]}))
            .unwrap_err();
        assert_eq!(err, "$.todos[1].content must not be empty");
    }

    #[test]
    fn rejects_duplicate_content() {
        let err = check(json!({"todos": [
            {"content": "deploy", "status": "pending"},
            {"content": "Deploy", "status": "pending"},
            {"content": "deploy", "status": "completed"},
        ]}))
        .unwrap_err();
        assert_eq!(
            err,
            "$.todos[2].content \"deploy\" repeats $.todos[0].content; contents must be unique"
        );
    }

    #[test]
    fn rejects_unknown_status() {
        let err = check(json!({"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "done"}]}))
            .unwrap_err();
        assert_eq!(
            err,
            "$.todos[1].status \"done\" is not a known status (pending, in_progress, completed)"
        );
        assert!(check(json!({"todos": [{"content": "a", "status": "PENDING"}]})).is_err());
        let err = check(json!({"todos": [{"content": "a", "status": 1}]})).unwrap_err();
        assert_eq!(err, "$.todos[0].status must be a string, got the number 1");
    }

    #[test]
    fn rejects_wrong_shapes() {
        assert_eq!(
            check(json!({"todos": "[]"})).unwrap_err(),
            "$.todos must be an array, got the string \"[]\""
        );
        assert_eq!(
            check(json!({"todos": {}})).unwrap_err(),
            "$.todos must be an array, got an object"
        );
        assert_eq!(check(json!({})).unwrap_err(), "$.todos is required");
        assert_eq!(
            check(json!([])).unwrap_err(),
            "$ must be an object holding a todos list, got an array of 0 items"
        );
        assert_eq!(
            check(json!({"todos": [null]})).unwrap_err(),
            "$.todos[0] must be an object, got null"
        );
        assert_eq!(
            check(json!({"todos": [{"status": "pending"}]})).unwrap_err(),
            "$.todos[0].content is required"
        );
        assert_eq!(
            check(json!({"todos": [{"content": "x"}]})).unwrap_err(),
            "$.todos[0].status is required"
        );
        assert_eq!(
            check(json!({"todos": [{"content": 5, "status": "pending"}]})).unwrap_err(),
            "$.todos[0].content must be a string, got the number 5"
        );
        assert!(check_todo_write("{not json")
            .unwrap_err()
            .starts_with("todo/write data is not valid JSON"));
    }

    #[test]
    fn rejects_unknown_keys() {
        assert_eq!(
            check(json!({"todos": [{"content": "x", "status": "pending", "activeForm": "x-ing"}]}))
                .unwrap_err(),
            "$.todos[0].activeForm is not an allowed key (allowed: content, status)"
        );
        assert_eq!(
            check(json!({"todos": [], "merge": true})).unwrap_err(),
            "$.merge is not an allowed key in todo/write data (allowed: todos)"
        );
        assert!(check(json!({"todos": [], "odd key": 1}))
            .unwrap_err()
            .starts_with("$[\"odd key\"]"));
    }

    #[test]
    fn works_as_an_event_invariant() {
        let invariant = TodoWriteInvariant;
        assert_eq!(
            invariant.validate(r#"{"todos":[{"content":"a","status":"in_progress"}]}"#),
            Ok(())
        );
        assert!(invariant
            .validate(r#"{"todos":[{"content":"a ","status":"in_progress"}]}"#)
            .is_err());
    }
}
