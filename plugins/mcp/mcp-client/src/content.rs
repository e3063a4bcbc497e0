//! A server's `tools/call` result as the model sees it.
//!
//! The text is the result's content blocks in order, one line each: a text
//! block as it is; a resource link as its name and URI; an image, audio or
//! embedded resource, which no model of ours is shown, described by its
//! media type and size (never its data); an unknown block by its type. A
//! result with no blocks says so. `isError: true` makes the call an error
//! with that text. The structured value is the result's
//! `structuredContent`, which must be a JSON object; the host checks it
//! against the tool's declared output schema.

use serde_json::Value;

/// A mapped result.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped {
    /// Whether the server reported the call as failed (`isError`).
    pub is_error: bool,
    /// The text for the model.
    pub text: String,
    /// `structuredContent`, when the result carries one.
    pub value: Option<Value>,
}

/// Maps a `tools/call` result (as JSON) of tool `tool`.
///
/// # Errors
/// When `structuredContent` is present and is not a JSON object.
pub fn map_result(tool: &str, result: &Value) -> Result<Mapped, String> {
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let blocks = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let lines: Vec<String> = blocks.iter().map(describe).collect();
    let text = if lines.is_empty() { format!("({tool} returned no content)") } else { lines.join("\n") };
    let value = match result.get("structuredContent") {
        None | Some(Value::Null) => None,
        Some(value @ Value::Object(_)) => Some(value.clone()),
        Some(other) => {
            return Err(format!("the server's structuredContent for {tool} is not a JSON object: {}", kind(other)));
        }
    };
    Ok(Mapped { is_error, text, value: if is_error { None } else { value } })
}

/// One content block as a line of text.
fn describe(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str);
    let media = |name: &str| field(name).unwrap_or("an unknown media type").to_string();
    let size = |data: Option<&str>| data.map(|d| format!(", {} bytes of base64", d.len())).unwrap_or_default();
    match field("type") {
        Some("text") => field("text").unwrap_or_default().to_string(),
        Some("resource_link") => match (field("name"), field("uri")) {
            (Some(name), Some(uri)) => format!("Resource link: {name} ({uri})"),
            _ => "[a resource link without its name or URI]".into(),
        },
        Some("image") => format!("[an image ({}{}) that is not shown to the model]", media("mimeType"), size(field("data"))),
        Some("audio") => format!("[audio ({}{}) that is not played to the model]", media("mimeType"), size(field("data"))),
        Some("resource") => {
            let resource = block.get("resource");
            let uri = resource.and_then(|r| r.get("uri")).and_then(Value::as_str).unwrap_or("no URI");
            let mime = resource.and_then(|r| r.get("mimeType")).and_then(Value::as_str).unwrap_or("an unknown media type");
            match resource.and_then(|r| r.get("text")).and_then(Value::as_str) {
                Some(text) => format!("[embedded resource {uri} ({mime})]\n{text}"),
                None => format!("[an embedded resource {uri} ({mime}) that is not shown to the model]"),
            }
        }
        Some(other) => format!("[MCP content of type `{other}`, which cordis does not show]"),
        None => format!("[an MCP content block that is not an object with a type: {}]", kind(block)),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_keep_their_order_and_nothing_is_dropped() {
        let result = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource_link", "name": "notes", "uri": "file:///notes.md"},
            {"type": "audio", "mimeType": "audio/wav", "data": "AA=="},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
            {"type": "hologram"},
            {"type": "text", "text": "two"}
        ], "structuredContent": {"n": 1}});
        let mapped = map_result("t", &result).unwrap();
        assert!(!mapped.is_error);
        assert_eq!(
            mapped.text,
            "one\n[an image (image/png, 4 bytes of base64) that is not shown to the model]\nResource link: notes (file:///notes.md)\n\
             [audio (audio/wav, 4 bytes of base64) that is not played to the model]\n[embedded resource file:///a.txt (text/plain)]\ninside\n\
             [an embedded resource file:///b.bin (an unknown media type) that is not shown to the model]\n\
             [MCP content of type `hologram`, which cordis does not show]\ntwo"
        );
        assert_eq!(mapped.value, Some(json!({"n": 1})));
    }

    #[test]
    fn errors_empty_results_and_bad_values() {
        let failed = map_result("t", &json!({"content": [{"type": "text", "text": "no such file"}], "isError": true})).unwrap();
        assert!(failed.is_error);
        assert_eq!(failed.text, "no such file");
        assert_eq!(map_result("t", &json!({"content": []})).unwrap().text, "(t returned no content)");
        let bad = map_result("t", &json!({"content": [], "structuredContent": [1]})).unwrap_err();
        assert!(bad.contains("not a JSON object: an array"), "{bad}");
    }
}
