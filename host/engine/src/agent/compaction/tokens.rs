//! Token counts: how big the next request is, and what a region of
//! history weighs.
//!
//! Two ways to count. The **estimate** ([`text_tokens`]) needs nothing: 0.6
//! tokens per CJK character and `ceil(other characters / 4)`, calibrated
//! against DeepSeek's tokenizer (within 5 % of it on English prose, code
//! and Chinese; other vocabularies pack Chinese differently). A
//! **vocabulary** ([`Vocabulary`]) is a Hugging Face `tokenizer.json`,
//! named by the compaction entry's `tokenizer` key for every model or by a
//! `modelPolicies` row for one, and counted by the `tokenizers` library:
//! with the model's own tokenizer file, the count is the provider's.
//!
//! A vocabulary is read on a thread of its own as the host boots
//! ([`Counters::start`]; DeepSeek's 6.4 MB file takes about 0.3 s), so
//! boot does not wait for it; the first count does. A file that cannot be
//! read as a tokenizer is said once ([`Counters::counter`]) and the
//! estimate counts instead. Each text's count is remembered by the text's
//! 64-bit hash (up to [`REMEMBERED`] texts), so a step counts only what is
//! new since the last.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use serde_json::Value;

use crate::tools::ToolSchema;
use cordis_session::event::core;
use cordis_session::event::SurfaceOp;
use cordis_session::{surface_nodes, Event, Message};
use cordis_sync::LockExt;

/// How many texts' counts a vocabulary remembers before it forgets them
/// all and starts again (a count is 16 bytes: about 4 MB at most).
pub const REMEMBERED: usize = 1 << 18;

/// A tokenizer read from a Hugging Face `tokenizer.json`.
pub struct Vocabulary {
    path: PathBuf,
    tokenizer: tokenizers::Tokenizer,
    /// Counts by the hash of the text counted.
    counted: Mutex<HashMap<u64, u64>>,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Vocabulary {
    /// Reads the tokenizer in `path`.
    ///
    /// # Errors
    /// When the file cannot be read, or is not a tokenizer the library
    /// knows: the message names the file.
    pub fn load(path: &Path) -> Result<Vocabulary, String> {
        let tokenizer = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| format!("{} is not a tokenizer.json the tokenizers library can read: {e}", path.display()))?;
        Ok(Vocabulary { path: path.to_path_buf(), tokenizer, counted: Mutex::new(HashMap::new()) })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tokens of `text` in this vocabulary, without special tokens;
    /// the estimate when the library cannot encode it.
    pub fn count(&self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        let key = hasher.finish();
        if let Some(&n) = self.counted.lock_or_recover().get(&key) {
            return n;
        }
        let n = match self.tokenizer.encode_fast(text, false) {
            Ok(encoding) => encoding.len() as u64,
            Err(_) => text_tokens(text),
        };
        let mut counted = self.counted.lock_or_recover();
        if counted.len() >= REMEMBERED {
            counted.clear();
        }
        counted.insert(key, n);
        n
    }
}

/// A vocabulary being read, or read.
struct Loading {
    done: OnceLock<Result<Arc<Vocabulary>, String>>,
    thread: Mutex<Option<JoinHandle<Result<Vocabulary, String>>>>,
    /// Whether a failure to read it was said already.
    said: AtomicBool,
}

impl Loading {
    fn get(&self, path: &Path) -> &Result<Arc<Vocabulary>, String> {
        self.done.get_or_init(|| {
            let loaded = match self.thread.lock_or_recover().take() {
                Some(thread) => thread.join().unwrap_or_else(|_| Err(format!("reading {} stopped on a panic", path.display()))),
                None => Vocabulary::load(path),
            };
            loaded.map(Arc::new)
        })
    }
}

/// The vocabularies a compaction config names, each read on its own
/// thread from the moment the config is in force.
#[derive(Default)]
pub struct Counters {
    loading: HashMap<PathBuf, Arc<Loading>>,
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counters").field("vocabularies", &self.loading.keys().collect::<Vec<_>>()).finish()
    }
}

