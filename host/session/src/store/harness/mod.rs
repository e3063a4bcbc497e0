//! The TypeScript harness's session store, read and written natively.
//!
//! Layout ([`layout`]): `<root>/--<project key>--/<escaped id>/session.jsonl.zstd`
//! (or `session.jsonl` with `compression: none`). Encoding ([`frames`]): a
//! checksummed Zstandard frame holding the header line alone, then one
//! checksummed frame per durable append batch; plain mode writes the same
//! lines as text. Rules of reading ([`scan`]): the harness's own, so a log
//! reads here exactly as the harness's backend reads it:
//!
//! - a torn last frame (or last line): the complete records are kept, the
//!   rest is cut (on disk only when the session is opened for appending),
//!   and an open turn is closed with the harness's closer events;
//! - a complete frame that fails its checksum, or a defect before a
//!   committed `turn/end`: the whole log is refused, naming the byte offset
//!   or line;
//! - nothing else is ever rewritten.
//!
//! Writing: nothing is on disk before the first append; the first batch is
//! written with the header to a temporary file, synced, and published with
//! a hard link, which fails rather than overwrite a log that exists. Each
//! later batch is one frame (or its lines) appended and synced; a failed
//! write is rolled back to the previous length. Every event is written as
//! it is appended, so a crash of the process loses nothing acknowledged;
//! under [`Durability::Event`] each is synced, under `turn` the end of each
//! turn syncs, under `none` nothing does. One process appends to a log at a
//! time (`flock` on the log file).
//!
//! Source of the format and rules: `@deepseek-ai/dsh-session-persistence-jsonl`
//! 0.1.0-rc.8, checked against it by the session suite's `harness_store` tests.

pub mod frames;
pub mod layout;
pub mod scan;

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::event::{Event, Header};
use crate::store::fs::{create_private_dir, lock_exclusive, set_private_mode, sync_dir};
use crate::store::{io, Appended, Durability, LineProblem, LogWriter, Mark, Position, ReadLog, SessionStore, Since, StoreError, TAIL_CHECK};
use frames::FrameEncoder;

/// The package name of the harness's backend; a composition entry with
/// this name (or `cordis:session-persistence-jsonl`) selects this store.
pub const PACKAGE: &str = "@deepseek-ai/dsh-session-persistence-jsonl";

/// The builtin name of this store.
pub const BUILTIN: &str = "session-persistence-jsonl";

/// How a harness store encodes its logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// `session.jsonl.zstd`, Zstandard frames (the default).
    #[default]
    Zstd,
    /// `session.jsonl`, plain text.
    None,
}

impl Compression {
    fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::None => "none",
        }
    }

    fn other(self) -> Compression {
        match self {
            Compression::Zstd => Compression::None,
            Compression::None => Compression::Zstd,
        }
    }
}

fn default_true() -> bool {
    true
}

/// The config of the harness store, as a composition entry gives it:
/// `{root, compression: zstd|none, packChunks}`. The harness's own tuning
/// keys (`preparedSessionCacheSize`, `writeBatchMaxDelayMs`) are accepted
/// and have no effect here (this host writes one batch per event or turn).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HarnessConfig {
    /// The store's root folder (required; relative to the composition's
    /// folder).
    pub root: PathBuf,
    /// The encoding; `zstd` by default.
    #[serde(default)]
    pub compression: Compression,
    /// Store runs of 3 or more streamed chunk events of one batch as one
    /// packed row (default `true`); reading handles both.
    #[serde(default = "default_true")]
    pub pack_chunks: bool,
    /// Accepted for the harness's sake; unused.
    #[serde(default)]
    pub prepared_session_cache_size: Option<Value>,
    /// Accepted for the harness's sake; unused.
    #[serde(default)]
    pub write_batch_max_delay_ms: Option<Value>,
}

impl HarnessConfig {
    /// The JSON Schema of the config (checked before the store is made).
    pub fn schema() -> Value {
        serde_json::json!({
            "type": "object",
            "required": ["root"],
            "additionalProperties": false,
            "properties": {
                "root": {"type": "string", "minLength": 1, "description": "the store's root folder"},
                "compression": {"enum": ["zstd", "none"], "default": "zstd"},
                "packChunks": {"type": "boolean", "default": true},
                "preparedSessionCacheSize": {"type": "integer", "minimum": 1},
                "writeBatchMaxDelayMs": {"type": "integer", "minimum": 1}
            }
        })
    }
}

