//! A tool call's arguments as the host parsed them: a flat list of
//! [`ArgToken`]s, so that the plugin deserializes its typed arguments from
//! the host's parse instead of parsing the same JSON text a second time.
//!
//! The host parses the arguments into a `serde_json::Value` to check them
//! against the tool's schema, then writes that value out as tokens
//! ([`write_tokens`]); strings are borrowed from the value, nothing is
//! copied. On the plugin's side [`from_tokens`] is a `serde` deserializer
//! over the list: it gives a type what `serde_json::from_value` on the same
//! value would (objects as maps, a string as a unit enum variant, `null` as
//! `None`), without scanning text.
//!
//! Layout: a value is one token, except that `Seq(n)` is followed by its
//! `n` values and `Map(n)` by `n` pairs of a `Str` key and a value.

use std::fmt;

use abi_stable::std_types::RStr;
use abi_stable::StableAbi;
use serde::de::{self, Deserialize, DeserializeSeed, IntoDeserializer, Visitor};
use serde_json::Value;

/// One token of a parsed JSON value (see the [module](self) docs for the
/// layout).
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq)]
pub enum ArgToken<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A non-negative integer.
    U64(u64),
    /// A negative integer.
    I64(i64),
    /// Any other number.
    F64(f64),
    /// A string (or, after `Map`, a key), borrowed from the host's value.
    Str(RStr<'a>),
    /// An array; its `n` values follow.
    Seq(u64),
    /// An object; its `n` key/value pairs follow.
    Map(u64),
}

/// How many tokens [`write_tokens`] writes for `value`.
pub fn token_count(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(token_count).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(|v| 1 + token_count(v)).sum::<usize>(),
        _ => 1,
    }
}

/// Appends the tokens of `value` to `out`, borrowing its strings.
pub fn write_tokens<'a>(value: &'a Value, out: &mut Vec<ArgToken<'a>>) {
    match value {
        Value::Null => out.push(ArgToken::Null),
        Value::Bool(b) => out.push(ArgToken::Bool(*b)),
        Value::Number(n) => out.push(match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => ArgToken::U64(u),
            (None, Some(i)) => ArgToken::I64(i),
            _ => ArgToken::F64(n.as_f64().unwrap_or(f64::NAN)),
        }),
        Value::String(s) => out.push(ArgToken::Str(s.as_str().into())),
        Value::Array(items) => {
            out.push(ArgToken::Seq(items.len() as u64));
            for item in items {
                write_tokens(item, out);
            }
        }
        Value::Object(map) => {
            out.push(ArgToken::Map(map.len() as u64));
            for (key, item) in map {
                out.push(ArgToken::Str(key.as_str().into()));
                write_tokens(item, out);
            }
        }
    }
}

/// Deserializes a `T` from `tokens`, which must hold exactly one value.
///
/// `T` may borrow its strings from the tokens (a `&'a str` or, with
/// `#[serde(borrow)]`, a `Cow<'a, str>` field): every string is handed to
/// the visitor borrowed, so such a field copies nothing.
///
/// # Errors
/// `serde`'s message when the value does not have `T`'s shape (for
/// example `invalid type: string "x", expected u32`), or when the tokens
/// are cut short or hold more than one value.
pub fn from_tokens<'a, T: Deserialize<'a>>(tokens: &[ArgToken<'a>]) -> Result<T, TapeError> {
    let mut reader = Reader { tokens, at: 0 };
    let value = T::deserialize(&mut reader)?;
    if reader.at != tokens.len() {
        return Err(TapeError(format!("{} tokens left over after the value", tokens.len() - reader.at)));
    }
    Ok(value)
}

/// Why [`from_tokens`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapeError(pub String);

impl fmt::Display for TapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TapeError {}

impl de::Error for TapeError {
    fn custom<M: fmt::Display>(message: M) -> Self {
        TapeError(message.to_string())
    }
}

struct Reader<'t, 'a> {
    tokens: &'t [ArgToken<'a>],
    at: usize,
}

