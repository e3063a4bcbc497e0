//! Durable session files: one JSONL file per session under
//! `<state dir>/sessions/`.
//!
//! - Each event is written with one `write` of its whole line to a file
//!   opened in append mode, then synced according to [`Durability`].
//! - A file is locked (`flock`, exclusive) by the one process appending to
//!   it; a second process is refused with a clear message.
//! - A torn last line (a crash mid-write) is reported and cut before the next
//!   append: nothing acknowledged is lost, since an acknowledged event is a
//!   complete line.
//! - Reading keeps every good line and reports each bad one with its line
//!   number; the file is never rewritten, only a torn tail is cut.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::json::RawJson;

use super::backend::{LogWriter, SessionStore};
use super::event::{raw_null, Envelope, Event, Header, SurfaceOp};

/// When appended events are forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Durability {
    /// `fdatasync` after every event (the default): an acknowledged event
    /// survives a power loss.
    #[default]
    Event,
    /// `fdatasync` at the end of each turn: a crash of the process loses
    /// nothing (the kernel has the data), a power loss may lose the current
    /// turn.
    Turn,
    /// Never sync; the kernel writes back when it likes.
    None,
}

/// Errors of the session store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A session id that could escape the sessions folder or is malformed.
    #[error("invalid session id `{0}`: use 1-128 letters, digits, `-`, `_` or `.`, not starting with `.`")]
    BadId(String),
    /// A session id a store cannot hold, with that store's rule.
    #[error("invalid session id `{id}`: {rule}")]
    BadIdFor {
        /// The id (escaped for printing).
        id: String,
        /// The store's rule it breaks.
        rule: String,
    },
    /// No such session.
    #[error("no session `{id}` in {dir}")]
    NotFound {
        /// The id.
        id: String,
        /// The sessions folder.
        dir: String,
    },
    /// The session exists already.
    #[error("session `{0}` already exists")]
    Exists(String),
    /// Another process holds the session.
    #[error("session `{id}` is open in another process (its file {path} is locked); close that process first")]
    Locked {
        /// The id.
        id: String,
        /// The file.
        path: String,
    },
    /// The file's header is unusable.
    #[error("{path}:1: not a session file: {detail}")]
    BadHeader {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// The state directory is a file.
    #[error("{0} is not a directory (give --state-dir a folder)")]
    NotADirectory(String),
    /// A harness log that cannot be read as a whole: a complete frame that
    /// fails its checksum, a defect before a committed `turn/end`, a header
    /// that does not match its place in the store.
    #[error("{path}: {detail}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong, with the byte offset or line where known.
        detail: String,
    },
    /// Another process (on this machine or another) is writing the session.
    #[error("session `{id}` is being written by {holder}; only one writer at a time: stop that one first")]
    Held {
        /// The id.
        id: String,
        /// Who holds it (application name, host, process), as the store knows.
        holder: String,
    },
    /// The database refused or failed an operation.
    #[error("{store}: {detail}")]
    Database {
        /// The store (server and schema, never a password).
        store: String,
        /// What went wrong.
        detail: String,
    },
    /// The composition chose a store that cannot be used (its entry's
    /// config was refused); nothing is stored anywhere else instead.
    #[error("the session store is unusable: {0}")]
    Unusable(String),
    /// An I/O failure.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.display().to_string(), source }
}

/// What a reported line problem means for the line's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// The line was not read: its records are not in the session (an
    /// import does not copy them, replay does not see them).
    Skipped,
    /// A record breaks a rule of the log's structure (see
    /// [`super::structure`]) or of its history (a tool result without its
    /// call, a replacement that cannot apply, a gap in `seq`). The record
    /// stays in the log; the derived history is kept well-formed around it.
    /// `--strict` refuses to continue or import such a log.
    Broken,
    /// The line was read as written; something about it is worth knowing
    /// (CRLF endings, two records on one line, a newline added).
    Note,
}

/// A problem with one line of a session file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineProblem {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
    /// What it means for the line's records.
    pub kind: ProblemKind,
}

impl LineProblem {
    /// A line that was not read.
    pub fn skipped(line: usize, message: impl Into<String>) -> LineProblem {
        LineProblem { line, message: message.into(), kind: ProblemKind::Skipped }
    }