impl Counters {
    /// Starts reading each file of `paths` (each once) on a thread of its
    /// own; one that cannot be started is read at its first use.
    pub fn start(paths: impl IntoIterator<Item = PathBuf>) -> Counters {
        let mut loading = HashMap::new();
        for path in paths {
            if loading.contains_key(&path) {
                continue;
            }
            let file = path.clone();
            let thread = std::thread::Builder::new().name("cordis-tokenizer".into()).spawn(move || Vocabulary::load(&file)).ok();
            loading.insert(path, Arc::new(Loading { done: OnceLock::new(), thread: Mutex::new(thread), said: AtomicBool::new(false) }));
        }
        Counters { loading }
    }

    /// The counter for a model whose policy names `tokenizer` (`None`: the
    /// estimate), waiting for the file to be read. A file that could not
    /// be read gives the estimate, and `say` is called with why, once per
    /// file.
    pub fn counter(&self, tokenizer: Option<&Path>, say: &mut dyn FnMut(&str)) -> Counter {
        let Some(path) = tokenizer else { return Counter::Estimate };
        let loading = match self.loading.get(path) {
            Some(l) => l.clone(),
            None => return Counter::Estimate,
        };
        match loading.get(path) {
            Ok(v) => Counter::Vocabulary(v.clone()),
            Err(why) => {
                if !loading.said.swap(true, Ordering::Relaxed) {
                    say(&format!("compaction: {why}; counting tokens with the estimate instead"));
                }
                Counter::Estimate
            }
        }
    }
}

/// How tokens are counted for one model: the estimate, or a vocabulary.
#[derive(Debug, Clone, Default)]
pub enum Counter {
    /// The calibrated estimate ([`text_tokens`]).
    #[default]
    Estimate,
    /// A tokenizer's count.
    Vocabulary(Arc<Vocabulary>),
}

impl Counter {
    /// The tokens of `text`.
    pub fn text(&self, text: &str) -> u64 {
        match self {
            Counter::Estimate => text_tokens(text),
            Counter::Vocabulary(v) => v.count(text),
        }
    }

    /// The tokens of one history message: its parts' tokens (text,
    /// reasoning, each call's name, arguments and id; a result's text and
    /// call id) + 4 for its framing.
    pub fn message(&self, message: &Message) -> u64 {
        match self {
            Counter::Estimate => message_tokens(message),
            Counter::Vocabulary(v) => {
                let parts: u64 = match message {
                    Message::User { text } => v.count(text),
                    Message::Assistant { text, tool_calls, reasoning } => {
                        v.count(text)
                            + v.count(reasoning)
                            + tool_calls.iter().map(|c| v.count(&c.name) + v.count(&c.arguments) + v.count(&c.id)).sum::<u64>()
                    }
                    Message::Tool { text, call_id, .. } => v.count(text) + v.count(call_id),
                };
                parts + 4
            }
        }
    }

    /// The tokens of the tool schemas a request sends: each one's name,
    /// description and parameters' JSON.
    pub fn tools(&self, tools: &[ToolSchema]) -> u64 {
        match self {
            Counter::Estimate => tools_tokens(tools),
            Counter::Vocabulary(v) => tools.iter().map(|t| v.count(&t.name) + v.count(&t.description) + v.count(&t.parameters.to_string())).sum(),
        }
    }

    /// The size of the request the next step would send, in tokens: the
    /// last reported usage plus the count of what came after it, or the
    /// count of the whole history, the tool schemas and `system` (the
    /// system prompt's tokens). A usage reported before a replacement no
    /// longer describes the history and is not used.
    pub fn request(&self, events: &[Event], tools: &[ToolSchema], system: u64) -> u64 {
        let nodes = surface_nodes(events);
        let reported = events.iter().rev().find_map(|e| {
            if e.kind != core::ASSISTANT_MESSAGE {
                return None;
            }
            let usage = e.data_value().get("usage").cloned()?;
            let input = usage.get("inputTokens").and_then(Value::as_u64)?;
            let output = usage.get("outputTokens").and_then(Value::as_u64).unwrap_or(0);
            Some((e.seq, input + output))
        });
        let usable = reported.filter(|(seq, _)| !events.iter().any(|e| e.seq > *seq && matches!(e.surface_op, Some(SurfaceOp::Replace { .. }))));
        let count = |m: &Option<Message>| m.as_ref().map_or(0, |m| self.message(m));
        match usable {
            Some((seq, tokens)) => tokens + nodes.iter().filter(|(s, _)| *s > seq).map(|(_, m)| count(m)).sum::<u64>(),
            None => nodes.iter().map(|(_, m)| count(m)).sum::<u64>() + self.tools(tools) + system,
        }
    }