/// A harness store at one root.
#[derive(Debug, Clone)]
pub struct HarnessStore {
    root: PathBuf,
    compression: Compression,
    pack_chunks: bool,
}

impl HarnessStore {
    /// The store at `root` with `compression`. An existing root must be a
    /// folder; a missing one is created by the first append.
    ///
    /// # Errors
    /// [`StoreError::NotADirectory`].
    pub fn new(root: &Path, compression: Compression, pack_chunks: bool) -> Result<HarnessStore, StoreError> {
        if root.exists() && !root.is_dir() {
            return Err(StoreError::NotADirectory(root.display().to_string()));
        }
        let root = std::path::absolute(root).map_err(io(root))?;
        Ok(HarnessStore { root, compression, pack_chunks })
    }

    /// The store at `root` in whatever encoding its logs use (`zstd` for an
    /// empty or missing root), for reading a harness's root from the
    /// command line.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when the root holds logs of both encodings
    /// (the harness refuses such a root too), [`StoreError::Io`].
    pub fn detect(root: &Path) -> Result<HarnessStore, StoreError> {
        let mut seen: [Option<PathBuf>; 2] = [None, None];
        if root.is_dir() {
            for project in subdirs(root)? {
                for session in subdirs(&project)? {
                    for (i, c) in [Compression::Zstd, Compression::None].into_iter().enumerate() {
                        let file = session.join(layout::file_name(c));
                        if seen[i].is_none() && file.is_file() {
                            seen[i] = Some(file);
                        }
                    }
                }
            }
        }
        let compression = match seen {
            [Some(z), Some(p)] => {
                return Err(StoreError::Corrupt {
                    path: root.display().to_string(),
                    detail: format!(
                        "the root mixes both encodings ({} and {}); the harness refuses such a root: keep one encoding per root",
                        z.display(),
                        p.display()
                    ),
                })
            }
            [None, Some(_)] => Compression::None,
            _ => Compression::Zstd,
        };
        HarnessStore::new(root, compression, true)
    }

