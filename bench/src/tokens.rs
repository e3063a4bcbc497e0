//! The compaction's token estimate against real BPE tokenizers.
//!
//! The engine estimates a request's tokens where the provider reported
//! none ([`cordis_engine::agent::compaction::text_tokens`]: a token per CJK
//! character, a token per four other characters). This module counts the
//! same texts with OpenAI's `o200k_base` and `cl100k_base` vocabularies
//! (`tiktoken-rs`, which embeds them, so nothing is downloaded) and times
//! both ways of counting. Three kinds of text, all from the repository:
//! English prose (the guides, `docs/guide/*.md`), code (the engine's Rust
//! sources, `host/engine/src/**/*.rs`) and a mostly-Chinese session
//! (`bench/data/zh-session.txt`: a conversation about this project, with
//! file names and identifiers in it, as such sessions have).

use std::path::{Path, PathBuf};
use std::time::Instant;

use tiktoken_rs::CoreBPE;

use cordis_engine::agent::compaction::text_tokens;

/// One kind of text, counted.
#[derive(Debug, Clone)]
pub struct Counted {
    /// `english`, `code` or `chinese`.
    pub kind: &'static str,
    /// Where the text came from, for the table.
    pub source: String,
    /// Characters (Unicode scalar values).
    pub chars: usize,
    /// The engine's estimate.
    pub estimate: u64,
    /// `o200k_base` tokens.
    pub o200k: u64,
    /// `cl100k_base` tokens.
    pub cl100k: u64,
    /// Seconds per estimate of the whole text, one per run.
    pub estimate_seconds: Vec<f64>,
    /// Seconds per `o200k_base` count of the whole text, one per run.
    pub o200k_seconds: Vec<f64>,
}

/// The two vocabularies, built once (building `o200k_base` takes about
/// 0.1 s).
pub struct Tokenizers {
    o200k: CoreBPE,
    cl100k: CoreBPE,
    /// Seconds it took to build `o200k_base`.
    pub o200k_build_seconds: f64,
}

impl Tokenizers {
    /// Builds both vocabularies.
    ///
    /// # Errors
    /// When `tiktoken-rs` cannot build one (never with its embedded files).
    pub fn new() -> Result<Tokenizers, String> {
        let start = Instant::now();
        let o200k = tiktoken_rs::o200k_base().map_err(|e| format!("o200k_base: {e}"))?;
        let o200k_build_seconds = start.elapsed().as_secs_f64();
        let cl100k = tiktoken_rs::cl100k_base().map_err(|e| format!("cl100k_base: {e}"))?;
        Ok(Tokenizers { o200k, cl100k, o200k_build_seconds })
    }

    /// Counts `text` every way, timing the estimate and `o200k_base`
    /// `runs` times each, interleaved.
    pub fn count(&self, kind: &'static str, source: String, text: &str, runs: usize) -> Counted {
        let mut estimate_seconds = Vec::with_capacity(runs);
        let mut o200k_seconds = Vec::with_capacity(runs);
        let (mut estimate, mut o200k) = (0, 0);
        for _ in 0..runs.max(1) {
            let start = Instant::now();
            estimate = std::hint::black_box(text_tokens(std::hint::black_box(text)));
            estimate_seconds.push(start.elapsed().as_secs_f64());
            let start = Instant::now();
            o200k = std::hint::black_box(self.o200k.encode_ordinary(std::hint::black_box(text)).len()) as u64;
            o200k_seconds.push(start.elapsed().as_secs_f64());
        }
        let cl100k = self.cl100k.encode_ordinary(text).len() as u64;
        Counted { kind, source, chars: text.chars().count(), estimate, o200k, cl100k, estimate_seconds, o200k_seconds }
    }
}

/// The three texts: (kind, where from, text). With `small`, the first 4 KiB
/// of each (the smoke run).
///
/// # Errors
/// A file that cannot be read.
pub fn texts(root: &Path, small: bool) -> Result<Vec<(&'static str, String, String)>, String> {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut guides = files(&root.join("docs/guide"), "md")?;
    guides.sort();
    let mut code = files(&root.join("host/engine/src"), "rs")?;
    code.sort();
    let english = guides.iter().map(|p| read(p)).collect::<Result<Vec<_>, _>>()?.join("\n");
    let rust = code.iter().map(|p| read(p)).collect::<Result<Vec<_>, _>>()?.join("\n");
    let chinese = read(&root.join("bench/data/zh-session.txt"))?;
    let cut = |t: String| if small { t.chars().take(4096).collect() } else { t };
    Ok(vec![
        ("english", format!("the guides, docs/guide/*.md ({} files)", guides.len()), cut(english)),
        ("code", format!("the engine's sources, host/engine/src/**/*.rs ({} files)", code.len()), cut(rust)),
        ("chinese", "a mostly-Chinese session, bench/data/zh-session.txt".into(), cut(chinese)),
    ])
}

/// Files ending in `.ext` under `dir`, at any depth.
fn files(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }
    Ok(out)
}