    /// One phrase for `cordis check` and the guide: how this counter counts.
    pub fn describe(&self) -> String {
        match self {
            Counter::Estimate => "tokens estimated (calibrated against DeepSeek's tokenizer)".into(),
            Counter::Vocabulary(v) => format!("tokens counted with the tokenizer in {}", v.path.display()),
        }
    }
}

/// Tokens per 5 wide (CJK) characters in the estimate: 3, i.e. 0.6 a
/// character. Calibrated, not derived: DeepSeek's tokenizer (the default
/// provider's vocabulary) spends 0.57 tokens per CJK character on the
/// Chinese texts of `bench/data/` (`cordis-bench --tokens`), and a little
/// over is the safe side (compaction comes early, never late).
const WIDE_TOKENS_PER_5: u64 = 3;

/// Characters counted by an estimate: wide (CJK) characters, 0.6 tokens
/// each, and the others, four to a token (see [`text_tokens`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counted {
    wide: u64,
    narrow: u64,
}

impl Counted {
    fn of(text: &str) -> Counted {
        let mut c = Counted::default();
        c.add(text);
        c
    }

    fn add(&mut self, text: &str) {
        for ch in text.chars() {
            if is_wide(ch) {
                self.wide += 1;
            } else {
                self.narrow += 1;
            }
        }
    }

    fn tokens(self) -> u64 {
        (self.wide * WIDE_TOKENS_PER_5).div_ceil(5) + self.narrow.div_ceil(4)
    }
}

/// Whether `ch` is written by BPE tokenizers as a token or more of its own:
/// CJK ideographs, kana, hangul, and CJK and fullwidth punctuation.
fn is_wide(ch: char) -> bool {
    matches!(ch as u32,
        0x1100..=0x11FF       // Hangul Jamo
        | 0x2E80..=0x2FDF     // CJK radicals, Kangxi radicals
        | 0x3000..=0x30FF     // CJK symbols and punctuation, hiragana, katakana
        | 0x3100..=0x31FF     // bopomofo, Hangul compatibility Jamo, katakana extensions
        | 0x3200..=0x4DBF     // enclosed CJK, CJK compatibility, extension A
        | 0x4E00..=0x9FFF     // CJK unified ideographs
        | 0xA960..=0xA97F     // Hangul Jamo extended A
        | 0xAC00..=0xD7FF     // Hangul syllables and Jamo extended B
        | 0xF900..=0xFAFF     // CJK compatibility ideographs
        | 0xFE30..=0xFE4F     // CJK compatibility forms
        | 0xFF00..=0xFFEF     // halfwidth and fullwidth forms
        | 0x20000..=0x3FFFF // CJK extensions B and later
    )
}

/// The estimated tokens of one history message: its text's tokens
/// ([`text_tokens`]) + 4.
pub fn message_tokens(message: &Message) -> u64 {
    let mut c = Counted::default();
    match message {
        Message::User { text } => c.add(text),
        Message::Assistant { text, tool_calls, reasoning } => {
            c.add(text);
            c.add(reasoning);
            for call in tool_calls {
                c.add(&call.name);
                c.add(&call.arguments);
                c.add(&call.id);
            }
        }
        Message::Tool { text, call_id, .. } => {
            c.add(text);
            c.add(call_id);
        }
    }
    c.tokens() + 4
}

/// The estimated tokens of a text: `ceil(0.6 × CJK characters)`
/// (ideographs, kana, hangul, CJK and fullwidth punctuation) plus
/// `ceil(other characters / 4)`. A count calibrated against DeepSeek's
/// tokenizer (the default provider's), not a tokenizer: on the texts of
/// `cordis-bench --tokens` it is within 5% of DeepSeek's count on English
/// prose, Rust code, a mostly-Chinese session and Chinese prose. Other
/// vocabularies pack Chinese differently (`o200k_base` about 0.72 tokens a
/// character, `cl100k_base` about 1), so for their models it runs under on
/// Chinese until the provider's reported usage replaces it.
pub fn text_tokens(text: &str) -> u64 {
    Counted::of(text).tokens()
}

