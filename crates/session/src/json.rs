//! [`RawJson`]: one JSON value kept as text, fit for a line of a session log.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// One JSON value held as its text, exactly as written except that raw CR
/// and LF bytes are spaces, so it can sit inside a one-line log record.
///
/// JSON allows a raw CR or LF only as whitespace between tokens (inside a
/// string they must be escaped), so the replacement never changes the
/// value. Surrounding whitespace is dropped.
///
/// Made by parsing ([`RawJson::parse`]), from a `serde_json` [`RawValue`],
/// by encoding a value ([`RawJson::encode`]), or from the
/// [`JsonStr`](cordis_abi::JsonStr) / [`JsonText`](cordis_abi::JsonText) a
/// plugin hands over, which are JSON by construction (see
/// [`cordis_abi::json`]) and are not parsed again.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RawJson(Box<str>);

impl RawJson {
    /// `text`, checked to be exactly one JSON value.
    ///
    /// # Errors
    /// The parser's error when it is not.
    pub fn parse(text: &str) -> Result<RawJson, serde_json::Error> {
        let raw: &RawValue = serde_json::from_str(text)?;
        Ok(RawJson::one_line(raw.get().to_owned()))
    }

    /// `value` encoded compactly; `null` when it cannot be encoded (a map
    /// with non-string keys).
    pub fn encode(value: &(impl Serialize + ?Sized)) -> RawJson {
        serde_json::to_string(value).map_or_else(|_| RawJson::null(), |text| RawJson(text.into_boxed_str()))
    }

    /// JSON `null`.
    pub fn null() -> RawJson {
        RawJson("null".into())
    }

    /// Text a plugin made with `serde_json` ([`cordis_abi::JsonStr`]):
    /// copied into the host's memory (the plugin's library may be unloaded
    /// later), not parsed again.
    pub fn from_plugin(text: &str) -> RawJson {
        RawJson::one_line(text.trim_matches(is_json_space).to_owned())
    }

    fn one_line(mut text: String) -> RawJson {
        if has_line_break(&text) {
            text = text.replace(['\n', '\r'], " ");
        }
        RawJson(text.into_boxed_str())
    }

    /// The text.
    pub fn get(&self) -> &str {
        &self.0
    }

    /// The value parsed.
    ///
    /// # Errors
    /// The parser's error when `serde_json` cannot read the text into a
    /// `Value`: JSON to the grammar that a `Value` cannot hold (a number
    /// out of range such as `1e999`, a lone surrogate escape, nesting
    /// deeper than 128), which a log from elsewhere or a library not built
    /// with the SDK can carry.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

fn has_line_break(text: &str) -> bool {
    memchr::memchr2(b'\n', b'\r', text.as_bytes()).is_some()
}

fn is_json_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

impl From<Box<RawValue>> for RawJson {
    /// No copy unless the text holds a raw line break.
    fn from(raw: Box<RawValue>) -> RawJson {
        let text: Box<str> = raw.into();
        if has_line_break(&text) {
            RawJson::one_line(text.into_string())
        } else {
            RawJson(text)
        }
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for RawJson {
    /// Emitted verbatim by `serde_json` (through a [`RawValue`], which
    /// costs one parse of the text; the log writers do not use this).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match serde_json::from_str::<&RawValue>(&self.0) {
            Ok(raw) => raw.serialize(serializer),
            Err(_) => serializer.serialize_unit(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_text_on_one_line() {
        let pretty = "\n{\r\n  \"a\": [1,\n 2],\n  \"b\": \"x\\ny\"\n}\n";
        let parsed = RawJson::parse(pretty).unwrap();
        assert_eq!(parsed.get(), "{    \"a\": [1,  2],   \"b\": \"x\\ny\" }");
        assert_eq!(parsed.to_value().unwrap(), serde_json::from_str::<Value>(pretty).unwrap());
        assert!(RawJson::parse("[1e999]").unwrap().to_value().is_err());
        assert_eq!(RawJson::from_plugin(pretty), parsed);
        assert!(RawJson::parse("{\"a\":").is_err());
        assert_eq!(serde_json::to_string(&vec![parsed.clone()]).unwrap(), format!("[{}]", parsed.get()));
        assert_eq!(RawJson::encode(&[1, 2]).get(), "[1,2]");
    }
}
