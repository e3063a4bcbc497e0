//! [`RawJson`]: one JSON value kept as text, fit for a line of a session log;
//! [`Shape`]: the few fields a reader needs of a JSON text, taken without
//! building a `serde_json::Value`.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
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

/// What [`replace_lone_surrogates`] changed in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurrogateRepair {
    /// The text with each lone surrogate escape replaced by `\ufffd`.
    pub text: String,
    /// How many escapes were replaced.
    pub count: usize,
    /// The first escape replaced, as written (`\ud83e`).
    pub first: String,
}

impl SurrogateRepair {
    /// The note a reader gives the line: what was replaced, and by what.
    pub fn describe(&self) -> String {
        let what =
            if self.count == 1 { "a lone UTF-16 surrogate escape".to_string() } else { format!("{} lone UTF-16 surrogate escapes", self.count) };
        format!("{what} (first `{}`: half of a pair, not a character) read as U+FFFD, the replacement character", self.first)
    }
}

/// `text` (JSON) with every lone UTF-16 surrogate escape replaced by
/// `\ufffd`, or `None` when it has none.
///
/// JSON's grammar accepts any `\uXXXX` escape, so a writer that cuts a
/// UTF-16 string between the halves of a pair (as JavaScript's
/// `JSON.stringify` writes them) leaves `\ud83e` on its own. Such a string
/// is no Unicode text, and `serde_json` refuses to read it into a `String`.
/// A lone surrogate is a high half (`\ud800`-`\udbff`) not directly followed
/// by a low half's escape (`\udc00`-`\udfff`), or a low half not directly
/// preceded by a high half. A valid pair is kept as written, and so is every
/// other byte of the text. Text that is not JSON is scanned all the same
/// (only escapes change) and stays as invalid as it was.
pub fn replace_lone_surrogates(text: &str) -> Option<SurrogateRepair> {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut count = 0;
    let mut first = String::new();
    let mut i = 0;
    while let Some(found) = memchr::memchr(b'\\', &bytes[i..]) {
        let at = i + found;
        match bytes.get(at + 1) {
            Some(b'u') => {}
            Some(_) => {
                // Any other escape (`\\` included) is two bytes.
                i = at + 2;
                continue;
            }
            None => break,
        }
        let Some(unit) = hex4(bytes, at + 2) else {
            i = at + 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                if bytes.get(at + 6..at + 8) == Some(b"\\u") && hex4(bytes, at + 8).is_some_and(|next| (0xDC00..=0xDFFF).contains(&next)) {
                    i = at + 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            // `at` and `at + 6` sit on ASCII bytes, so both are char boundaries.
            if count == 0 {
                first = text[at..at + 6].to_string();
            }
            out.push_str(&text[copied..at]);
            out.push_str("\\ufffd");
            copied = at + 6;
            count += 1;
        }
        i = at + 6;
    }
    if count == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(SurrogateRepair { text: out, count, first })
}

/// The four hex digits at `at` as a number.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits.iter().try_fold(0u32, |n, &b| Some(n * 16 + char::from(b).to_digit(16)?))
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

/// What a reader takes from one JSON value of any type, read with exactly
/// the checks that reading it into a `serde_json::Value` makes (nesting
/// depth, numbers in range, string escapes), so that text a `Value` refuses
/// is refused here too, but without building the `Value`: each method gets
/// one kind of value, and every part not taken is checked and dropped.
/// Read one with [`Read`]. In a map, as in a `Value`, the last of
/// repeated keys counts.
pub trait Shape<'de>: Default + Sized {
    /// From an object.
    ///
    /// # Errors
    /// The parser's.
    fn object<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        while map.next_key::<Read<()>>()?.is_some() {
            map.next_value::<Read<()>>()?;
        }
        Ok(Self::default())
    }
    /// From an array.
    ///
    /// # Errors
    /// The parser's.
    fn array<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<Read<()>>()?.is_some() {}
        Ok(Self::default())
    }
    /// From a string without escapes, borrowed from the text.
    fn borrowed_str(_text: &'de str) -> Self {
        Self::default()
    }
    /// From a string with escapes, decoded into a buffer of the parser's.
    fn copied_str(_text: &str) -> Self {
        Self::default()
    }
    /// From a bool.
    fn boolean(_value: bool) -> Self {
        Self::default()
    }
}

