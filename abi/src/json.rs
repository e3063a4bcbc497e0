//! JSON text that is well-formed because of how it was made.
//!
//! The host writes the event data a plugin appends, and keeps the value a
//! tool returns, byte for byte as the plugin hands them over. Checking that
//! text with a JSON parser on the host side would parse, on every call, text
//! the plugin has just produced with a JSON serializer. Instead, the types
//! here can only be made by `serde_json` itself: by encoding a value
//! ([`JsonText::encode`]), by parsing ([`JsonText::parse`]), or from a
//! [`RawValue`] (which `serde_json` makes only by encoding or parsing). The
//! host takes the text as JSON without parsing it again.
//!
//! The one thing the host still fixes is line breaks: JSON allows a raw CR
//! or LF only as whitespace between tokens (inside strings they must be
//! escaped), and a session log holds one event per line, so the host turns
//! them into spaces, which leaves the value unchanged.

use abi_stable::std_types::{RStr, RString};
use abi_stable::StableAbi;
use serde::Serialize;
use serde_json::value::RawValue;

/// Owned JSON text holding exactly one value, as it crosses the library
/// boundary (a tool's structured result).
///
/// Made only by [`JsonText::encode`], [`JsonText::parse`] or from a
/// [`RawValue`]; see the [module](self) documentation.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct JsonText {
    text: RString,
}

impl JsonText {
    /// `value` encoded by `serde_json` (compact, no line breaks).
    ///
    /// # Errors
    /// When `value` cannot be encoded as JSON (a map with non-string keys, a
    /// failing `Serialize` impl).
    pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<JsonText, serde_json::Error> {
        serde_json::to_string(value).map(|text| JsonText { text: text.into() })
    }

    /// [`JsonText::encode`] into a buffer that starts with room for
    /// `capacity` bytes, so that a caller who knows the size avoids the
    /// buffer growing while it is written.
    ///
    /// # Errors
    /// As [`JsonText::encode`].
    pub fn encode_with_capacity<T: Serialize + ?Sized>(value: &T, capacity: usize) -> Result<JsonText, serde_json::Error> {
        let mut out = Vec::with_capacity(capacity);
        serde_json::to_writer(&mut out, value)?;
        // serde_json writes UTF-8 only; the check costs one pass.
        let text = String::from_utf8(out).map_err(<serde_json::Error as serde::ser::Error>::custom)?;
        Ok(JsonText { text: text.into() })
    }

    /// `text` after checking that it is exactly one JSON value (surrounding
    /// whitespace is dropped).
    ///
    /// # Errors
    /// The parser's error when `text` is not one JSON value.
    pub fn parse(text: &str) -> Result<JsonText, serde_json::Error> {
        let raw: &RawValue = serde_json::from_str(text)?;
        Ok(JsonText::from(raw))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        self.text.as_str()
    }

    /// A borrowed view of the same text.
    pub fn as_json_str(&self) -> JsonStr<'_> {
        JsonStr { text: self.text.as_rstr() }
    }
}

impl From<&RawValue> for JsonText {
    fn from(raw: &RawValue) -> JsonText {
        JsonText { text: raw.get().into() }
    }
}

impl From<Box<RawValue>> for JsonText {
    fn from(raw: Box<RawValue>) -> JsonText {
        JsonText { text: String::from(Box::<str>::from(raw)).into() }
    }
}

/// Borrowed JSON text holding exactly one value, as it crosses the library
/// boundary for the duration of one call (an appended event's data).
///
/// Made only from a [`JsonText`] or a [`RawValue`]; see the
/// [module](self) documentation.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonStr<'a> {
    text: RStr<'a>,
}

impl<'a> JsonStr<'a> {
    /// The text.
    pub fn as_str(&self) -> &'a str {
        self.text.as_str()
    }
}

impl<'a> From<&'a RawValue> for JsonStr<'a> {
    fn from(raw: &'a RawValue) -> JsonStr<'a> {
        JsonStr { text: raw.get().into() }
    }
}

impl<'a> From<&'a JsonText> for JsonStr<'a> {
    fn from(text: &'a JsonText) -> JsonStr<'a> {
        text.as_json_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_only_of_json() {
        assert_eq!(JsonText::encode(&serde_json::json!({"a": [1, "x\ny"]})).unwrap().as_str(), r#"{"a":[1,"x\ny"]}"#);
        assert_eq!(JsonText::parse("  [1, 2]\n").unwrap().as_str(), "[1, 2]");
        assert_eq!(JsonText::encode_with_capacity(&["a", "é"], 2).unwrap().as_str(), r#"["a","é"]"#);
        assert!(JsonText::parse("{\"a\":").is_err());
        assert!(JsonText::parse("1 2").is_err());
        let raw = RawValue::from_string("{\"b\":true}".into()).unwrap();
        assert_eq!(JsonStr::from(&*raw).as_str(), "{\"b\":true}");
        assert_eq!(JsonText::from(raw).as_str(), "{\"b\":true}");
    }
}
