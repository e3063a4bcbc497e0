//! The durable-log invariant of `todo/write` events.
//!
//! The host runs it on every append and again on every replay, so
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
//! the deployment tightens its policy. Like the tool, it bounds neither the number
//! of todos nor their length: a log is never refused for its size.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;

use cordis_abi::schema::describe_value;
use cordis_abi::sdk::EventInvariant;
use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
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
    // The host runs this on every append and on every replayed event, so
    // data that is plainly fine is checked without building a `Value`.
    if certainly_valid(data) {
        return Ok(());
    }
    let value: Value = serde_json::from_str(data).map_err(|e| format!("todo/write data is not valid JSON ({e})"))?;
    check_todo_write_value(&value)
}

/// Whether `data` satisfies the invariant, decided on borrowed strings by a
/// reader that accepts only the exact shape the invariant allows (an object
/// whose one key is `todos`, an array of objects with exactly `content` and
/// `status`, strings for both). `false` means "not certainly": an error, or
/// an odd but possibly valid input such as a repeated key, which
/// [`check_todo_write_value`] then decides and words. So this never accepts
/// what the full check rejects.
fn certainly_valid(data: &str) -> bool {
    let Ok(Fast(items)) = serde_json::from_str::<Fast<'_>>(data) else {
        return false;
    };
    let good = |item: &FastItem<'_>| {
        let content = item.content.as_ref();
        !content.is_empty() && js_trim(content) == content && Status::from_wire(&item.status).is_some()
    };
    if !items.iter().all(good) {
        return false;
    }
    // Unique contents: pairwise for short lists, hashed for long ones.
    if items.len() <= 16 {
        items.iter().enumerate().all(|(i, a)| items[..i].iter().all(|b| a.content.as_ref() != b.content.as_ref()))
    } else {
        let mut seen = HashSet::with_capacity(items.len());
        items.iter().all(|item| seen.insert(item.content.as_ref()))
    }
}

/// `{"todos": [...]}`, read only from a JSON object.
struct Fast<'a>(Vec<FastItem<'a>>);

/// `{"content": "...", "status": "..."}`, read only from a JSON object.
struct FastItem<'a> {
    content: Cow<'a, str>,
    status: Cow<'a, str>,
}

/// A JSON string, borrowed from the data when it has no escapes.
struct Text<'a>(Cow<'a, str>);

fn uncommon<E: de::Error>() -> E {
    E::custom("not the common shape")
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Fast<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fast<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object with one key, todos")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fast<'de>, A::Error> {
                let mut todos = None;
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    if key != "todos" || todos.is_some() {
                        return Err(uncommon());
                    }
                    todos = Some(map.next_value::<Vec<FastItem<'de>>>()?);
                }
                todos.map(Fast).ok_or_else(uncommon)
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for FastItem<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FastItem<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object with content and status")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FastItem<'de>, A::Error> {
                let (mut content, mut status) = (None, None);
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    let slot = match key.as_ref() {
                        "content" => &mut content,
                        "status" => &mut status,
                        _ => return Err(uncommon()),
                    };
                    if slot.is_some() {
                        return Err(uncommon());
                    }
                    *slot = Some(map.next_value::<Text<'de>>()?.0);
                }
                match (content, status) {
                    (Some(content), Some(status)) => Ok(FastItem { content, status }),
                    _ => Err(uncommon()),
                }
            }
        }
        d.deserialize_map(V)
    }
}