/// Any value, checked and dropped.
impl Shape<'_> for () {}

/// A string, borrowed when it has no escapes; `None` for other values.
impl<'de> Shape<'de> for Option<Cow<'de, str>> {
    fn borrowed_str(text: &'de str) -> Self {
        Some(Cow::Borrowed(text))
    }
    fn copied_str(text: &str) -> Self {
        Some(Cow::Owned(text.to_string()))
    }
}

/// A bool; `None` for other values.
impl Shape<'_> for Option<bool> {
    fn boolean(value: bool) -> Self {
        Some(value)
    }
}

/// A [`Shape`] read from JSON.
#[derive(Debug, Default)]
pub struct Read<T>(pub T);

impl<'de, T: Shape<'de>> Deserialize<'de> for Read<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Read<T>, D::Error> {
        d.deserialize_any(ShapeVisitor(PhantomData)).map(Read)
    }
}

struct ShapeVisitor<T>(PhantomData<T>);

impl<'de, T: Shape<'de>> Visitor<'de> for ShapeVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<T, E> {
        Ok(T::boolean(value))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<T, E> {
        Ok(T::borrowed_str(text))
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        Ok(T::copied_str(text))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::array(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::object(map)
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

    /// The text after repair, read as a JSON string.
    fn repaired(json: &str) -> String {
        let text = replace_lone_surrogates(json).map_or_else(|| json.to_string(), |r| r.text);
        serde_json::from_str::<String>(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn lone_surrogate_escapes_become_the_replacement_character() {
        // A high half in the middle, as a cut UTF-16 string leaves it.
        let r = replace_lone_surrogates(r#"{"text":"half \ud83e here"}"#).unwrap();
        assert_eq!(r.text, r#"{"text":"half \ufffd here"}"#);
        assert_eq!((r.count, r.first.as_str()), (1, r"\ud83e"));
        assert!(r.describe().contains(r"`\ud83e`") && r.describe().contains("U+FFFD"), "{}", r.describe());
        assert!(serde_json::from_str::<Value>(r#"{"text":"half \ud83e here"}"#).is_err());
        assert_eq!(repaired(r#""half \ud83e here""#), "half \u{FFFD} here");
        // A lone low half; a high half at the end; upper-case hex.
        assert_eq!(repaired(r#""\udd14 after""#), "\u{FFFD} after");
        assert_eq!(repaired(r#""ends \uD83E""#), "ends \u{FFFD}");
        // Two high halves in a row: the first is lone, the second pairs.
        assert_eq!(repaired(r#""\ud83e\ud83e\udd14""#), "\u{FFFD}\u{1F914}");
        let two = replace_lone_surrogates(r#""\ud83e\ud83e""#).unwrap();
        assert_eq!((two.text.as_str(), two.count), (r#""\ufffd\ufffd""#, 2));
        // A high half before an escape that is not a low half.
        assert_eq!(repaired(r#""\ud83e\u0041""#), "\u{FFFD}A");
        // A low half before a high half: both lone.
        assert_eq!(repaired(r#""\udd14\ud83e""#), "\u{FFFD}\u{FFFD}");
        // Non-ASCII text around the repair is kept.
        assert_eq!(repaired(r#""é\ud83eü""#), "é\u{FFFD}ü");
    }

    #[test]
    fn valid_pairs_and_other_escapes_are_left_alone() {
        for text in
            [r#""\ud83e\udd14""#, r#""\uD83E\uDD14 and \u2028""#, r#""\\ud83e is a backslash and text""#, r#""\\\ud83e\udd14""#, "\"plain\"", ""]
        {
            assert_eq!(replace_lone_surrogates(text), None, "{text}");
        }
        // An escaped backslash before a lone half: only the half changes.
        assert_eq!(repaired(r#""\\\ud83e""#), "\\\u{FFFD}");
    }

    #[test]
    fn cut_or_malformed_escapes_never_panic() {
        for text in ["\\", "\\u", "\\ud8", "\"\\ud83e\\u", "\"\\ud83e\\udd1", "\\uzzzz", "\\u\u{e9}\u{e9}"] {
            let _ = replace_lone_surrogates(text);
        }
        assert_eq!(replace_lone_surrogates("\"\\ud83e\\udd1").map(|r| r.text), Some("\"\\ufffd\\udd1".into()));
    }
}
