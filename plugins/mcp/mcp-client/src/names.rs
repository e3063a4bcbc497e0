//! The name a server's tool is registered under.
//!
//! The harness's rule, so that a composition's tools keep their names
//! across hosts: `mcp__<serverName>__<tool>` when that is already a valid
//! function name (at most 64 of `A-Z a-z 0-9 _ -`); otherwise every other
//! character becomes `_`, the result is cut to 51 characters, and `_` and
//! the first 12 hex digits of the SHA-256 of `<serverName>\0<tool>` are
//! appended, so two tools never end up with one name. The name depends on
//! nothing else (not on the order of the list, not on other servers).

use sha2::{Digest, Sha256};

/// The longest function name the model APIs take.
pub const MAX_NAME: usize = 64;

/// How many hex digits of the hash a rewritten name carries.
const HASH_DIGITS: usize = 12;

/// The public name of tool `tool` of server `server`.
pub fn public_name(server: &str, tool: &str) -> String {
    let joined = format!("mcp__{server}__{tool}");
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    // Per UTF-16 unit, as the harness replaces them: a character outside
    // the basic plane becomes two `_`.
    let normalized: String =
        joined.chars().flat_map(|c| std::iter::repeat_n(if valid(c) { c } else { '_' }, if valid(c) { 1 } else { c.len_utf16() })).collect();
    if normalized == joined && normalized.len() <= MAX_NAME {
        return normalized;
    }
    let digest = Sha256::digest(format!("{server}\0{tool}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let keep: String = normalized.chars().take(MAX_NAME - HASH_DIGITS - 1).collect();
    format!("{keep}_{}", &hex[..HASH_DIGITS])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_name_is_kept_and_others_are_rewritten_with_a_hash() {
        assert_eq!(public_name("fs", "read_file"), "mcp__fs__read_file");
        let dotted = public_name("fs", "read.file");
        assert!(dotted.starts_with("mcp__fs__read_file_") && dotted.len() == "mcp__fs__read_file_".len() + 12, "{dotted}");
        assert_ne!(dotted, public_name("fs", "read/file"), "two tools never share a name");
        let long = public_name("server", &"x".repeat(80));
        assert_eq!(long.len(), MAX_NAME);
        assert!(long.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        assert_eq!(long, public_name("server", &"x".repeat(80)), "a pure function");
    }

    #[test]
    fn names_match_the_harness_rule() {
        // Computed with Node.js from the harness's rule.
        assert_eq!(public_name("fs", "read.file"), "mcp__fs__read_file_a70c27002fc8");
    }
}