/// [`check_todo_write`] on already parsed data.
///
/// # Errors
/// As [`check_todo_write`].
pub fn check_todo_write_value(value: &Value) -> Result<(), String> {
    let Value::Object(map) = value else {
        return Err(format!("$ must be an object holding a todos list, got {}", describe_value(value)));
    };
    if let Some(key) = map.keys().find(|k| k.as_str() != "todos") {
        return Err(format!("{} is not an allowed key in todo/write data (allowed: todos)", key_path("$", key)));
    }
    let Some(todos) = map.get("todos") else {
        return Err("$.todos is required".into());
    };
    let Value::Array(items) = todos else {
        return Err(format!("$.todos must be an array, got {}", describe_value(todos)));
    };
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let at = format!("$.todos[{index}]");
        let Value::Object(fields) = item else {
            return Err(format!("{at} must be an object, got {}", describe_value(item)));
        };
        let content = match fields.get("content") {
            None => return Err(format!("{at}.content is required")),
            Some(Value::String(s)) => s.as_str(),
            Some(other) => return Err(format!("{at}.content must be a string, got {}", describe_value(other))),
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
            return Err(format!("{at}.content {} repeats $.todos[{first}].content; contents must be unique", Value::String(content.to_string())));
        }
        match fields.get("status") {
            None => return Err(format!("{at}.status is required")),
            Some(Value::String(s)) if Status::from_wire(s).is_some() => {}
            Some(Value::String(s)) => {
                return Err(format!("{at}.status {} is not a known status (pending, in_progress, completed)", Value::String(s.clone())))
            }
            Some(other) => return Err(format!("{at}.status must be a string, got {}", describe_value(other))),
        }
        if let Some(key) = fields.keys().find(|k| !matches!(k.as_str(), "content" | "status")) {
            return Err(format!("{} is not an allowed key (allowed: content, status)", key_path(&at, key)));
        }
    }
    Ok(())
}