    /// The root folder (absolute).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The encoding.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    fn mismatch(&self, path: &Path) -> StoreError {
        StoreError::Corrupt {
            path: path.display().to_string(),
            detail: format!(
                "this log is `{}`, but the store is configured for compression `{}`; use a separate root or the matching compression",
                layout::file_name(self.compression.other()),
                self.compression.name()
            ),
        }
    }

    /// The log file of session `id`: the one project folder holding it.
    fn find(&self, id: &str) -> Result<PathBuf, StoreError> {
        let segment = layout::encode_segment(id).map_err(|_| StoreError::BadId(id.to_string()))?;
        let mut found = Vec::new();
        if self.root.is_dir() {
            for project in subdirs(&self.root)? {
                let dir = project.join(&segment);
                let other = dir.join(layout::file_name(self.compression.other()));
                if other.exists() {
                    return Err(self.mismatch(&other));
                }
                let file = dir.join(layout::file_name(self.compression));
                if file.is_file() {
                    found.push(file);
                }
            }
        }
        match found.len() {
            0 => Err(StoreError::NotFound { id: id.to_string(), dir: self.location() }),
            1 => Ok(found.remove(0)),
            _ => Err(StoreError::Corrupt {
                path: self.root.display().to_string(),
                detail: format!("session `{id}` is stored in {} project folders", found.len()),
            }),
        }
    }

    /// Reads the log at `path` and checks that its header belongs there.
    fn read_at(&self, path: &Path, id: Option<&str>) -> Result<(ReadLog, Option<Repair>), StoreError> {
        let bytes = fs::read(path).map_err(io(path))?;
        self.read_checked(&bytes, path, id, OpenTurn::Close).map(|(log, repair, _)| (log, repair))
    }

    /// Reads the bytes of the log at `path` and checks that its header
    /// belongs there.
    fn read_checked(&self, bytes: &[u8], path: &Path, id: Option<&str>, open: OpenTurn) -> Result<(ReadLog, Option<Repair>, ViewEnd), StoreError> {
        let (log, repair, end) = read_viewed(bytes, self.compression, path, open)?;
        let corrupt = |detail: String| StoreError::Corrupt { path: path.display().to_string(), detail };
        if let Some(id) = id {
            if log.header.id != id {
                return Err(corrupt(format!("the header names session `{}`, not `{id}`", log.header.id)));
            }
        }
        let expected = layout::log_path(&self.root, log.header.cwd.as_deref(), &log.header.id, self.compression).map_err(corrupt)?;
        let same = expected == path || matches!((expected.canonicalize(), path.canonicalize()), (Ok(a), Ok(b)) if a == b);
        if !same {
            return Err(corrupt(format!("its header (id and cwd) places it at {}", expected.display())));
        }
        Ok((log, repair, end))
    }

    /// [`SessionStore::read_since`] for the log at `path`.
    fn read_path_since(&self, path: &Path, id: &str, after: &Position) -> Result<(Since, Position), StoreError> {
        let mut file = File::open(path).map_err(io(path))?;
        let meta = file.metadata().map_err(io(path))?;
        let identity = crate::store::flat::identity_of(&meta);
        if let Mark::Harness(mark) = after.mark() {
            let checked = mark.tail.len() as u64;
            if mark.identity == identity && meta.len() >= mark.offset && checked <= mark.offset {
                let from = mark.offset - checked;
                let mut bytes = Vec::new();
                file.seek(SeekFrom::Start(from)).map_err(io(path))?;
                file.read_to_end(&mut bytes).map_err(io(path))?;
                if bytes.starts_with(&mark.tail) {
                    if !mark.exact && meta.len() == mark.seen_len {
                        // A view that cannot be extended, of a file that
                        // has not changed length: nothing new.
                        return Ok((Since::Appended(Appended::default()), after.clone()));
                    }
                    if mark.exact {
                        if let Some((appended, mark)) = self.appended(mark, &bytes, checked as usize, meta.len()) {
                            let position = after.advanced(&appended, Mark::Harness(mark));
                            return Ok((Since::Appended(appended), position));
                        }
                    }
                }
            }
        }
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0)).map_err(io(path))?;
        file.read_to_end(&mut bytes).map_err(io(path))?;
        let (log, _, end) = self.read_checked(&bytes, path, Some(id), OpenTurn::Keep)?;
        let at = usize::try_from(end.offset).unwrap_or(bytes.len()).min(bytes.len());
        let mark = HarnessMark {
            identity,
            offset: end.offset,
            tail: bytes[at.saturating_sub(TAIL_CHECK as usize)..at].to_vec(),
            line: end.line,
            events: log.events.len(),
            header: log.header.clone(),
            exact: end.exact,
            seen_len: bytes.len() as u64,
        };
        let position = Position::of_whole(&log, Mark::Harness(mark));
        Ok((Since::Whole(log), position))
    }

    /// The events in `bytes` (the file from `mark.offset - skip`, its first
    /// `skip` bytes already checked) when they extend the view exactly:
    /// whole frames (or lines) read by the harness's rules without a
    /// defect (a turn may be open: the view keeps it open). `None` when
    /// only a whole read can say what the log now holds.
    fn appended(&self, mark: &HarnessMark, bytes: &[u8], skip: usize, len: u64) -> Option<(Appended, HarnessMark)> {
        let new = &bytes[skip..];
        let mut scanner = scan::Scanner::resume(mark.header.clone(), mark.line, mark.events);
        let read = match self.compression {
            Compression::Zstd => {
                let frames = frames::split(new).ok()?;
                if frames.torn_start.is_some() {
                    return None;
                }
                let mut decoder = frames::FrameDecoder::new();
                for range in &frames.complete {
                    scanner.write(&decoder.decompress(&new[range.clone()]).ok()?).ok()?;
                }
                new.len()
            }
            Compression::None => {
                scanner.write(new).ok()?;
                new.len()
            }
        };
        let (input, committed, _) = scanner.checkpoint();
        if input != committed {
            return None;
        }
        let scanned = scanner.finish();
        if scanned.issue.is_some() {
            return None;
        }
        let end = skip + read;
        let next = HarnessMark {
            identity: mark.identity,
            offset: mark.offset + read as u64,
            tail: bytes[end.saturating_sub(TAIL_CHECK as usize)..end].to_vec(),
            line: scanned.line,
            events: mark.events + scanned.events.len(),
            header: mark.header.clone(),
            exact: true,
            seen_len: len,
        };
        let problems = scanned.notes.into_iter().map(|(line, note)| LineProblem::note(line, note)).collect();
        Some((Appended { events: scanned.events, lines: scanned.lines, problems, torn: None }, next))
    }
}

fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        if entry.file_type().map_err(io(dir))?.is_dir() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// How far a harness log was read (see [`SessionStore::read_since`]).
#[derive(Debug, Clone)]
pub(crate) struct HarnessMark {
    /// The file's device and inode.
    identity: (u64, u64),
    /// The bytes of the file read: through the last complete frame (or
    /// line).
    offset: u64,
    /// Up to [`TAIL_CHECK`] bytes just before `offset`.
    tail: Vec<u8>,
    /// The last line read (1 = the header).
    line: usize,
    /// The stored events read.
    events: usize,
    /// The log's header (a resumed scan needs it).
    header: Header,
    /// The view read is the stored log as it is, so appends extend it
    /// (see [`ViewEnd::exact`]).
    exact: bool,
    /// The file's length when it was read.
    seen_len: u64,
}

/// What opening a log for appending must fix on disk.
#[derive(Debug)]
struct Repair {
    /// Cut the file here (the start of a torn frame or line).
    cut_at: Option<u64>,
    /// Then append these: records recovered from the torn frame, and the
    /// closers of an open turn.
    append: Vec<Event>,
}

/// Reads a harness log file in `compression` without changing it: a torn
/// tail is left out and an open turn closed in the view (both reported as
/// notes).
///
/// # Errors
/// [`StoreError::BadHeader`], [`StoreError::Corrupt`], [`StoreError::Io`].
pub fn read_file(path: &Path, compression: Compression) -> Result<ReadLog, StoreError> {
    let bytes = fs::read(path).map_err(io(path))?;
    Ok(read_bytes(&bytes, compression, path)?.0)
}

/// Reads the bytes of a harness log in `compression` as [`read_file`]
/// does (`path` names it in messages).
///
/// # Errors
/// [`StoreError::BadHeader`], [`StoreError::Corrupt`].
pub fn read_log_bytes(bytes: &[u8], compression: Compression, path: &Path) -> Result<ReadLog, StoreError> {
    Ok(read_bytes(bytes, compression, path)?.0)
}

/// Reads a harness log's bytes: the log as the harness would load it
/// (closers included), and what opening it for appending must repair.
fn read_bytes(bytes: &[u8], compression: Compression, path: &Path) -> Result<(ReadLog, Option<Repair>), StoreError> {
    read_viewed(bytes, compression, path, OpenTurn::Close).map(|(log, repair, _)| (log, repair))
}

/// What a read does with a last turn that has no `turn/end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenTurn {
    /// Closes it with the harness's closer events, as the harness loads a
    /// log (and as the next writer will): a read to replay or continue.
    Close,
    /// Keeps it open, as written: a read that follows the log while its
    /// writer may still be in the turn ([`SessionStore::read_since`]).
    Keep,
}

/// Where a whole read's view of the stored log ends.
#[derive(Debug, Clone, Copy)]
struct ViewEnd {
    /// The bytes of the file read: through the last complete frame (or
    /// line).
    offset: u64,
    /// The last line read (1 = the header).
    line: usize,
    /// The view is the stored events as they are: nothing torn was left
    /// out or recovered, no line ended the good part early, no open turn
    /// was closed (with [`OpenTurn::Keep`], none is).
    exact: bool,
}

