//! Whitespace trimming with JavaScript's rules.
//!
//! The reference implementation trims each todo's `content` with
//! `String.prototype.trim`, and the stored lists (and therefore the logs we
//! must reproduce) depend on exactly which characters that removes. Rust's
//! [`str::trim`] uses the Unicode `White_Space` property instead, which differs
//! in two places:
//!
//! | character | JavaScript `trim` | Rust `trim` |
//! | --- | --- | --- |
//! | U+FEFF ZERO WIDTH NO-BREAK SPACE (BOM) | trimmed | kept |
//! | U+0085 NEXT LINE | kept | trimmed |
//!
//! Everything else agrees (U+180E MONGOLIAN VOWEL SEPARATOR is trimmed by
//! neither: it left category Zs in Unicode 6.3).

/// Whether `c` is a JavaScript `WhiteSpace` or `LineTerminator` code point
/// (ECMA-262 §12.2 and §12.3): U+0009, U+000B, U+000C, U+0020, U+00A0,
/// U+FEFF, the Unicode `Zs` characters (U+1680, U+2000–U+200A, U+202F,
/// U+205F, U+3000), and U+000A, U+000D, U+2028, U+2029.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{0009}' | '\u{000A}' | '\u{000B}' | '\u{000C}' | '\u{000D}' | '\u{0020}' | '\u{00A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}' | '\u{FEFF}'
    )
}

/// Whether `c` is a JavaScript `LineTerminator` (U+000A, U+000D, U+2028,
/// U+2029).
pub fn is_js_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// `s` without leading and trailing whitespace, exactly as JavaScript's
/// `String.prototype.trim` would return it (see [`is_js_whitespace`]).
/// Whitespace inside the text is kept.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_ascii_whitespace_and_keeps_inner_runs() {
        assert_eq!(js_trim("  trim me  "), "trim me");
        assert_eq!(js_trim("\tand me\n"), "and me");
        assert_eq!(js_trim("\r\n\u{000B}\u{000C}x\u{000C}"), "x");
        assert_eq!(js_trim("keep  inner   spaces"), "keep  inner   spaces");
        assert_eq!(js_trim(" a \t b "), "a \t b");
        assert_eq!(js_trim("   "), "");
        assert_eq!(js_trim(""), "");
    }

    #[test]
    fn trims_bom_unlike_rust() {
        let s = "\u{FEFF}task\u{FEFF}";
        assert_eq!(js_trim(s), "task");
        assert_eq!(s.trim(), s, "Rust keeps U+FEFF");
    }

    #[test]
    fn keeps_next_line_unlike_rust() {
        let s = "\u{0085}task\u{0085}";
        assert_eq!(js_trim(s), s);
        assert_eq!(s.trim(), "task", "Rust trims U+0085");
    }

    #[test]
    fn trims_line_and_paragraph_separators() {
        assert_eq!(js_trim("\u{2028}task\u{2029}"), "task");
    }

    #[test]
    fn trims_unicode_space_separators() {
        for c in ['\u{00A0}', '\u{1680}', '\u{2000}', '\u{2005}', '\u{200A}', '\u{202F}', '\u{205F}', '\u{3000}'] {
            let s = format!("{c}x{c}");
            assert_eq!(js_trim(&s), "x", "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn keeps_characters_javascript_does_not_trim() {
        // U+180E left Zs in Unicode 6.3; U+200B is a format character.
        for c in ['\u{180E}', '\u{200B}', '\u{0085}', '\u{001C}', '\u{001F}'] {
            let s = format!("{c}x{c}");
            assert_eq!(js_trim(&s), s, "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn agrees_with_rust_everywhere_else() {
        // Scan the whole BMP and beyond: the only disagreements are U+FEFF and U+0085.
        let mut differ = Vec::new();
        for c in (0..=0x10FFFF_u32).filter_map(char::from_u32) {
            if is_js_whitespace(c) != c.is_whitespace() {
                differ.push(c);
            }
        }
        assert_eq!(differ, vec!['\u{0085}', '\u{FEFF}']);
    }

    #[test]
    fn line_terminators() {
        for c in ['\n', '\r', '\u{2028}', '\u{2029}'] {
            assert!(is_js_line_terminator(c));
            assert!(is_js_whitespace(c));
        }
        assert!(!is_js_line_terminator('\u{0085}'));
        assert!(!is_js_line_terminator(' '));
    }
}