fn key_path(parent: &str, key: &str) -> String {
    let plain = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
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
        let err = check(json!({"todos": [{"content": " padded", "status": "pending"}]})).unwrap_err();
        assert!(err.starts_with("$.todos[0].content \" padded\""), "{err}");
        let err = check(json!({"todos": [{"content": "bom\u{FEFF}", "status": "pending"}]})).unwrap_err();
        assert!(err.contains("$.todos[0].content"), "{err}");
        // U+0085 is not JavaScript whitespace, so a content ending in it is trimmed.
        assert_eq!(check(json!({"todos": [{"content": "nel\u{0085}", "status": "pending"}]})), Ok(()));
    }

    #[test]
    fn rejects_empty_content() {
        let err = check(json!({"todos": [{"content": "ok", "status": "pending"}, {"content": "", "status": "pending"}]})).unwrap_err();
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
        assert_eq!(err, "$.todos[2].content \"deploy\" repeats $.todos[0].content; contents must be unique");
    }

    #[test]
    fn rejects_unknown_status() {
        let err = check(json!({"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "done"}]})).unwrap_err();
        assert_eq!(err, "$.todos[1].status \"done\" is not a known status (pending, in_progress, completed)");
        assert!(check(json!({"todos": [{"content": "a", "status": "PENDING"}]})).is_err());
        let err = check(json!({"todos": [{"content": "a", "status": 1}]})).unwrap_err();
        assert_eq!(err, "$.todos[0].status must be a string, got the number 1");
    }

    #[test]
    fn rejects_wrong_shapes() {
        assert_eq!(check(json!({"todos": "[]"})).unwrap_err(), "$.todos must be an array, got the string \"[]\"");
        assert_eq!(check(json!({"todos": {}})).unwrap_err(), "$.todos must be an array, got an object");
        assert_eq!(check(json!({})).unwrap_err(), "$.todos is required");
        assert_eq!(check(json!([])).unwrap_err(), "$ must be an object holding a todos list, got an array of 0 items");
        assert_eq!(check(json!({"todos": [null]})).unwrap_err(), "$.todos[0] must be an object, got null");
        assert_eq!(check(json!({"todos": [{"status": "pending"}]})).unwrap_err(), "$.todos[0].content is required");
        assert_eq!(check(json!({"todos": [{"content": "x"}]})).unwrap_err(), "$.todos[0].status is required");
        assert_eq!(
            check(json!({"todos": [{"content": 5, "status": "pending"}]})).unwrap_err(),
            "$.todos[0].content must be a string, got the number 5"
        );
        assert!(check_todo_write("{not json").unwrap_err().starts_with("todo/write data is not valid JSON"));
    }

    #[test]
    fn rejects_unknown_keys() {
        assert_eq!(
            check(json!({"todos": [{"content": "x", "status": "pending", "activeForm": "x-ing"}]})).unwrap_err(),
            "$.todos[0].activeForm is not an allowed key (allowed: content, status)"
        );
        assert_eq!(check(json!({"todos": [], "merge": true})).unwrap_err(), "$.merge is not an allowed key in todo/write data (allowed: todos)");
        assert!(check(json!({"todos": [], "odd key": 1})).unwrap_err().starts_with("$[\"odd key\"]"));
    }

    #[test]
    fn works_as_an_event_invariant() {
        let invariant = TodoWriteInvariant;
        assert_eq!(invariant.validate(r#"{"todos":[{"content":"a","status":"in_progress"}]}"#), Ok(()));
        assert!(invariant.validate(r#"{"todos":[{"content":"a ","status":"in_progress"}]}"#).is_err());
    }

    /// The full check's verdict on `data`, without the shortcut.
    fn full(data: &str) -> Result<(), String> {
        let value: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
        check_todo_write_value(&value)
    }

    #[test]
    fn shortcut_takes_the_common_case() {
        for data in [
            r#"{"todos":[]}"#,
            r#"{"todos":[{"content":"a","status":"pending"},{"content":"b","status":"in_progress"},{"content":"c","status":"completed"}]}"#,
            r#" { "todos" : [ { "status" : "pending" , "content" : "tab\tinside" } ] } "#,
            r#"{"todos":[{"content":"caf\u00e9","status":"pending"}]}"#,
        ] {
            assert!(certainly_valid(data), "{data}");
            assert_eq!(full(data), Ok(()), "{data}");
        }
        let long: Vec<Value> = (0..40).map(|i| json!({"content": format!("item {i}"), "status": "pending"})).collect();
        assert!(certainly_valid(&json!({ "todos": long }).to_string()));
    }

    #[test]
    fn shortcut_never_accepts_what_the_full_check_rejects() {
        let mut repeated: Vec<Value> = (0..40).map(|i| json!({"content": format!("item {i}"), "status": "pending"})).collect();
        repeated.push(json!({"content": "item 7", "status": "completed"}));
        let repeated = json!({ "todos": repeated }).to_string();
        let cases = [
            // Shapes serde would read as a struct from an array, or as an
            // enum from a map.
            r#"[[{"content":"a","status":"pending"}]]"#,
            r#"{"todos":[["a","pending"]]}"#,
            r#"{"todos":[{"content":"a","status":{"pending":null}}]}"#,
            r#"{"todos":[{"content":["a"],"status":"pending"}]}"#,
            r#"{"todos":{"0":{"content":"a","status":"pending"}}}"#,
            // Escapes that decode to untrimmed or empty content.
            r#"{"todos":[{"content":"a\u0020","status":"pending"}]}"#,
            r#"{"todos":[{"content":"\ufeffa","status":"pending"}]}"#,
            r#"{"todos":[{"content":"","status":"pending"}]}"#,
            // Duplicates, unknown keys, missing keys, unknown statuses.
            r#"{"todos":[{"content":"a","status":"pending"},{"content":"a","status":"completed"}]}"#,
            repeated.as_str(),
            r#"{"todos":[{"content":"a","status":"pending","note":1}]}"#,
            r#"{"todos":[],"merge":true}"#,
            r#"{"todos":[{"content":"a"}]}"#,
            r#"{}"#,
            r#"{"todos":[{"content":"a","status":"done"}]}"#,
            r#"{"todos":[{"content":"a","status":"Pending"}]}"#,
            r#"{"todos":null}"#,
            r#"null"#,
            r#"{"todos":[]} x"#,
        ];
        for data in cases {
            assert!(!certainly_valid(data), "{data}");
            assert!(check_todo_write(data).is_err(), "{data}");
        }
        // Repeated keys: the shortcut steps aside, the full check decides
        // (the last value wins, as in the reference's JSON.parse).
        for data in [r#"{"todos":1,"todos":[]}"#, r#"{"todos":[{"content":"a","content":"b","status":"pending"}]}"#] {
            assert!(!certainly_valid(data), "{data}");
            assert_eq!(check_todo_write(data), full(data), "{data}");
        }
    }
}