/// [`read_bytes`], and where its view ends.
fn read_viewed(bytes: &[u8], compression: Compression, path: &Path, open: OpenTurn) -> Result<(ReadLog, Option<Repair>, ViewEnd), StoreError> {
    let shown = path.display().to_string();
    let corrupt = |detail: String| StoreError::Corrupt { path: shown.clone(), detail };
    let bad_header = |detail: String| StoreError::BadHeader { path: shown.clone(), detail };
    let mut problems = Vec::new();
    let (scanned, cut_at, recovered_from) = match compression {
        Compression::Zstd => {
            let frames = frames::split(bytes).map_err(|e| corrupt(format!("corrupt Zstandard log: {e}")))?;
            let Some(first) = frames.complete.first() else {
                return Err(bad_header("the log has no complete header frame".into()));
            };
            let mut decoder = frames::FrameDecoder::new();
            let mut plain = |range: &std::ops::Range<usize>| {
                decoder
                    .decompress(&bytes[range.clone()])
                    .map_err(|e| corrupt(format!("corrupt Zstandard log: the frame at byte {} fails its check: {e}", range.start)))
            };
            let header = plain(first)?;
            if header.is_empty() || header.iter().position(|&b| b == b'\n') != Some(header.len() - 1) {
                return Err(corrupt("corrupt Zstandard log: the first frame is not exactly one header line".into()));
            }
            let mut scanner = scan::Scanner::new(&header).map_err(bad_header)?;
            for range in &frames.complete[1..] {
                let text = plain(range)?;
                scanner.write(&text).map_err(|e| corrupt(format!("corrupt log: {e}")))?;
            }
            let (input, committed, complete_events) = scanner.checkpoint();
            if committed != input {
                return Err(corrupt("corrupt Zstandard log: a complete frame holds a line that cannot be read".into()));
            }
            match frames.torn_start {
                None => (scanner.finish(), None, complete_events),
                Some(start) => {
                    // A write cut short leaves only the last frame
                    // incomplete; a damaged size field in an earlier frame
                    // looks the same to the scan, but whole frames follow.
                    if let Some(at) = frames::complete_frame_after(bytes, start) {
                        return Err(corrupt(format!(
                            "corrupt Zstandard log: the frame at byte {start} claims more bytes than the file holds, yet a complete frame follows at byte {at}: this is damage, not a torn write, so nothing is cut"
                        )));
                    }
                    let text = frames::decompress_prefix(&bytes[start..]);
                    scanner.write(&text).map_err(|e| corrupt(format!("corrupt log: {e}")))?;
                    let scanned = scanner.finish();
                    let recovered = scanned.events.len() - complete_events;
                    problems.push(LineProblem::note(
                        scanned.lines.last().map_or(1, |l| l + 1),
                        format!(
                            "torn last frame at byte {start} of {} (the writer stopped mid-append): {} recovered from it, the rest cut",
                            bytes.len(),
                            if recovered == 1 { "1 event".to_string() } else { format!("{recovered} events") }
                        ),
                    ));
                    (scanned, Some(start as u64), complete_events)
                }
            }
        }
        Compression::None => {
            let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
                return Err(bad_header("the log is empty or its header line is incomplete".into()));
            };
            let mut scanner = scan::Scanner::new(&bytes[..=end]).map_err(bad_header)?;
            scanner.write(&bytes[end + 1..]).map_err(|e| corrupt(format!("corrupt log: {e}")))?;
            let scanned = scanner.finish();
            let events = scanned.events.len();
            let cut = (scanned.committed < bytes.len()).then_some(scanned.committed as u64);
            if let Some(at) = cut {
                let line = scanned.lines.last().map_or(2, |l| l + 1);
                let message = match &scanned.issue {
                    Some((line, why)) => format!("line {line}: {why}; it and the lines after it are not read (no committed turn/end follows)"),
                    None => format!("torn last line at byte {at} (the writer stopped mid-line); cut"),
                };
                problems.push(LineProblem::note(line, message));
            }
            (scanned, cut, events)
        }
    };
    let scan::Scanned { header, mut events, mut lines, issue, notes, line: last_line, committed, .. } = scanned;
    let offset = match (compression, cut_at) {
        (_, Some(at)) => at,
        (Compression::Zstd, None) => bytes.len() as u64,
        (Compression::None, None) => committed as u64,
    };
    let mut end = ViewEnd { offset, line: last_line, exact: cut_at.is_none() && issue.is_none() };
    problems.extend(notes.into_iter().map(|(line, note)| LineProblem::note(line, note)));
    if let (Some((line, why)), Compression::Zstd) = (&issue, compression) {
        problems.push(LineProblem::note(*line, format!("{why}; not read")));
    }
    let recovered: Vec<Event> = events[recovered_from..].to_vec();
    let closers = if open == OpenTurn::Close { scan::interrupted_closers(&events) } else { Vec::new() };
    if !closers.is_empty() {
        let line = lines.last().map_or(2, |l| l + 1);
        problems.push(LineProblem::note(
            line,
            format!(
                "the last turn was left open (the writer stopped); closed with {} as the harness does",
                closers.iter().map(|c| c.kind.as_str()).collect::<Vec<_>>().join(", ")
            ),
        ));
        lines.extend(std::iter::repeat_n(line, closers.len()));
    }
    end.exact &= closers.is_empty();
    let repair =
        (cut_at.is_some() || !closers.is_empty()).then(|| Repair { cut_at, append: recovered.into_iter().chain(closers.iter().cloned()).collect() });
    events.extend(closers);
    Ok((ReadLog { header, events, lines, problems, torn: None, unterminated: None }, repair, end))
}