    /// A record that breaks a structure or history rule (kept in the log).
    pub fn broken(line: usize, message: impl Into<String>) -> LineProblem {
        LineProblem { line, message: message.into(), kind: ProblemKind::Broken }
    }

    /// A line read as written, with a note.
    pub fn note(line: usize, message: impl Into<String>) -> LineProblem {
        LineProblem { line, message: message.into(), kind: ProblemKind::Note }
    }
}

impl std::fmt::Display for LineProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The number of distinct lines among `problems` that were skipped (not
/// read): what an import reports as "lines skipped".
pub fn skipped_lines(problems: &[LineProblem]) -> usize {
    let mut lines: Vec<usize> = problems.iter().filter(|p| p.kind == ProblemKind::Skipped).map(|p| p.line).collect();
    lines.sort_unstable();
    lines.dedup();
    lines.len()
}

/// A session file as read.
#[derive(Debug)]
pub struct ReadLog {
    /// The header (line 1).
    pub header: Header,
    /// Every good event, in file order.
    pub events: Vec<Event>,
    /// 1-based line of each event in `events`.
    pub lines: Vec<usize>,
    /// Every bad line.
    pub problems: Vec<LineProblem>,
    /// A last line cut mid-record: `(line, byte offset where it starts)`.
    pub torn: Option<(usize, u64)>,
    /// The line number of a complete last record that lacks its newline.
    pub unterminated: Option<usize>,
}

/// Checks a session id: 1-128 characters of `[A-Za-z0-9._-]`, not starting
/// with `.` (so no `..`, no `/`, no NUL, no absolute path).
///
/// # Errors
/// [`StoreError::BadId`].
pub fn check_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadId(id.escape_debug().to_string()))
    }
}

/// Our own store: one JSONL file per session in one folder,
/// `<state dir>/sessions/<id>.jsonl`.
#[derive(Debug, Clone)]
pub struct FlatStore {
    dir: PathBuf,
}

impl FlatStore {
    /// Opens (creating, mode `0700`) `<state_dir>/sessions`.
    ///
    /// # Errors
    /// [`StoreError::Io`] when the folder cannot be created.
    pub fn open(state_dir: &Path) -> Result<FlatStore, StoreError> {
        let dir = state_dir.join("sessions");
        create_private_dir(state_dir)?;
        create_private_dir(&dir)?;
        Ok(FlatStore { dir })
    }

    /// The sessions folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `id`.
    ///
    /// # Errors
    /// [`StoreError::BadId`].
    pub fn path_of(&self, id: &str) -> Result<PathBuf, StoreError> {
        check_id(id)?;
        Ok(self.dir.join(format!("{id}.jsonl")))
    }

