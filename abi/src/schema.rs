//! JSON Schema generation and validation shared by the host (entry config) and
//! the SDK (tool arguments), so both report violations in the same shape.
//!
//! Schemas are generated from Rust types with `schemars` (draft 7, the
//! dialect model APIs take for tool parameters, with subschemas inlined so a
//! model sees one self-contained object) and checked with `jsonschema`.
//! Draft 7 also keeps start-up cheap: `jsonschema` checks every schema
//! against its draft's meta-schema when compiling it, and the draft 7
//! meta-schema validator builds several times faster than the 2020-12 one
//! (measured by the boot benchmark in `bench/`). Every violation is reported with a `$`-rooted path in
//! the instance (`$.todos[0].status`), and violations are ordered by the
//! object they sit in (document order), then: missing keys, checks on present
//! values, unknown keys.

use std::cmp::Ordering;
use std::fmt;

use schemars::{generate::SchemaSettings, JsonSchema};
use serde_json::Value;

#[cfg(feature = "checker")]
mod checker;
#[cfg(feature = "checker")]
pub use checker::Checker;

/// Generates the JSON Schema of `T`: draft 7, subschemas inlined, no
/// `$schema` or root `title`. Each type's schema is generated once per
/// library and kept, by its `schemars` schema id (the type's path and
/// parameters): a plugin applied for many entries registers the same
/// tools each time.
pub fn schema_for<T: JsonSchema>() -> Value {
    static GENERATED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, Value>>> = std::sync::OnceLock::new();
    let id = T::schema_id();
    let generated = GENERATED.get_or_init(Default::default);
    if let Some(schema) = generated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(id.as_ref()) {
        return schema.clone();
    }
    let schema = generate::<T>();
    generated.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id.into_owned(), schema.clone());
    schema
}

fn generate<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut value {
        map.remove("title");
    }
    value
}

/// The schema itself is not a valid JSON Schema.
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON Schema: {0}")]
pub struct InvalidSchema(pub String);

/// One way an instance breaks a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where in the instance, `$`-rooted: `$`, `$.todos`, `$.todos[0].status`.
    pub path: String,
    /// The same place as segments, for callers that map it elsewhere (the
    /// host maps config paths to YAML lines).
    pub segments: Vec<Segment>,
    /// What was expected, starting with a verb: `is required`,
    /// `must be a boolean, got the string "yes"`.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.path, self.message)
    }
}

/// Joins violations into one line: `a; b; c`.
pub fn join(violations: &[Violation]) -> String {
    violations.iter().map(Violation::to_string).collect::<Vec<_>>().join("; ")
}

/// One step of a path inside an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
}

impl PartialOrd for Segment {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Segment {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Segment::Index(a), Segment::Index(b)) => a.cmp(b),
            (Segment::Key(a), Segment::Key(b)) => a.cmp(b),
            (Segment::Index(_), Segment::Key(_)) => Ordering::Less,
            (Segment::Key(_), Segment::Index(_)) => Ordering::Greater,
        }
    }
}

/// Formats segments as a `$`-rooted path: `$.todos[0]["odd key"]`.
pub fn format_path(segments: &[Segment]) -> String {
    let mut out = String::from("$");
    for segment in segments {
        push_segment(&mut out, segment);
    }
    out
}

fn push_segment(out: &mut String, segment: &Segment) {
    match segment {
        Segment::Index(i) => {
            out.push('[');
            out.push_str(&i.to_string());
            out.push(']');
        }
        Segment::Key(k) if is_identifier(k) && k.len() <= MAX_PATH_KEY_CHARS => {
            out.push('.');
            out.push_str(k);
        }
        Segment::Key(k) => {
            out.push('[');
            out.push_str(&quoted_preview(k));
            out.push(']');
        }
    }
}

/// The longest key a path shows in full; longer keys (only a hostile input
/// has them) are cut, so an error never echoes a megabyte-long key.
const MAX_PATH_KEY_CHARS: usize = 40;

/// `s` as a JSON string, cut after [`MAX_PATH_KEY_CHARS`] user-perceived
/// characters (extended grapheme clusters, never inside one) with `…`.
fn quoted_preview(s: &str) -> String {
    match clip_point(s, MAX_PATH_KEY_CHARS) {
        None => Value::String(s.to_string()).to_string(),
        Some(end) => {
            let mut quoted = Value::String(s[..end].to_string()).to_string();
            quoted.insert(quoted.len() - 1, '…');
            quoted
        }
    }
}

/// Where to cut `s` to keep its first `max` extended grapheme clusters
/// (what a reader sees as characters: a flag, a family emoji, `e` with a
/// combining accent), or `None` when it has no more than `max`.
pub fn clip_point(s: &str, max: usize) -> Option<usize> {
    use unicode_segmentation::UnicodeSegmentation;
    s.grapheme_indices(true).nth(max).map(|(at, _)| at)
}

pub(crate) fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A short description of a value for error messages: its type, and for
/// scalars a preview (strings cut at 40 characters).
pub fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => match clip_point(s, 40) {
            None => format!("the string {}", Value::String(s.clone())),
            Some(end) => format!("the string {}…", Value::String(s[..end].to_string())),
        },
        Value::Array(items) if items.len() == 1 => "an array of 1 item".into(),
        Value::Array(items) => format!("an array of {} items", items.len()),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_cut_at_grapheme_cluster_boundaries() {
        let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
        let flag = "\u{1F1EB}\u{1F1F7}";
        let accent = "e\u{301}";
        for cluster in [family, flag, accent] {
            let s = format!("{}{cluster}{cluster}", "x".repeat(39));
            assert_eq!(describe_value(&Value::String(s)), format!("the string \"{}{cluster}\"…", "x".repeat(39)));
        }
        let key = format!("{}{flag}tail", "k".repeat(39));
        assert_eq!(quoted_preview(&key), format!("\"{}{flag}…\"", "k".repeat(39)));
    }

    #[test]
    fn arrays_are_counted_in_words() {
        assert_eq!(describe_value(&serde_json::json!([])), "an array of 0 items");
        assert_eq!(describe_value(&serde_json::json!(["Ada"])), "an array of 1 item");
        assert_eq!(describe_value(&serde_json::json!([1, 2])), "an array of 2 items");
    }
}