/// The estimated tokens of the tool schemas a request sends.
pub fn tools_tokens(tools: &[ToolSchema]) -> u64 {
    let mut c = Counted::default();
    for t in tools {
        c.add(&t.name);
        c.add(&t.description);
        c.add(&t.parameters.to_string());
    }
    c.tokens()
}

/// The size of the request the next step would send, in tokens, by the
/// estimate ([`Counter::request`] with [`Counter::Estimate`]).
pub fn request_tokens(events: &[Event], tools: &[ToolSchema], system: u64) -> u64 {
    Counter::Estimate.request(events, tools, system)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordis_session::history::ToolCallPart;

    #[test]
    fn estimates_round_up_and_count_every_part() {
        assert_eq!(message_tokens(&Message::User { text: "abcde".into() }), 2 + 4);
        assert_eq!(message_tokens(&Message::User { text: String::new() }), 4);
    }

    #[test]
    fn cjk_characters_count_six_tenths_of_a_token_each() {
        // 10 ideographs, a fullwidth comma, 3 hiragana, 2 hangul syllables:
        // ceil(16 × 0.6) = 10.
        assert_eq!(text_tokens("实现一个会话压缩功能，これは한국"), 10);
        // Mixed: 4 ideographs (ceil(2.4) = 3) and 9 other characters
        // (ceil(9 / 4) = 3).
        assert_eq!(text_tokens("修复 the bug 错误"), 3 + 3);
        // Characters / 4 would give 250 for 1000 ideographs.
        assert_eq!(text_tokens(&"压".repeat(1000)), 600);
        assert_eq!(text_tokens("plain English text!"), 5);
        // Across messages the fractions add up before rounding.
        let mut c = Counted::of("压缩");
        c.add("压缩压");
        assert_eq!(c.tokens(), 3);
    }

    /// A word-level tokenizer of three words, split on whitespace: each
    /// word is one token, anything else one unknown token.
    const WORDS: &str = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"hello": 0, "world": 1, "[UNK]": 2}, "unk_token": "[UNK]"}}"#;

    fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_vocabulary_counts_its_tokens_and_remembers_them() {
        let dir = tempfile::tempdir().unwrap();
        let v = Vocabulary::load(&file(dir.path(), "words.json", WORDS)).unwrap();
        assert_eq!(v.count("hello world hello"), 3);
        assert_eq!(v.count("hello   unknown!"), 3, "hello, an unknown word, an unknown mark");
        assert_eq!(v.count(""), 0);
        assert_eq!(v.counted.lock_or_recover().len(), 2, "each text counted once is remembered");
        assert_eq!(v.count("hello world hello"), 3);
        let counter = Counter::Vocabulary(Arc::new(v));
        // The estimate would say ceil(17 / 4) + 4 = 9.
        assert_eq!(counter.message(&Message::User { text: "hello world hello".into() }), 3 + 4);
        let call = ToolCallPart { id: "hello".into(), name: "world".into(), arguments: "hello hello".into() };
        let assistant = Message::Assistant { text: "hello".into(), tool_calls: vec![call], reasoning: "world".into() };
        assert_eq!(counter.message(&assistant), 1 + 1 + 1 + 2 + 1 + 4);
        assert!(counter.describe().contains("words.json"), "{}", counter.describe());
    }

    #[test]
    fn a_file_that_is_no_tokenizer_is_said_once_and_the_estimate_counts() {
        let dir = tempfile::tempdir().unwrap();
        let good = file(dir.path(), "words.json", WORDS);
        let bad = file(dir.path(), "bad.json", "{\"model\": 3}");
        let counters = Counters::start([good.clone(), bad.clone(), good.clone()]);
        let mut said = Vec::new();
        for _ in 0..2 {
            let counter = counters.counter(Some(&bad), &mut |t| said.push(t.to_string()));
            assert!(matches!(counter, Counter::Estimate));
            assert!(matches!(counters.counter(Some(&good), &mut |t| said.push(t.to_string())), Counter::Vocabulary(_)));
            assert!(matches!(counters.counter(None, &mut |t| said.push(t.to_string())), Counter::Estimate));
        }
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("bad.json is not a tokenizer.json") && said[0].ends_with("counting tokens with the estimate instead"), "{said:?}");
    }
}
