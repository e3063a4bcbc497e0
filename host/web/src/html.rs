//! Text into HTML: every piece of session text goes through [`text`] (or
//! [`attr`] inside an attribute), never into markup as it is.
//!
//! Besides escaping `& < > " '`, [`text`] makes invisible characters that
//! could change how the page reads visible: the bidirectional controls
//! (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), which could
//! reorder the text around them, and the C0 and C1 control characters
//! other than tab and line feed. Each is shown as a marked `U+XXXX` code,
//! so a message holding U+202E reads as written, with the override named.
//! Session text is never made into a link, so `javascript:` in a message is
//! only text.

/// `s` escaped for an HTML text node or a quoted attribute value: `&`,
/// `<`, `>`, `"` and `'` as character references.
pub fn attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    push_escaped(&mut out, s);
    out
}

fn push_escaped(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// Whether `c` is shown as a code instead of as itself: a bidirectional
/// control, or a C0/C1 control other than tab, line feed and carriage return.
pub fn is_shown_as_code(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
        || (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
}

/// `s` as HTML text: escaped as [`attr`] does, and each character
/// [`is_shown_as_code`] replaced by `<span class="ctl">U+XXXX</span>`.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if is_shown_as_code(c) {
            push_escaped(&mut out, &s[start..i]);
            out.push_str(&format!("<span class=\"ctl\">U+{:04X}</span>", u32::from(c)));
            start = i + c.len_utf8();
        }
    }
    push_escaped(&mut out, &s[start..]);
    out
}

/// The first `max` characters of `s` and whether it was cut.
pub fn cut(s: &str, max: usize) -> (&str, bool) {
    match s.char_indices().nth(max) {
        Some((i, _)) => (&s[..i], true),
        None => (s, false),
    }
}

/// `s` on one line: each run of line breaks (and other vertical space)
/// becomes one space, surrounding whitespace trimmed.
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_break = false;
    for c in s.trim().chars() {
        if matches!(c, '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}') {
            if !in_break {
                out.push(' ');
            }
            in_break = true;
        } else {
            out.push(c);
            in_break = false;
        }
    }
    out
}

/// `id` made safe for a URL path segment: every byte other than an
/// unreserved character (`A-Z a-z 0-9 - . _ ~`) percent-encoded, so ids
/// holding `/`, `?` or `#` (a harness store allows them) stay one segment.
pub fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes a percent-encoded path segment; `None` when an escape is
/// malformed or the bytes are not UTF-8.
pub fn decode_segment(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An id usable as an HTML `id` attribute and CSS selector: `prefix`
/// followed by the hex digits of `key`'s bytes.
pub fn dom_id(prefix: &str, key: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + key.len() * 2);
    out.push_str(prefix);
    for b in key.bytes() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A time in ms since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (the
/// proleptic Gregorian calendar; negative times are before 1970).
pub fn utc(ms: i64) -> String {
    cordis_session::event::format_utc(ms)
}

/// A time in ms since the epoch as an ISO 8601 UTC timestamp for a
/// `<time datetime>` attribute.
pub fn iso(ms: i64) -> String {
    let t = utc(ms);
    // `YYYY-MM-DD HH:MM:SS UTC` → `YYYY-MM-DDTHH:MM:SSZ`.
    format!("{}Z", t.trim_end_matches(" UTC").replacen(' ', "T", 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(text("<script>alert('x')</script> & \"q\""), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
        assert_eq!(attr("a\"b'c<"), "a&quot;b&#39;c&lt;");
    }

    #[test]
    fn bidi_and_control_characters_are_shown_as_codes() {
        assert_eq!(text("abc\u{202E}def"), "abc<span class=\"ctl\">U+202E</span>def");
        assert_eq!(text("a\u{0}b\u{1b}c\td\ne"), "a<span class=\"ctl\">U+0000</span>b<span class=\"ctl\">U+001B</span>c\td\ne");
        assert_eq!(text("\u{2067}<\u{2069}"), "<span class=\"ctl\">U+2067</span>&lt;<span class=\"ctl\">U+2069</span>");
    }

    #[test]
    fn segments_round_trip() {
        for id in ["s-1", "a/b", "x?y#z", "百 分%"] {
            let enc = path_segment(id);
            assert!(!enc.contains(['/', '?', '#', ' ']), "{enc}");
            assert_eq!(decode_segment(&enc).as_deref(), Some(id));
        }
        assert_eq!(decode_segment("%zz"), None);
        assert_eq!(decode_segment("%f0%28"), None);
        assert_eq!(decode_segment("%4"), None);
    }

    #[test]
    fn times_and_cuts() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(iso(1_796_195_277_244), "2026-12-02T07:07:57Z");
        assert_eq!(cut("héllo", 2), ("hé", true));
        assert_eq!(cut("hé", 2), ("hé", false));
        assert_eq!(one_line("  a\n\nb\r\nc "), "a b c");
    }
}