/// The harness's view of a header: the fields it requires on disk added
/// (`delegationDepth` 0 for a top-level session).
fn harness_header(header: &Header) -> Header {
    let mut header = header.clone();
    header.extra.entry("delegationDepth").or_insert(Value::from(0));
    header
}

fn header_line(header: &Header, path: &Path) -> Result<Vec<u8>, StoreError> {
    let mut line =
        serde_json::to_vec(&harness_header(header)).map_err(|e| StoreError::BadHeader { path: path.display().to_string(), detail: e.to_string() })?;
    line.push(b'\n');
    Ok(line)
}

impl SessionStore for HarnessStore {
    fn location(&self) -> String {
        format!("harness store {} ({})", self.root.display(), self.compression.name())
    }

    fn check_id(&self, id: &str) -> Result<(), StoreError> {
        let rule = match layout::encode_segment(id) {
            Ok(segment) if segment.len() <= 255 => return Ok(()),
            Ok(segment) => format!(
                "escaped for a folder name it is {} bytes, more than a file name holds (255; each character other than a-z, A-Z, 0-9, `.`, `_`, `-` takes 5 or 10)",
                segment.len()
            ),
            Err(e) => e,
        };
        Err(StoreError::BadIdFor { id: id.escape_debug().to_string(), rule })
    }

    fn create(&self, header: &Header, durability: Durability) -> Result<Box<dyn LogWriter>, StoreError> {
        self.check_id(&header.id)?;
        if let Some(cwd) = header.cwd.as_deref().filter(|c| !Path::new(c).is_absolute()) {
            return Err(StoreError::BadHeader {
                path: self.root.display().to_string(),
                detail: format!("session `{}` has cwd `{cwd}`, but the harness requires an absolute path there", header.id),
            });
        }
        let path = layout::log_path(&self.root, header.cwd.as_deref(), &header.id, self.compression)
            .map_err(|e| StoreError::BadHeader { path: self.root.display().to_string(), detail: e })?;
        if path.exists() || self.find(&header.id).is_ok() {
            return Err(StoreError::Exists(header.id.clone()));
        }
        let other = path.with_file_name(layout::file_name(self.compression.other()));
        if other.exists() {
            return Err(self.mismatch(&other));
        }
        Ok(Box::new(HarnessWriter::new(self, header.clone(), path, None, durability)?))
    }

    fn open_for_append(&self, id: &str, durability: Durability) -> Result<(Box<dyn LogWriter>, ReadLog), StoreError> {
        self.check_id(id)?;
        let path = self.find(id)?;
        let file = OpenOptions::new().read(true).append(true).open(&path).map_err(io(&path))?;
        lock_exclusive(&file, &path, id)?;
        let (mut log, repair) = self.read_at(&path, Some(id))?;
        let mut writer = HarnessWriter::new(self, log.header.clone(), path.clone(), Some(file), durability)?;
        if let Some(repair) = repair {
            if let Some(at) = repair.cut_at {
                writer.cut(at)?;
            }
            if !repair.append.is_empty() {
                writer.pending = repair.append;
                writer.flush(true)?;
            }
            log.problems.push(LineProblem::note(1, "repaired on disk before appending, as the harness does".to_string()));
        }
        Ok((Box::new(writer), log))
    }

