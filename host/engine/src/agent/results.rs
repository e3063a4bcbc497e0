//! Tool results as the model reads them: bounded.
//!
//! A tool may return megabytes (an MCP server's file dump, ten thousand
//! content blocks). The session log keeps every result whole; the history
//! sent to the model carries at most [`result_cap`] bytes of each result's
//! text, the rest replaced by a note saying how much was cut and that the
//! log has it all. The cap is a quarter of the model's context window,
//! counted at about four bytes a token (so, in bytes, the window's size in
//! tokens), or [`DEFAULT_RESULT_CAP_BYTES`] when the window is unknown.

use cordis_session::Message;

/// The cap on one result's text when the model's context window is not
/// known: 128 KiB.
pub const DEFAULT_RESULT_CAP_BYTES: usize = 128 * 1024;

/// The smallest cap, whatever the window: 4 KiB.
pub const MIN_RESULT_CAP_BYTES: usize = 4 * 1024;

/// The most bytes of one tool result's text the model is sent, for a
/// model whose context window is `context_window` tokens: a quarter of it
/// at four bytes a token.
pub fn result_cap(context_window: Option<u64>) -> usize {
    match context_window {
        Some(tokens) => usize::try_from(tokens).unwrap_or(usize::MAX).max(MIN_RESULT_CAP_BYTES),
        None => DEFAULT_RESULT_CAP_BYTES,
    }
}

/// Cuts each tool result's text in `messages` to `cap` bytes (at a
/// character boundary), appending a note of what was cut; returns how many
/// results were cut.
pub fn bound_results(messages: &mut [Message], cap: usize) -> usize {
    let mut cut = 0;
    for message in messages {
        if let Message::Tool { text, .. } = message {
            if text.len() > cap {
                let total = text.len();
                let mut end = cap;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text.push_str(&format!(
                    "\n[cordis cut this result: {end} of its {total} bytes are shown, {} bytes were cut; the session log keeps the whole result]",
                    total - end
                ));
                cut += 1;
            }
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_at_a_character_boundary_with_a_note() {
        let mut messages = vec![
            Message::Tool { call_id: "a".into(), text: "é".repeat(3000), is_error: false },
            Message::Tool { call_id: "b".into(), text: "short".into(), is_error: false },
            Message::User { text: "x".repeat(10_000) },
        ];
        assert_eq!(bound_results(&mut messages, 4097), 1);
        let Message::Tool { text, .. } = &messages[0] else { panic!("not a tool result") };
        assert!(text.starts_with(&"é".repeat(2048)) && !text.starts_with(&"é".repeat(2049)), "cut at 4096 bytes");
        assert!(
            text.ends_with("[cordis cut this result: 4096 of its 6000 bytes are shown, 1904 bytes were cut; the session log keeps the whole result]")
        );
        assert_eq!(messages[1], Message::Tool { call_id: "b".into(), text: "short".into(), is_error: false });
        assert_eq!(result_cap(Some(131_072)), 131_072);
        assert_eq!(result_cap(Some(10)), MIN_RESULT_CAP_BYTES);
        assert_eq!(result_cap(None), DEFAULT_RESULT_CAP_BYTES);
    }
}
