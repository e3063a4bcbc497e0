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
//! 128). Encoding does the one check of these that its encoder lacks:
//! nesting that deep is refused there too (a byte count settles it
//! for nearly all text). The host takes the text as JSON without parsing
//! it again, and replays it later. One thing encoding cannot see: a `RawValue` spliced
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
        JsonText::encode_with_capacity(value, 128)
    }

    /// [`JsonText::encode`] into a buffer that starts with room for
    /// `capacity` bytes, so that a caller who knows the size avoids the
    /// buffer growing while it is written.
    ///
    /// # Errors
    /// As [`JsonText::encode`].
    pub fn encode_with_capacity<T: Serialize + ?Sized>(value: &T, capacity: usize) -> Result<JsonText, serde_json::Error> {
        let mut out = Buffer(Vec::with_capacity(capacity));
        serde_json::to_writer(&mut out, value)?;
        // serde_json writes UTF-8 only; the check costs one pass.
        let text = String::from_utf8(out.0).map_err(<serde_json::Error as serde::ser::Error>::custom)?;
        readable_depth(&text, 0)?;
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

    /// This object with one more member, `key` and `value` encoded by
    /// `serde_json`, after its last: `{"a":1}` with `("b", &2)` gives
    /// `{"a":1,"b":2}`. The object's text is copied, not encoded again,
    /// so a reply that wraps the event data it appended costs one copy
    /// (tool-todo's value is its `todo/write` data plus the counts). Give
    /// a key the object does not hold yet: one it holds would be repeated
    /// (`serde_json` reads the later).
    ///
    /// # Errors
    /// When this text is not an object, or `value` cannot be encoded.
    pub fn with_member<T: Serialize + ?Sized>(&self, key: &str, value: &T) -> Result<JsonText, serde_json::Error> {
        let not_object = || <serde_json::Error as serde::ser::Error>::custom("a member can only be added to an object");
        let text = self.as_str().trim_end();
        let open = text.strip_suffix('}').ok_or_else(not_object)?;
        let inner = open.trim_start().strip_prefix('{').ok_or_else(not_object)?;
        // The object without its `}`, then the member, into one buffer
        // with room for the key and a small value, so that neither grows it.
        let mut out = Buffer(Vec::with_capacity(open.len() + key.len() + 80));
        out.0.extend_from_slice(open.as_bytes());
        if !inner.trim().is_empty() {
            out.0.push(b',');
        }
        serde_json::to_writer(&mut out, key)?;
        out.0.push(b':');
        let value_at = out.0.len();
        serde_json::to_writer(&mut out, value)?;
        let value_end = out.0.len();
        out.0.push(b'}');
        let out = String::from_utf8(out.0).map_err(<serde_json::Error as serde::ser::Error>::custom)?;
        // This object reads back already (every way of making a `JsonText`
        // sees to that), so only the new value can nest too deep, one level
        // below the object.
        readable_depth(&out[value_at..value_end], 1)?;
        Ok(JsonText { text: out.into() })
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

/// The buffer `serde_json` encodes into. Its compact encoder writes
/// every quote, colon, comma and bracket as a write of its own; a `Vec`
/// copies each through a `memcpy` call, which costs several times the
/// byte pushed, so single bytes are pushed here instead.
struct Buffer(Vec<u8>);

impl std::io::Write for Buffer {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match bytes {
            [byte] => self.0.push(*byte),
            _ => self.0.extend_from_slice(bytes),
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How many arrays and objects deep `serde_json` reads text into a
/// `Value`: its recursion limit of 128 refuses the 128th level.
pub const READABLE_DEPTH: usize = 127;

/// `Ok` when encoded `text`, placed `outer` arrays or objects deep, nests
/// no deeper than [`READABLE_DEPTH`] in all, so that it reads back; the
/// encoder itself has no such limit. Text too short to hold that many
/// brackets, or holding fewer opening ones in all (counting those inside
/// strings too), is passed after a byte count; only other text is walked.
fn readable_depth(text: &str, outer: usize) -> Result<(), serde_json::Error> {
    let bytes = text.as_bytes();
    let room = READABLE_DEPTH.saturating_sub(outer);
    // Deeper than `room` takes `room + 1` opening and as many closing
    // brackets.
    if bytes.len() <= 2 * room || opening_brackets(bytes) <= room {
        return Ok(());
    }
    let mut depth = outer;
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > READABLE_DEPTH {
                    return Err(<serde_json::Error as serde::ser::Error>::custom(format!(
                        "the value nests deeper than {READABLE_DEPTH} levels, which JSON readers refuse"
                    )));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// How many `[` and `{` bytes `bytes` holds. `[` (0x5B) and `{` (0x7B)
/// differ only in bit 0x20 and no other byte maps onto `{` with that bit
/// set, so one comparison per byte counts both, and counting a block at a
/// time in a `u8` lets the compiler do it 16 or 32 bytes per instruction.
fn opening_brackets(bytes: &[u8]) -> usize {
    bytes.chunks(255).map(|block| block.iter().fold(0u8, |n, &b| n + u8::from(b | 0x20 == b'{')) as usize).sum()
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

    #[test]
    fn encoding_refuses_what_cannot_be_read_back() {
        use serde_json::Value;
        let nested = |depth: usize| -> Value {
            let mut v = serde_json::json!("x[{");
            for i in 0..depth {
                v = if i % 2 == 0 { Value::Array(vec![v]) } else { serde_json::json!({ "k": v }) };
            }
            v
        };
        for depth in [1, 127, 128, 129, 200] {
            let value = nested(depth);
            let readable = serde_json::from_str::<Value>(&serde_json::to_string(&value).unwrap()).is_ok();
            assert_eq!(readable, depth <= READABLE_DEPTH, "{depth}");
            assert_eq!(JsonText::encode(&value).is_ok(), readable, "encode, {depth}");
            assert_eq!(JsonText::encode_with_capacity(&value, 8).is_ok(), readable, "encode_with_capacity, {depth}");
            let wrapped = JsonText::encode(&serde_json::json!({})).unwrap().with_member("v", &nested(depth - 1));
            assert_eq!(wrapped.is_ok(), readable, "with_member, {depth}");
        }
        // Brackets inside strings are not nesting.
        let many = "[{".repeat(300);
        assert!(JsonText::encode(&serde_json::json!({ "s": many, "t": "\\\"[[" })).is_ok());
    }

    #[test]
    fn brackets_are_counted_exactly() {
        let naive = |bytes: &[u8]| bytes.iter().filter(|&&b| b == b'[' || b == b'{').count();
        // Every byte value alone, then runs long enough to fill the
        // per-block counter to its limit.
        for b in 0..=255u8 {
            assert_eq!(opening_brackets(&[b]), naive(&[b]), "byte {b:#04x}");
        }
        for len in [254, 255, 256, 511, 1000] {
            for text in ["{".repeat(len), "[{;".repeat(len), "a[".repeat(len)] {
                assert_eq!(opening_brackets(text.as_bytes()), naive(text.as_bytes()), "{len}");
            }
        }
    }

    #[test]
    fn a_member_added_reads_back_as_the_object_with_it() {
        use serde_json::{json, Value};
        let cases = [
            (JsonText::encode(&json!({"todos": [{"content": "a\"}"}]})).unwrap(), json!({"todos": [{"content": "a\"}"}], "k\"ey": {"n": 1}})),
            (JsonText::encode(&json!({})).unwrap(), json!({"k\"ey": {"n": 1}})),
            (JsonText::parse(" { \n } ").unwrap(), json!({"k\"ey": {"n": 1}})),
            (JsonText::parse("{\"a\" : 1 }  ").unwrap(), json!({"a": 1, "k\"ey": {"n": 1}})),
        ];
        for (object, expected) in cases {
            let added = object.with_member("k\"ey", &json!({"n": 1})).unwrap();
            let read: Value = serde_json::from_str(added.as_str()).unwrap();
            assert_eq!(read, expected, "{}", added.as_str());
        }
        // Byte for byte what encoding the whole object gives, keys in order.
        let data = JsonText::encode(&json!({"todos": ["x"]})).unwrap();
        assert_eq!(data.with_member("counts", &[1, 2]).unwrap().as_str(), r#"{"todos":["x"],"counts":[1,2]}"#);
        for not_object in ["[1]", "\"}\"", "1"] {
            assert!(JsonText::parse(not_object).unwrap().with_member("k", &1).is_err(), "{not_object}");
        }
    }
}