    fn read(&self, id: &str) -> Result<ReadLog, StoreError> {
        self.check_id(id)?;
        let path = self.find(id)?;
        Ok(self.read_at(&path, Some(id))?.0)
    }

    fn read_since(&self, id: &str, after: &Position) -> Result<(Since, Position), StoreError> {
        self.check_id(id)?;
        let path = self.find(id)?;
        self.read_path_since(&path, id, after)
    }

    fn write_whole(&self, header: &Header, events: &[Event]) -> Result<String, StoreError> {
        let mut writer = HarnessStore::create(self, header, Durability::Turn)?;
        for event in events {
            writer.append(event)?;
        }
        writer.end_turn()?;
        Ok(writer.path().display().to_string())
    }

    fn ids(&self) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        if !self.root.is_dir() {
            return Ok(ids);
        }
        for project in subdirs(&self.root)? {
            for dir in subdirs(&project)? {
                let other = dir.join(layout::file_name(self.compression.other()));
                if other.exists() {
                    return Err(self.mismatch(&other));
                }
                let file = dir.join(layout::file_name(self.compression));
                if let Some(header) = read_header(&file, self.compression) {
                    ids.push(header.id);
                } else if file.is_file() {
                    // A log whose header cannot be read is still a session
                    // (the folder names it): listed, so that reading it
                    // reports the damage instead of the session vanishing.
                    if let Some(id) = dir.file_name().and_then(|n| n.to_str()).and_then(layout::decode_segment) {
                        ids.push(id);
                    }
                }
            }
        }
        ids.sort();
        let before = ids.len();
        ids.dedup();
        if ids.len() != before {
            return Err(StoreError::Corrupt {
                path: self.root.display().to_string(),
                detail: "a session id is stored in more than one project folder".into(),
            });
        }
        Ok(ids)
    }

    fn contains(&self, path: &Path) -> bool {
        self.root.canonicalize().is_ok_and(|root| path.starts_with(root))
    }

    fn log_file(&self, id: &str) -> Option<PathBuf> {
        self.find(id).ok()
    }
}

/// The header of the log at `file`, reading only its first frame or line;
/// `None` when there is no such file or no valid header.
fn read_header(file: &Path, compression: Compression) -> Option<Header> {
    use std::io::Read;
    // The header is at the start: read a prefix, and the whole file only
    // when the header does not end within it.
    const PREFIX: u64 = 64 * 1024;
    let first = |bytes: &[u8]| -> Option<Vec<u8>> {
        match compression {
            Compression::Zstd => {
                let frames = frames::split(bytes).ok()?;
                frames::decompress(&bytes[frames.complete.first()?.clone()]).ok()
            }
            Compression::None => Some(bytes[..=bytes.iter().position(|&b| b == b'\n')?].to_vec()),
        }
    };
    let mut prefix = Vec::new();
    File::open(file).ok()?.take(PREFIX).read_to_end(&mut prefix).ok()?;
    let header = match first(&prefix) {
        Some(h) => h,
        None if prefix.len() as u64 == PREFIX => first(&fs::read(file).ok()?)?,
        None => return None,
    };
    scan::parse_header(&header).ok()
}

/// The appending end of one harness log.
#[derive(Debug)]
pub struct HarnessWriter {
    header: Header,
    path: PathBuf,
    /// The log file, once it exists (locked).
    file: Option<File>,
    compression: Compression,
    pack_chunks: bool,
    durability: Durability,
    encoder: Option<FrameEncoder>,
    /// Events of the batch not yet written.
    pending: Vec<Event>,
}

impl HarnessWriter {
    fn new(store: &HarnessStore, header: Header, path: PathBuf, file: Option<File>, durability: Durability) -> Result<HarnessWriter, StoreError> {
        let encoder = match store.compression {
            Compression::Zstd => {
                Some(FrameEncoder::new().map_err(|e| StoreError::Io { path: path.display().to_string(), source: std::io::Error::other(e) })?)
            }
            Compression::None => None,
        };
        Ok(HarnessWriter {
            header,
            path,
            file,
            compression: store.compression,
            pack_chunks: store.pack_chunks,
            durability,
            encoder,
            pending: Vec::new(),
        })
    }