    /// Creates the file of a new session (mode `0600`), locks it and writes
    /// its header.
    ///
    /// # Errors
    /// [`StoreError::Exists`], [`StoreError::Io`].
    pub fn create(&self, header: &Header, durability: Durability) -> Result<FlatWriter, StoreError> {
        let (path, file) = self.create_file(&header.id)?;
        let mut writer = FlatWriter::locked(file, &path, &header.id, durability)?;
        let mut line = serde_json::to_string(header).map_err(|e| StoreError::BadHeader {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        line.push('\n');
        writer.write_line(line.as_bytes())?;
        writer.sync()?;
        sync_dir(&self.dir);
        Ok(writer)
    }

    /// Creates the file of a new session `id`: mode `0600`, opened for
    /// appending, refusing an id that exists.
    fn create_file(&self, id: &str) -> Result<(PathBuf, File), StoreError> {
        let path = self.path_of(id)?;
        let mut options = OpenOptions::new();
        options.append(true).create_new(true).read(true);
        set_private_mode(&mut options);
        let file = options.open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                StoreError::Exists(id.to_string())
            } else {
                StoreError::Io { path: path.display().to_string(), source: e }
            }
        })?;
        Ok((path, file))
    }

    /// Writes a whole session at once (an import): creates the file (mode
    /// `0600`, refusing an existing id), writes the header and every event,
    /// and syncs it before returning.
    ///
    /// # Errors
    /// [`StoreError::Exists`], [`StoreError::Io`].
    pub fn write_whole(&self, header: &Header, events: &[Event]) -> Result<PathBuf, StoreError> {
        let (path, file) = self.create_file(&header.id)?;
        let bad_header = |e: serde_json::Error| StoreError::BadHeader { path: path.display().to_string(), detail: e.to_string() };
        let mut out = std::io::BufWriter::new(&file);
        serde_json::to_writer(&mut out, header).map_err(bad_header)?;
        out.write_all(b"\n").map_err(io(&path))?;
        for event in events {
            out.write_all(event.to_line().as_bytes()).map_err(io(&path))?;
        }
        out.flush().map_err(io(&path))?;
        drop(out);
        file.sync_all().map_err(io(&path))?;
        sync_dir(&self.dir);
        Ok(path)
    }

    /// Opens session `id` for appending: locks the file, reads it, and cuts a
    /// torn last line (reported in the returned log's `problems`).
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Locked`], [`StoreError::BadHeader`], [`StoreError::Io`].
    pub fn open_for_append(&self, id: &str, durability: Durability) -> Result<(FlatWriter, ReadLog), StoreError> {
        let path = self.path_of(id)?;
        let file = OpenOptions::new().read(true).append(true).open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                StoreError::NotFound { id: id.to_string(), dir: self.dir.display().to_string() }
            } else {
                StoreError::Io { path: path.display().to_string(), source: e }
            }
        })?;
        let mut writer = FlatWriter::locked(file, &path, id, durability)?;
        let mut log = read_file(&path)?;
        if let Some(line) = log.unterminated.take() {
            writer.write_line(b"\n")?;
            writer.sync()?;
            log.problems.push(LineProblem::note(line, "the last line had no newline; one was added (nothing was lost)"));
        }
        if let Some((line, offset)) = log.torn {
            writer.file.set_len(offset).map_err(io(&path))?;
            writer.file.sync_all().map_err(io(&path))?;
            // A torn line was never acknowledged: cutting it is the normal
            // recovery after a crash, so it is a note, not a loss.
            log.problems.push(LineProblem::note(line, "torn last line (the writer stopped mid-line); cut before the next append"));
            log.torn = None;
        }
        Ok((writer, log))
    }

    /// Every session file's id, sorted.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn ids(&self) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io(&self.dir))? {
            let entry = entry.map_err(io(&self.dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = name.strip_suffix(".jsonl") {
                if check_id(id).is_ok() {
                    ids.push(id.to_string());
                }
            }
        }
        ids.sort();
        Ok(ids)
    }
}

/// Creates `dir` and any missing parents with mode `0700` (every folder the
/// host creates is private to its user: the state directory, `sessions/`,
/// `hmr/`). A folder that exists already is left as it is.
///
/// # Errors
/// [`StoreError::NotADirectory`] when `dir` is a file, [`StoreError::Io`].
pub fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.exists() && !dir.is_dir() {
        return Err(StoreError::NotADirectory(dir.display().to_string()));
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(io(dir))
}

pub(crate) fn set_private_mode(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
}

pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// How long a busy session lock is retried before the session counts as
/// open in another process.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(300);

/// Takes the exclusive lock (`flock`) of the file of session `id`.
///
/// A lock can be held for an instant by a process that is being started
/// from this one (between fork and exec it shares our open files), so a busy
/// lock is tried again for a short while before the session counts as open
/// elsewhere.
///
/// # Errors
/// [`StoreError::Locked`], [`StoreError::Io`].
pub(crate) fn lock_exclusive(file: &File, path: &Path, id: &str) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + LOCK_PATIENCE;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(StoreError::Locked { id: id.to_string(), path: path.display().to_string() })
            }
            Err(fs::TryLockError::Error(e)) => return Err(StoreError::Io { path: path.display().to_string(), source: e }),
        }
    }
}

/// The appending end of one session file; holds the file's lock.
#[derive(Debug)]
pub struct FlatWriter {
    file: File,
    path: PathBuf,
    durability: Durability,
    unsynced: bool,
}

impl FlatWriter {
    fn locked(file: File, path: &Path, id: &str, durability: Durability) -> Result<FlatWriter, StoreError> {
        lock_exclusive(&file, path, id)?;
        Ok(FlatWriter { file, path: path.to_path_buf(), durability, unsynced: false })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one whole line with a single write, then syncs per the
    /// durability setting.
    ///
    /// # Errors
    /// [`StoreError::Io`]; the event must then be treated as not written.
    pub fn append(&mut self, line: &[u8]) -> Result<(), StoreError> {
        self.write_line(line)?;
        match self.durability {
            Durability::Event => self.sync(),
            Durability::Turn | Durability::None => {
                self.unsynced = true;
                Ok(())
            }
        }
    }

    fn write_line(&mut self, line: &[u8]) -> Result<(), StoreError> {
        // `write_all` on a file opened with O_APPEND: one write(2) for any
        // line a regular file accepts whole, which is every line we write.
        self.file.write_all(line).map_err(io(&self.path))
    }

    /// Marks the end of a turn: syncs under [`Durability::Turn`].
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn end_turn(&mut self) -> Result<(), StoreError> {
        if self.durability == Durability::Turn && self.unsynced {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(io(&self.path))?;
        self.unsynced = false;
        Ok(())
    }
}

/// Reads a session file without locking it: every good line, each bad line
/// reported with its number, and a torn last line noted (not cut).
///
/// # Errors
/// [`StoreError::Io`] or [`StoreError::BadHeader`] when line 1 is not a
/// session header.
pub fn read_file(path: &Path) -> Result<ReadLog, StoreError> {
    let bytes = fs::read(path).map_err(io(path))?;
    parse_log(&bytes, path)
}

/// Parses the bytes of a session file (see [`read_file`]).
///
/// # Errors
/// [`StoreError::BadHeader`].
pub fn parse_log(bytes: &[u8], path: &Path) -> Result<ReadLog, StoreError> {
    let shown = path.display().to_string();
    let mut problems = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut lines = Vec::new();
    let mut torn = None;
    let mut unterminated = None;
    let mut header: Option<Header> = None;
    let mut offset = 0usize;
    let mut line_no = 0usize;
    let mut next_seq = 0u64;
    let mut crlf_lines = 0usize;
    let mut crlf_first: Option<usize> = None;
    while offset < bytes.len() {
        line_no += 1;
        let (raw, complete) = match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(n) => (&bytes[offset..offset + n], true),
            None => (&bytes[offset..], false),
        };
        let start = offset;
        offset += raw.len() + usize::from(complete);
        if !complete {
            // A whole record without its newline is kept; anything else at
            // the end is a record cut mid-write.
            let whole = std::str::from_utf8(raw).is_ok_and(|t| {
                if header.is_none() {
                    serde_json::from_str::<Header>(t).is_ok()
                } else {
                    serde_json::from_str::<Envelope>(t).is_ok()
                }
            });
            if !whole {
                torn = Some((line_no, start as u64));
                break;
            }
            unterminated = Some(line_no);
        }
        let raw = match raw.strip_suffix(b"\r") {
            Some(stripped) if complete => {
                crlf_lines += 1;
                crlf_first.get_or_insert(line_no);
                stripped
            }
            Some(stripped) => stripped,
            None => raw,
        };
        if header.is_none() {
            let parsed = std::str::from_utf8(raw)
                .map_err(|e| e.to_string())
                .and_then(|text| serde_json::from_str::<Header>(text).map_err(|e| e.to_string()))
                .and_then(|h| match (h.kind.as_str(), h.version) {
                    ("session", 0) => Ok(h),
                    ("session", v) => Err(format!("format version {v} is not supported (this host reads version 0)")),
                    (other, _) => Err(format!("type is `{other}`, expected `session`")),
                });
            match parsed {
                Ok(h) => {
                    header = Some(h);
                    continue;
                }
                Err(detail) => return Err(StoreError::BadHeader { path: shown, detail }),
            }
        }
        if raw.iter().all(|b| b.is_ascii_whitespace()) {
            if !raw.is_empty() {
                problems.push(LineProblem::skipped(line_no, "blank line"));
            }
            continue;
        }
        if raw.contains(&0) {
            problems.push(LineProblem::skipped(line_no, "the line contains NUL bytes"));
            continue;
        }
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                problems.push(LineProblem::skipped(line_no, format!("not UTF-8 text: {e}")));
                continue;
            }
        };
        let records = match serde_json::from_str::<Envelope>(text) {
            Ok(env) => vec![env],
            Err(e) => match split_glued(text) {
                Some(records) => {
                    problems.push(LineProblem::note(
                        line_no,
                        format!("{} records on one line (a missing newline); each is read and kept", records.len()),
                    ));
                    records
                }
                None => {
                    problems.push(LineProblem::skipped(line_no, describe_bad_event(text, &e)));
                    continue;
                }
            },
        };
        for env in records {
            if super::packed::is_packed(&env.kind) {
                let data = env.data.as_ref().map_or("null", |d| d.get());
                match super::packed::expand(&env.kind, data, env.seq0, env.time0, next_seq) {
                    Ok(expanded) => {
                        if let Some(last) = expanded.last() {
                            next_seq = last.seq + 1;
                        }
                        lines.extend(std::iter::repeat_n(line_no, expanded.len()));
                        events.extend(expanded);
                    }
                    Err(message) => problems.push(LineProblem::skipped(line_no, message)),
                }
                continue;
            }
            let seq = env.seq.unwrap_or(next_seq);
            if let Some(message) = seq_problem(seq, next_seq, events.is_empty()) {
                problems.push(LineProblem::broken(line_no, message));
            }
            next_seq = seq.saturating_add(1);
            events.push(Event {
                seq,
                time: env.time.unwrap_or(0),
                kind: env.kind,
                data: env.data.map_or_else(raw_null, RawJson::from),
                surface_op: env.surface_op.map(SurfaceOp::from_raw),
                source_event_seqs: env.source_event_seqs,
            });
            lines.push(line_no);
        }
    }
    if let Some(first) = crlf_first {
        problems.push(LineProblem::note(
            first,
            format!(
                "{} ended by CRLF (first here); read as LF line ends, every record as written; appends end lines with LF",
                if crlf_lines == 1 { "1 line is".to_string() } else { format!("{crlf_lines} lines are") }
            ),
        ));
    }
    let header = match header {
        Some(h) => h,
        None if torn.is_some() => {
            return Err(StoreError::BadHeader { path: shown, detail: "the header line is incomplete".into() })
        }
        None => return Err(StoreError::BadHeader { path: shown, detail: "the file is empty".into() }),
    };
    Ok(ReadLog { header, events, lines, problems, torn, unterminated })
}

/// What is wrong with an event's `seq` when `expected` was due (`None`:
/// nothing). The first event may start anywhere.
fn seq_problem(seq: u64, expected: u64, first: bool) -> Option<String> {
    if first || seq == expected {
        return None;
    }
    let previous = expected.wrapping_sub(1);
    Some(if seq > expected {
        let last_missing = seq - 1;
        if last_missing == expected {
            format!("seq {seq} follows {previous}: a gap, seq {expected} is missing (the events after it are kept)")
        } else {
            format!("seq {seq} follows {previous}: a gap from {expected} to {last_missing} (the events after it are kept)")
        }
    } else {
        format!("seq {seq} follows {previous}: a duplicate or out-of-order seq (kept)")
    })
}

/// A line holding several whole records glued together (a newline lost
/// between them): each record, when every part of the line is one.
fn split_glued(text: &str) -> Option<Vec<Envelope>> {
    let mut records = Vec::new();
    for record in serde_json::Deserializer::from_str(text).into_iter::<Envelope>() {
        records.push(record.ok()?);
    }
    (records.len() >= 2).then_some(records)
}

fn describe_bad_event(text: &str, e: &serde_json::Error) -> String {
    let message = e.to_string();
    if message.contains("unknown field") {
        // serde's message already lists the expected keys.
        return format!("not a valid event: {message}");
    }
    if message.contains("trailing characters") && text.contains("}{") {
        return format!("two records glued on one line ({message})");
    }
    format!("not a valid event: {message}")
}

/// A parsed data text, or the error that says why it is not JSON.
///
/// # Errors
/// The JSON parser's message.
pub fn parse_data(text: &str) -> Result<RawJson, String> {
    RawJson::parse(text).map_err(|e| format!("event data is not JSON: {e}"))
}

/// The store of a host whose composition chose a store it cannot use: every
/// operation is refused with the reason, so that no session goes to a place
/// the operator did not choose.
#[derive(Debug, Clone)]
pub struct UnusableStore {
    /// Why, naming the file, line and entry.
    pub reason: String,
}

impl SessionStore for UnusableStore {
    fn location(&self) -> String {
        format!("no usable store ({})", self.reason)
    }

    fn check_id(&self, _: &str) -> Result<(), StoreError> {
        Err(StoreError::Unusable(self.reason.clone()))
    }

    fn create(&self, _: &Header, _: Durability) -> Result<Box<dyn LogWriter>, StoreError> {
        Err(StoreError::Unusable(self.reason.clone()))
    }

    fn open_for_append(&self, _: &str, _: Durability) -> Result<(Box<dyn LogWriter>, ReadLog), StoreError> {
        Err(StoreError::Unusable(self.reason.clone()))
    }

    fn read(&self, _: &str) -> Result<ReadLog, StoreError> {
        Err(StoreError::Unusable(self.reason.clone()))
    }

    fn write_whole(&self, _: &Header, _: &[Event]) -> Result<String, StoreError> {
        Err(StoreError::Unusable(self.reason.clone()))
    }

    fn ids(&self) -> Result<Vec<String>, StoreError> {
        Err(StoreError::Unusable(self.reason.clone()))
    }

    fn contains(&self, _: &Path) -> bool {
        false
    }
}

impl SessionStore for FlatStore {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn check_id(&self, id: &str) -> Result<(), StoreError> {
        check_id(id)
    }

    fn create(&self, header: &Header, durability: Durability) -> Result<Box<dyn LogWriter>, StoreError> {
        Ok(Box::new(FlatStore::create(self, header, durability)?))
    }

    fn open_for_append(&self, id: &str, durability: Durability) -> Result<(Box<dyn LogWriter>, ReadLog), StoreError> {
        let (writer, log) = FlatStore::open_for_append(self, id, durability)?;
        Ok((Box::new(writer), log))
    }

    fn read(&self, id: &str) -> Result<ReadLog, StoreError> {
        let path = self.path_of(id)?;
        if !path.exists() {
            return Err(StoreError::NotFound { id: id.to_string(), dir: self.dir.display().to_string() });
        }
        read_file(&path)
    }

    fn write_whole(&self, header: &Header, events: &[Event]) -> Result<String, StoreError> {
        FlatStore::write_whole(self, header, events).map(|p| p.display().to_string())
    }

    fn ids(&self) -> Result<Vec<String>, StoreError> {
        FlatStore::ids(self)
    }

    fn contains(&self, path: &Path) -> bool {
        self.dir.canonicalize().is_ok_and(|dir| path.starts_with(dir))
    }

    fn log_file(&self, id: &str) -> Option<PathBuf> {
        self.path_of(id).ok().filter(|p| p.is_file())
    }
}

impl LogWriter for FlatWriter {
    fn append(&mut self, event: &Event) -> Result<(), StoreError> {
        FlatWriter::append(self, event.to_line().as_bytes())
    }

    fn end_turn(&mut self) -> Result<(), StoreError> {
        FlatWriter::end_turn(self)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_good_lines_and_reports_bad_ones() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\n",
            "{\"seq\":0,\"time\":1,\"type\":\"a\",\"data\":{}}\n",
            "{\"seq\":1,\"time\":1,\"type\":\"b\",\"data\":{}}{\"seq\":2,\"type\":\"c\",\"data\":{}}\n",
            "\0\0\0\n",
            "{\"seq\":1,\"time\":1,\"type\":\"b\",\"data\":{\"x\":\"\\r\u{2028}\u{85}\"},\"bogus\":1}\n",
            "{\"seq\":1,\"time\":2,\"type\":\"b\",\"data\":{\"x\":1}}\r\n",
            "{\"seq\":2,\"ti",
        );
        let log = parse_log(text.as_bytes(), Path::new("s.jsonl")).unwrap();
        // Line 3 holds two whole records: both are read.
        assert_eq!(log.events.len(), 4);
        assert_eq!(log.lines, vec![2, 3, 3, 6]);
        assert_eq!(log.events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), ["a", "b", "c", "b"]);
        let shown: Vec<(usize, ProblemKind)> = log.problems.iter().map(|p| (p.line, p.kind)).collect();
        assert_eq!(
            shown,
            [
                (3, ProblemKind::Note),
                (4, ProblemKind::Skipped),
                (5, ProblemKind::Skipped),
                (6, ProblemKind::Broken),
                (6, ProblemKind::Note)
            ]
        );
        assert_eq!(log.problems[0].message, "2 records on one line (a missing newline); each is read and kept");
        assert!(log.problems[2].message.contains("unknown field"));
        assert_eq!(log.problems[3].message, "seq 1 follows 2: a duplicate or out-of-order seq (kept)");
        assert!(log.problems[4].message.starts_with("1 line is ended by CRLF"), "{}", log.problems[4].message);
        assert_eq!(skipped_lines(&log.problems), 2);
        assert_eq!(log.torn, Some((7, (text.len() - "{\"seq\":2,\"ti".len()) as u64)));
        assert!(log.unterminated.is_none());
    }

    #[test]
    fn a_whole_last_record_without_newline_is_kept_and_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let store = FlatStore::open(dir.path()).unwrap();
        let mut w = store.create(&Header::new("nl", None), Durability::Event).unwrap();
        w.append(b"{\"seq\":0,\"time\":1,\"type\":\"a\",\"data\":{}}").unwrap();
        drop(w);
        let (mut w, log) = store.open_for_append("nl", Durability::Event).unwrap();
        assert_eq!(log.events.len(), 1);
        assert!(log.problems[0].message.contains("no newline"), "{:?}", log.problems);
        w.append(b"{\"seq\":1,\"time\":1,\"type\":\"b\",\"data\":{}}\n").unwrap();
        drop(w);
        let log = read_file(&store.path_of("nl").unwrap()).unwrap();
        assert_eq!(log.events.len(), 2);
        assert!(log.problems.is_empty(), "{:?}", log.problems);
    }

    #[test]
    fn out_of_order_seqs_are_reported_and_kept() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n",
            "{\"seq\":0,\"type\":\"a\",\"data\":{}}\n",
            "{\"seq\":7,\"type\":\"a\",\"data\":{}}\n",
        );
        let log = parse_log(text.as_bytes(), Path::new("s.jsonl")).unwrap();
        assert_eq!(log.events.len(), 2);
        assert_eq!(log.problems[0].line, 3);
        assert_eq!(log.problems[0].message, "seq 7 follows 0: a gap from 1 to 6 (the events after it are kept)");
        let one = "{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n{\"seq\":0,\"type\":\"a\",\"data\":{}}\n{\"seq\":2,\"type\":\"a\",\"data\":{}}\n";
        let log = parse_log(one.as_bytes(), Path::new("s.jsonl")).unwrap();
        assert_eq!(log.problems[0].message, "seq 2 follows 0: a gap, seq 1 is missing (the events after it are kept)");
        let v7 = "{\"type\":\"session\",\"version\":7,\"id\":\"s\"}\n";
        assert!(parse_log(v7.as_bytes(), Path::new("s.jsonl")).unwrap_err().to_string().contains("version 7"));
    }

    #[test]
    fn ids_cannot_escape() {
        for bad in ["", "../x", "/abs", "a/b", ".hidden", "a\0b", &"x".repeat(129)] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
        check_id("s-2026.11_30").unwrap();
    }

    #[test]
    fn second_writer_is_refused_and_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let store = FlatStore::open(dir.path()).unwrap();
        let header = Header::new("abc", None);
        let mut w = store.create(&header, Durability::Event).unwrap();
        w.append(b"{\"seq\":0,\"time\":1,\"type\":\"a\",\"data\":{}}\n").unwrap();
        assert!(matches!(store.open_for_append("abc", Durability::Event), Err(StoreError::Locked { .. })));
        w.append(b"{\"seq\":1,\"ti").unwrap();
        drop(w);
        let (_, log) = store.open_for_append("abc", Durability::Event).unwrap();
        assert_eq!(log.events.len(), 1);
        assert_eq!(log.problems.len(), 1);
        assert!(log.problems[0].message.contains("torn"));
        let after = fs::read_to_string(store.path_of("abc").unwrap()).unwrap();
        assert!(after.ends_with("\"data\":{}}\n"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(store.path_of("abc").unwrap()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
