//! [`Checker`]: a JSON Schema compiled with `jsonschema`, and its
//! violations put in the shape and order the module above describes. Only
//! with the `checker` feature (the host's): a plugin never checks a schema
//! itself, so its build does without `jsonschema` and its dependencies.

use std::fmt;

use serde_json::Value;

use super::{describe_value, format_path, InvalidSchema, Segment, Violation};

/// A compiled schema, ready to check instances.
pub struct Checker {
    schema: Value,
    validator: jsonschema::Validator,
}

impl fmt::Debug for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Checker").field("schema", &self.schema).finish()
    }
}

impl Checker {
    /// Compiles `schema` (draft 7 unless the schema's `$schema` says
    /// otherwise).
    ///
    /// # Errors
    /// [`InvalidSchema`] when `schema` is not a valid JSON Schema.
    pub fn new(schema: Value) -> Result<Self, InvalidSchema> {
        let validator = jsonschema::options().with_draft(jsonschema::Draft::Draft7).build(&schema).map_err(|e| InvalidSchema(e.to_string()))?;
        Ok(Checker { schema, validator })
    }

    /// The schema this checker was compiled from.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Every violation of the schema by `instance`, ordered (see the module
    /// docs); empty when the instance is valid.
    pub fn violations(&self, instance: &Value) -> Vec<Violation> {
        if self.validator.is_valid(instance) {
            return Vec::new();
        }
        let mut found: Vec<(SortKey, Violation)> = Vec::new();
        for error in self.validator.iter_errors(instance) {
            let segments = pointer_segments(error.instance_path().as_str(), instance);
            let schema_path = error.schema_path().as_str();
            // `additionalProperties: false` with no `properties` (a config
            // type with no fields) is reported as a false schema at the
            // object, without the key: every key of that object is one
            // not allowed.
            if matches!(error.kind(), jsonschema::error::ValidationErrorKind::FalseSchema) && schema_path.ends_with("/additionalProperties") {
                if let Some(Value::Object(map)) = instance.pointer(error.instance_path().as_str()) {
                    let allowed = allowed_keys(&self.schema, schema_path);
                    for key in map.keys().filter(|k| !allowed.contains(k)) {
                        let mut at = segments.clone();
                        at.push(Segment::Key(key.clone()));
                        let violation =
                            Violation { path: format_path(&at), segments: at, message: "is not an allowed key (it takes no keys)".into() };
                        if !found.iter().any(|(_, v)| v.path == violation.path) {
                            found.push((SortKey { container: segments.clone(), rank: 2, order: 0 }, violation));
                        }
                    }
                    continue;
                }
            }
            for (rank, violation) in describe(&self.schema, schema_path, &segments, error.kind(), error.instance()) {
                // Checks on a property's value sort with the object holding
                // the property, so one object's violations stay together.
                let (container, order) = match (rank, segments.last()) {
                    (1, Some(Segment::Key(key))) => (segments[..segments.len() - 1].to_vec(), property_order(&self.schema, schema_path, key)),
                    _ => (segments.clone(), 0),
                };
                found.push((SortKey { container, rank, order }, violation));
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found.into_iter().map(|(_, v)| v).collect()
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SortKey {
    container: Vec<Segment>,
    rank: u8,
    /// For checks on a property's value: the property's position in the
    /// schema, so violations follow the schema's order, not the input's.
    order: usize,
}

/// The position of property `key` in the `properties` of the object schema
/// whose keyword failed at `schema_path` (0 when it cannot be found).
fn property_order(schema: &Value, schema_path: &str, key: &str) -> usize {
    let escaped = key.replace('~', "~0").replace('/', "~1");
    let needle = format!("/properties/{escaped}");
    let Some(at) = schema_path.rfind(&needle) else { return 0 };
    schema
        .pointer(&schema_path[..at])
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .and_then(|props| props.keys().position(|k| k == key))
        .unwrap_or(0)
}

/// Splits a JSON pointer into segments, using the instance to tell array
/// indices from object keys that look like numbers.
fn pointer_segments(pointer: &str, instance: &Value) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut node = Some(instance);
    if pointer.is_empty() {
        return out;
    }
    for raw in pointer.trim_start_matches('/').split('/') {
        let key = raw.replace("~1", "/").replace("~0", "~");
        match node {
            Some(Value::Array(items)) => match key.parse::<usize>() {
                Ok(i) => {
                    node = items.get(i);
                    out.push(Segment::Index(i));
                }
                Err(_) => {
                    node = None;
                    out.push(Segment::Key(key));
                }
            },
            Some(Value::Object(map)) => {
                node = map.get(&key);
                out.push(Segment::Key(key));
            }
            _ => {
                node = None;
                out.push(Segment::Key(key));
            }
        }
    }
    out
}

/// Describes one library error as violations with their rank (0 missing
/// keys, 1 checks on values, 2 unknown keys).
fn describe(
    schema: &Value,
    schema_path: &str,
    at: &[Segment],
    kind: &jsonschema::error::ValidationErrorKind,
    instance: &Value,
) -> Vec<(u8, Violation)> {
    use jsonschema::error::ValidationErrorKind as K;
    let child_segments = |key: &str| {
        let mut segments = at.to_vec();
        segments.push(Segment::Key(key.to_string()));
        segments
    };
    let v = |segments: Vec<Segment>, message: String| Violation { path: format_path(&segments), segments, message };
    match kind {
        K::Required { property } => {
            let key = property.as_str().map(str::to_string).unwrap_or_else(|| property.to_string());
            let message = match required_options(schema, schema_path, &key) {
                Some(listed) => format!("is required (one of {listed})"),
                None => "is required".to_string(),
            };
            vec![(0, v(child_segments(&key), message))]
        }
        K::AdditionalProperties { unexpected } | K::UnevaluatedProperties { unexpected } => {
            let allowed = allowed_keys(schema, schema_path);
            unexpected
                .iter()
                .map(|key| {
                    let message = if allowed.is_empty() {
                        "is not an allowed key".to_string()
                    } else {
                        format!("is not an allowed key (allowed: {})", allowed.join(", "))
                    };
                    (2, v(child_segments(key), message))
                })
                .collect()
        }
        K::Type { kind } => {
            let expected = match kind {
                jsonschema::error::TypeKind::Single(t) => article(&t.to_string()),
                jsonschema::error::TypeKind::Multiple(set) => {
                    let names: Vec<String> = set.iter().map(|t| article(&t.to_string())).collect();
                    names.join(" or ")
                }
            };
            vec![(1, v(at.to_vec(), format!("must be {expected}, got {}", describe_value(instance))))]
        }
        K::Enum { options } => {
            let listed = match options.as_ref() {
                Value::Array(items) => items.iter().map(Value::to_string).collect::<Vec<_>>().join(", "),
                other => other.to_string(),
            };
            vec![(1, v(at.to_vec(), format!("must be one of {listed}, got {}", describe_value(instance))))]
        }
        K::Constant { expected_value } => {
            vec![(1, v(at.to_vec(), format!("must be {expected_value}, got {}", describe_value(instance))))]
        }
        K::MaxItems { limit } => {
            vec![(1, v(at.to_vec(), format!("must have at most {limit} items, got {}", len_of(instance))))]
        }
        K::MinItems { limit } => {
            vec![(1, v(at.to_vec(), format!("must have at least {limit} items, got {}", len_of(instance))))]
        }
        K::MaxLength { limit } => {
            vec![(1, v(at.to_vec(), format!("must be at most {limit} characters long, got {}", len_of(instance))))]
        }
        K::MinLength { limit } => {
            vec![(1, v(at.to_vec(), format!("must be at least {limit} characters long")))]
        }
        K::Minimum { limit } => vec![(1, v(at.to_vec(), format!("must be at least {limit}, got {instance}")))],
        K::Maximum { limit } => vec![(1, v(at.to_vec(), format!("must be at most {limit}, got {instance}")))],
        _ => {
            let mut text = kind_fallback(kind);
            if text.is_empty() {
                text = "does not match the schema".into();
            }
            vec![(1, v(at.to_vec(), text))]
        }
    }
}

fn kind_fallback(kind: &jsonschema::error::ValidationErrorKind) -> String {
    use jsonschema::error::ValidationErrorKind as K;
    match kind {
        K::Pattern { pattern } => format!("must match the pattern {pattern:?}"),
        K::UniqueItems => "must not contain duplicate items".into(),
        K::FalseSchema => "is not allowed here".into(),
        K::MultipleOf { .. } => "is not a multiple of the required factor".into(),
        K::Format { format } => format!("must be a valid {format}"),
        K::OneOfNotValid { .. } | K::AnyOf { .. } => "does not match any allowed shape".into(),
        K::OneOfMultipleValid { .. } => "matches more than one allowed shape".into(),
        _ => String::new(),
    }
}

/// The declared keys of the object schema that holds the
/// `additionalProperties` keyword at `schema_path`.
fn allowed_keys(schema: &Value, schema_path: &str) -> Vec<String> {
    let parent = schema_path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    schema.pointer(parent).and_then(|s| s.get("properties")).and_then(Value::as_object).map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// The values a required property `key` may take, listed as a wrong value
/// is told (`"pending", "in_progress", "completed"`), when its schema is an
/// `enum` (directly or through a local `$ref`).
fn required_options(schema: &Value, schema_path: &str, key: &str) -> Option<String> {
    let parent = schema_path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    let mut property = schema.pointer(parent)?.get("properties")?.get(key)?;
    for _ in 0..8 {
        match property.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => property = schema.pointer(pointer)?,
            None => break,
        }
    }
    let options = property.get("enum")?.as_array()?;
    Some(options.iter().map(Value::to_string).collect::<Vec<_>>().join(", "))
}

fn article(type_name: &str) -> String {
    match type_name {
        "array" | "object" | "integer" => format!("an {type_name}"),
        "null" => "null".into(),
        other => format!("a {other}"),
    }
}

fn len_of(value: &Value) -> usize {
    match value {
        Value::Array(items) => items.len(),
        Value::String(s) => s.chars().count(),
        Value::Object(m) => m.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    fn checker() -> Checker {
        Checker::new(json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "properties": {
                            "content": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["content", "status"]
                    }
                }
            },
            "required": ["todos"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn valid_instance_has_no_violations() {
        assert!(checker().violations(&json!({"todos": []})).is_empty());
    }

    #[test]
    fn orders_missing_then_values_then_unknown_keys_per_object() {
        let v = checker().violations(&json!({"todos": [{"content": "ok", "status": "done", "extra": 1}, {"status": "pending"}]}));
        let text: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "$.todos[0].status must be one of \"pending\", \"in_progress\", \"completed\", got the string \"done\"",
                "$.todos[0].extra is not an allowed key (allowed: content, status)",
                "$.todos[1].content is required",
            ]
        );
    }

    #[test]
    fn value_checks_follow_schema_order_not_input_order() {
        let v = checker().violations(&json!({"todos": [{"status": "done", "content": 5}]}));
        let paths: Vec<&str> = v.iter().map(|v| v.path.as_str()).collect();
        assert_eq!(paths, vec!["$.todos[0].content", "$.todos[0].status"]);
    }

    #[test]
    fn string_where_array_expected_names_both() {
        let v = checker().violations(&json!({"todos": "[]"}));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].to_string(), "$.todos must be an array, got the string \"[]\"");
    }

    #[test]
    fn odd_keys_are_quoted() {
        assert_eq!(format_path(&[Segment::Key("a b".into()), Segment::Index(3)]), "$[\"a b\"][3]");
    }

    #[test]
    fn long_keys_are_cut_in_paths() {
        let long = format!("{}é", "k ".repeat(50));
        assert_eq!(format_path(&[Segment::Key(long)]), format!("$[\"{}…\"]", "k ".repeat(20)));
        let forty = "x-".repeat(20);
        assert_eq!(format_path(&[Segment::Key(forty.clone())]), format!("$[\"{forty}\"]"));
        assert_eq!(format_path(&[Segment::Key("z".repeat(40))]), format!("$.{}", "z".repeat(40)));
        assert_eq!(format_path(&[Segment::Key("z".repeat(41))]), format!("$[\"{}…\"]", "z".repeat(40)));
    }
}

#[cfg(test)]
mod no_keys {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_with_no_keys_names_each_key_given() {
        let checker = Checker::new(json!({"type": "object", "additionalProperties": false})).unwrap();
        let found: Vec<String> = checker.violations(&json!({"label": "x", "b": 1})).iter().map(ToString::to_string).collect();
        assert_eq!(found, ["$.label is not an allowed key (it takes no keys)", "$.b is not an allowed key (it takes no keys)"]);
        assert!(checker.violations(&json!({})).is_empty());
    }
}