    fn err(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
        StoreError::Io { path: self.path.display().to_string(), source: std::io::Error::other(e) }
    }

    /// The bytes of `text` as stored: one frame, or the text itself.
    fn encode(&mut self, text: &[u8]) -> Result<Vec<u8>, StoreError> {
        match self.encoder.as_mut() {
            Some(encoder) => {
                encoder.frame(text).map_err(|e| StoreError::Io { path: self.path.display().to_string(), source: std::io::Error::other(e) })
            }
            None => Ok(text.to_vec()),
        }
    }

    fn cut(&mut self, at: u64) -> Result<(), StoreError> {
        let Some(file) = &self.file else { return Ok(()) };
        file.set_len(at).map_err(io(&self.path))?;
        file.sync_all().map_err(io(&self.path))
    }

    /// Writes the pending batch as one frame (or its lines); syncs when
    /// `sync`.
    fn flush(&mut self, sync: bool) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        let lines = crate::packed::storage_lines(&batch, self.pack_chunks);
        let body = self.encode(lines.as_bytes())?;
        let result = match self.file.is_some() {
            true => self.append_bytes(&body, sync),
            false => self.materialize(&body),
        };
        if result.is_err() {
            // Not written: keep the batch so that nothing acknowledged later
            // is written without it.
            self.pending = batch;
        }
        result
    }

    fn append_bytes(&mut self, body: &[u8], sync: bool) -> Result<(), StoreError> {
        let Some(file) = self.file.as_mut() else { return Err(self.err("the log is not open")) };
        let before = file.metadata().map_err(io(&self.path))?.len();
        let written = file.write_all(body).and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            // Roll back to the last whole batch.
            let _ = file.set_len(before);
            return Err(StoreError::Io { path: self.path.display().to_string(), source: e });
        }
        Ok(())
    }

    /// Publishes the log: header and first batch to a temporary file,
    /// synced, hard-linked to its name (refusing an existing log), the
    /// folder synced; then keeps the file open, locked.
    fn materialize(&mut self, body: &[u8]) -> Result<(), StoreError> {
        let Some(dir) = self.path.parent().map(Path::to_path_buf) else { return Err(self.err("the log has no folder")) };
        let mut folders: Vec<&Path> = dir.ancestors().take(3).collect();
        folders.reverse();
        for folder in &folders {
            create_private_dir(folder)?;
            if let Some(parent) = folder.parent() {
                sync_dir(parent);
            }
        }
        let header = header_line(&self.header, &self.path)?;
        let mut content = self.encode(&header)?;
        content.extend_from_slice(body);
        let tmp = dir.join(format!(".{}.{}.tmp", layout::file_name(self.compression), uuid::Uuid::new_v4().simple()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        set_private_mode(&mut options);
        let written = options.open(&tmp).and_then(|mut f| {
            f.write_all(&content)?;
            f.sync_all()
        });
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(StoreError::Io { path: tmp.display().to_string(), source: e });
        }
        let linked = fs::hard_link(&tmp, &self.path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(StoreError::Exists(self.header.id.clone())),
            Err(e) => return Err(StoreError::Io { path: self.path.display().to_string(), source: e }),
        }
        sync_dir(&dir);
        let file = OpenOptions::new().read(true).append(true).open(&self.path).map_err(io(&self.path))?;
        lock_exclusive(&file, &self.path, &self.header.id)?;
        self.file = Some(file);
        Ok(())
    }
}

impl LogWriter for HarnessWriter {
    fn append(&mut self, event: &Event) -> Result<(), StoreError> {
        self.pending.push(event.clone());
        self.flush(self.durability == Durability::Event)
    }

    fn end_turn(&mut self) -> Result<(), StoreError> {
        self.flush(self.durability != Durability::None)?;
        match (&self.file, self.durability) {
            (Some(file), Durability::Turn) => file.sync_data().map_err(io(&self.path)),
            _ => Ok(()),
        }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for HarnessWriter {
    fn drop(&mut self) {
        if let Err(e) = self.flush(self.durability != Durability::None) {
            tracing::warn!("{e}");
        }
    }
}