impl<'a> Reader<'_, 'a> {
    // Inlined: called once per token, and the call cost as much as the
    // rest of the step.
    #[inline]
    fn next(&mut self) -> Result<ArgToken<'a>, TapeError> {
        let token = *self.tokens.get(self.at).ok_or_else(|| TapeError("the arguments end in the middle of a value".into()))?;
        self.at += 1;
        Ok(token)
    }

    fn peek(&self) -> Option<ArgToken<'a>> {
        self.tokens.get(self.at).copied()
    }

    /// Moves past one whole value.
    fn skip(&mut self) -> Result<(), TapeError> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            match self.next()? {
                ArgToken::Seq(n) => pending += n,
                ArgToken::Map(n) => pending += 2 * n,
                _ => {}
            }
        }
        Ok(())
    }
}

fn unexpected(token: ArgToken<'_>) -> de::Unexpected<'_> {
    match token {
        ArgToken::Null => de::Unexpected::Unit,
        ArgToken::Bool(b) => de::Unexpected::Bool(b),
        ArgToken::U64(u) => de::Unexpected::Unsigned(u),
        ArgToken::I64(i) => de::Unexpected::Signed(i),
        ArgToken::F64(f) => de::Unexpected::Float(f),
        ArgToken::Str(s) => de::Unexpected::Str(s.as_str()),
        ArgToken::Seq(_) => de::Unexpected::Seq,
        ArgToken::Map(_) => de::Unexpected::Map,
    }
}

impl<'de> de::Deserializer<'de> for &mut Reader<'_, 'de> {
    type Error = TapeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TapeError> {
        match self.next()? {
            ArgToken::Null => visitor.visit_unit(),
            ArgToken::Bool(b) => visitor.visit_bool(b),
            ArgToken::U64(u) => visitor.visit_u64(u),
            ArgToken::I64(i) => visitor.visit_i64(i),
            ArgToken::F64(f) => visitor.visit_f64(f),
            ArgToken::Str(s) => visitor.visit_borrowed_str(s.as_str()),
            // As `serde_json::from_value`: a visitor that stops before the
            // end (a tuple shorter than the array) is an error.
            ArgToken::Seq(n) => {
                let mut items = Items { reader: &mut *self, left: n };
                let value = visitor.visit_seq(&mut items)?;
                match items.left {
                    0 => Ok(value),
                    _ => Err(de::Error::invalid_length(usize::try_from(n).unwrap_or(usize::MAX), &"fewer elements in array")),
                }
            }
            ArgToken::Map(n) => {
                let mut entries = Entries { reader: &mut *self, left: n };
                let value = visitor.visit_map(&mut entries)?;
                match entries.left {
                    0 => Ok(value),
                    _ => Err(de::Error::invalid_length(usize::try_from(n).unwrap_or(usize::MAX), &"fewer elements in map")),
                }
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TapeError> {
        if self.peek() == Some(ArgToken::Null) {
            self.at += 1;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, TapeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(self, _name: &'static str, _variants: &'static [&'static str], visitor: V) -> Result<V::Value, TapeError> {
        match self.next()? {
            ArgToken::Str(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            ArgToken::Map(1) => visitor.visit_enum(Variant { reader: self }),
            other => Err(de::Error::invalid_type(unexpected(other), &"a string or an object with one key")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TapeError> {
        self.skip()?;
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

struct Items<'r, 't, 'a> {
    reader: &'r mut Reader<'t, 'a>,
    left: u64,
}

impl<'de> de::SeqAccess<'de> for Items<'_, '_, 'de> {
    type Error = TapeError;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, TapeError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.reader).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        usize::try_from(self.left).ok()
    }
}

struct Entries<'r, 't, 'a> {
    reader: &'r mut Reader<'t, 'a>,
    left: u64,
}

impl<'de> de::MapAccess<'de> for Entries<'_, '_, 'de> {
    type Error = TapeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, TapeError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.reader).map(Some)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, TapeError> {
        seed.deserialize(&mut *self.reader)
    }

    fn size_hint(&self) -> Option<usize> {
        usize::try_from(self.left).ok()
    }
}

/// An enum written as `{"Variant": content}`.
struct Variant<'r, 't, 'a> {
    reader: &'r mut Reader<'t, 'a>,
}

impl<'de, 'r, 't> de::EnumAccess<'de> for Variant<'r, 't, 'de> {
    type Error = TapeError;
    type Variant = &'r mut Reader<'t, 'de>;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self::Variant), TapeError> {
        let name = seed.deserialize(&mut *self.reader)?;
        Ok((name, self.reader))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Reader<'_, 'de> {
    type Error = TapeError;

    fn unit_variant(self) -> Result<(), TapeError> {
        de::Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, TapeError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, TapeError> {
        de::Deserializer::deserialize_seq(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(self, _fields: &'static [&'static str], visitor: V) -> Result<V::Value, TapeError> {
        de::Deserializer::deserialize_map(self, visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Status {
        Pending,
        InProgress,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Item {
        content: String,
        status: Status,
        #[serde(default)]
        note: Option<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    enum Shape {
        Point,
        Circle(f64),
        Rect { w: u32, h: u32 },
        Pair(i8, i8),
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Everything {
        items: Vec<Item>,
        shapes: Vec<Shape>,
        big: u64,
        negative: i32,
        ratio: f32,
        pair: (u8, String),
        any: Value,
        map: BTreeMap<String, bool>,
        missing: Option<u8>,
        null: Option<u8>,
        #[serde(skip_deserializing)]
        skipped: u8,
    }

    /// What `serde_json` gives from the same value, we give from its tokens.
    fn same<T: serde::de::DeserializeOwned + PartialEq + fmt::Debug>(value: Value) {
        let mut tokens = Vec::new();
        write_tokens(&value, &mut tokens);
        assert_eq!(tokens.len(), token_count(&value));
        let ours = from_tokens::<T>(&tokens).map_err(|e| e.0);
        let theirs = serde_json::from_value::<T>(value.clone()).map_err(|e| e.to_string());
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{value}"),
            (Err(_), Err(_)) => {}
            _ => panic!("{value}: ours {ours:?}, serde_json {theirs:?}"),
        }
    }

    #[test]
    fn gives_what_serde_json_gives() {
        same::<Everything>(json!({
            "items": [{"content": "a \"b\"", "status": "in_progress"}, {"content": "c", "status": "pending", "note": null}],
            "shapes": ["Point", {"Circle": 1.5}, {"Rect": {"w": 2, "h": 3}}, {"Pair": [-1, 2]}],
            "big": u64::MAX, "negative": -7, "ratio": 0.25, "pair": [1, "x"],
            "any": {"nested": [1, -2, 3.5, null, true, {"k": "v"}]},
            "map": {"x": true, "y": false}, "null": null, "extra": {"ignored": [1, [2]]},
        }));
        same::<Vec<Item>>(json!([{"content": "a", "status": "pending", "other": 1}]));
        same::<Item>(json!({"content": 1, "status": "pending"}));
        same::<Item>(json!({"content": "a", "status": "done"}));
        same::<Item>(json!({"content": "a"}));
        same::<u8>(json!(300));
        same::<u8>(json!(-1));
        same::<(u8, u8)>(json!([1, 2, 3]));
        same::<Option<Vec<u8>>>(json!(null));
        same::<Value>(json!({"todos": [{"content": "x", "status": "pending"}]}));
    }

    #[derive(Debug, Deserialize)]
    struct Borrowing<'a> {
        plain: &'a str,
        #[serde(borrow)]
        cow: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        list: Vec<&'a str>,
    }

    #[test]
    fn borrowed_fields_point_into_the_parsed_value() {
        let value = json!({"plain": "a \"quoted\" text", "cow": "ü\n", "list": ["x", "y"]});
        let mut tokens = Vec::new();
        write_tokens(&value, &mut tokens);
        let got: Borrowing<'_> = from_tokens(&tokens).unwrap();
        assert_eq!((got.plain, got.cow.as_ref(), got.list.as_slice()), ("a \"quoted\" text", "ü\n", ["x", "y"].as_slice()));
        assert!(std::ptr::eq(got.plain, value["plain"].as_str().unwrap()), "copied, not borrowed");
        assert!(matches!(got.cow, std::borrow::Cow::Borrowed(_)), "a Cow field is borrowed");
        assert!(std::ptr::eq(got.list[1], value["list"][1].as_str().unwrap()));
    }

    #[test]
    fn a_cut_list_is_an_error_not_a_panic() {
        let value = json!({"a": [1, 2, {"b": "c"}]});
        let mut tokens = Vec::new();
        write_tokens(&value, &mut tokens);
        for cut in 0..tokens.len() {
            assert!(from_tokens::<Value>(&tokens[..cut]).is_err(), "{cut}");
        }
        tokens.push(ArgToken::Null);
        assert!(from_tokens::<Value>(&tokens).unwrap_err().0.contains("left over"));
    }
}
