//! JSON text that is well-formed, and readable back into a
//! `serde_json::Value`, because of how it was made.
//!
//! The host writes the event data a plugin appends, and keeps the value a
//! tool returns, byte for byte as the plugin hands them over. Checking that
//! text with a JSON parser on the host side would parse, on every call, text
//! the plugin has just produced with a JSON serializer. Instead, the types
//! here can only be made by `serde_json` itself: by encoding a value
//! ([`JsonText::encode`]), or by parsing text ([`JsonText::parse`],
//! [`JsonText::from_raw`]) into a `Value`, which also refuses what is JSON
//! to the grammar but cannot be read back (a number out of range such as
//! `1e999`, a lone surrogate escape such as `"\ud800"`, nesting deeper than
//! 128). The host takes the text as JSON without parsing it again, and
//! replays it later. One thing encoding cannot see: a `RawValue` spliced
//! into the encoded value is written as it is, so splice only raw values
//! `serde_json` made by encoding, or checked with [`JsonText::from_raw`].
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

    /// `text` after checking that it is exactly one JSON value that
    /// `serde_json` reads back into a `Value` (surrounding whitespace is
    /// dropped). This parses the whole text once.
    ///
    /// # Errors
    /// The parser's error when `text` is not one JSON value, or holds a
    /// number out of `f64`'s range, a lone surrogate escape, or nesting
    /// deeper than 128.
    pub fn parse(text: &str) -> Result<JsonText, serde_json::Error> {
        let raw: &RawValue = serde_json::from_str(text)?;
        JsonText::from_raw(raw)
    }

    /// A [`RawValue`]'s text after the same check as [`JsonText::parse`]
    /// (a `RawValue` that `serde_json` parsed is held to the JSON grammar
    /// only).
    ///
    /// # Errors
    /// As [`JsonText::parse`].
    pub fn from_raw(raw: &RawValue) -> Result<JsonText, serde_json::Error> {
        serde_json::from_str::<serde_json::Value>(raw.get())?;
        Ok(JsonText { text: raw.get().into() })
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

/// Borrowed JSON text holding exactly one value, as it crosses the library
/// boundary for the duration of one call (an appended event's data).
///
/// Made only from a [`JsonText`]; see the [module](self) documentation.
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
        assert_eq!(JsonText::from_raw(&raw).unwrap().as_json_str().as_str(), "{\"b\":true}");
        // JSON to the grammar, but not readable back into a `Value`.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for unreadable in ["{\"big\": 1e999}", "{\"s\": \"\\ud800\"}", deep.as_str()] {
            assert!(RawValue::from_string(unreadable.to_string()).is_ok(), "{unreadable}");
            assert!(JsonText::parse(unreadable).is_err(), "{unreadable}");
        }
    }
}
