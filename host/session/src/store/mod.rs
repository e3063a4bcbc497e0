//! The store seam: what the `sessions` service needs from a place that keeps
//! session logs durably.
//!
//! Three stores implement it, one file each: [`flat::FlatStore`] (our own
//! `<state dir>/sessions/<id>.jsonl` files, the default),
//! `harness::HarnessStore` (the TypeScript harness's
//! `<root>/--<cwd>--/<id>/session.jsonl[.zstd]` layout, feature `harness`)
//! and `postgres::PostgresStore` (feature `postgres`). A store hands out
//! one [`LogWriter`] per open session; the writer is the only thing that
//! appends to that session while it lives (a second process is refused).
//! Readers read a log whole ([`SessionStore::read`]) or, following it, only
//! what was appended since an earlier read ([`SessionStore::read_since`]).

use std::fmt::Debug;
use std::path::Path;

use crate::event::{Event, Header};

pub mod flat;
pub mod fs;
#[cfg(feature = "harness")]
pub mod harness;
pub mod jsonl;
#[cfg(feature = "postgres")]
pub mod postgres;

pub use flat::{read_file, FlatStore, FlatWriter};

pub use jsonl::{parse_data, parse_log};

/// A place where session logs are kept.
///
/// Every method reports failures as [`StoreError`], naming the file or
/// location concerned.
pub trait SessionStore: Send + Sync + Debug {
    /// Where the store is, for messages (`/home/me/.cordis/sessions`,
    /// `harness store /srv/sessions (zstd)`).
    fn location(&self) -> String;

    /// Checks that `id` can name a session in this store.
    ///
    /// # Errors
    /// [`StoreError::BadId`].
    fn check_id(&self, id: &str) -> Result<(), StoreError>;

    /// Starts a new session. Whether anything is on disk before the first
    /// append is the store's choice (the harness store writes nothing
    /// until then).
    ///
    /// # Errors
    /// [`StoreError::Exists`], [`StoreError::Io`].
    fn create(&self, header: &Header, durability: Durability) -> Result<Box<dyn LogWriter>, StoreError>;

    /// Opens session `id` for appending: takes its writer's lock, reads it,
    /// and repairs what a crash left (a torn tail cut; for the harness
    /// store, an open turn closed durably). Repairs are reported as notes in
    /// the returned log's `problems`.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Locked`], [`StoreError::BadHeader`],
    /// [`StoreError::Corrupt`], [`StoreError::Io`].
    fn open_for_append(&self, id: &str, durability: Durability) -> Result<(Box<dyn LogWriter>, ReadLog), StoreError>;

    /// Reads session `id` without locking or changing it.
    ///
    /// # Errors
    /// As [`SessionStore::open_for_append`], without `Locked`.
    fn read(&self, id: &str) -> Result<ReadLog, StoreError>;

    /// Reads what was appended to session `id` after position `after`
    /// (where an earlier call stopped; [`Position::start`] for the first),
    /// without locking or changing it, and the position to read from next.
    ///
    /// The result is [`Since::Appended`] when the log only grew since
    /// `after`: its events, lines and problems are exactly the ones a whole
    /// [`SessionStore::read`] would now list after those it listed then,
    /// read without reading the log before `after` again. Otherwise it is
    /// [`Since::Whole`], the log as [`SessionStore::read`] reads it: the
    /// first read, a log rewritten, truncated or replaced since, or a view
    /// the store cannot extend (see each store). The flat store reads from
    /// the byte where it stopped; the harness store from the frame (or
    /// line) where it stopped, decompressing only the frames after it (its
    /// view keeps a turn in progress open, as written, where
    /// [`SessionStore::read`] closes it with the harness's closer events);
    /// the PostgreSQL store the rows with a greater `seq`.
    ///
    /// # Errors
    /// As [`SessionStore::read`].
    fn read_since(&self, id: &str, after: &Position) -> Result<(Since, Position), StoreError> {
        let _ = after;
        let log = self.read(id)?;
        let position = Position::of_whole(&log, Mark::Whole);
        Ok((Since::Whole(log), position))
    }

    /// Writes a whole session at once (an import), refusing an id that
    /// exists, synced before it returns. Returns where it was written.
    ///
    /// # Errors
    /// [`StoreError::Exists`], [`StoreError::Io`].
    fn write_whole(&self, header: &Header, events: &[Event]) -> Result<String, StoreError>;

    /// The ids of every stored session, sorted.
    ///
    /// # Errors
    /// [`StoreError::Io`], or a store-level refusal (a harness root mixing
    /// encodings).
    fn ids(&self) -> Result<Vec<String>, StoreError>;

    /// Whether `path` (canonical) lies inside the store, so that an export
    /// never overwrites a stored log.
    fn contains(&self, path: &Path) -> bool;

    /// The file session `id` is stored in, for a store of files.
    fn log_file(&self, _id: &str) -> Option<std::path::PathBuf> {
        None
    }

    /// Follows session `id` as other processes append to it: a
    /// [`Follower`] whose [`Follower::wait`] returns when the session may
    /// have changed. File stores watch the file's size and modification
    /// time; the PostgreSQL store listens for the database's notifications.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] and the store's own errors.
    fn follow(&self, id: &str) -> Result<Box<dyn Follower>, StoreError> {
        match self.log_file(id) {
            Some(path) => Ok(Box::new(FileFollower { path, seen: None })),
            None => Err(StoreError::NotFound { id: id.to_string(), dir: self.location() }),
        }
    }

    /// Follows every session of the store by the store's own means, those
    /// created later included; `None` for a store of files, which
    /// [`follow_every_session`] follows by polling them.
    ///
    /// # Errors
    /// The store's own errors.
    fn follow_all(&self) -> Result<Option<Box<dyn StoreFollower>>, StoreError> {
        Ok(None)
    }
}

/// Where an incremental read of a session's log stopped (see
/// [`SessionStore::read_since`]): the events read so far, the last one's
/// `seq`, and the store's own mark (a byte offset and what it needs to
/// tell an append from a rewrite, or the last row's `seq`). A position is
/// only meaningful to the store and session it came from.
#[derive(Debug, Clone, Default)]
pub struct Position {
    events: usize,
    last_seq: Option<u64>,
    mark: Mark,
}

impl Position {
    /// Before the first read: [`SessionStore::read_since`] from here reads
    /// the whole log.
    pub fn start() -> Position {
        Position::default()
    }

    /// The number of events read up to here (the events of every read
    /// since the last [`Since::Whole`], that one's included).
    pub fn events(&self) -> usize {
        self.events
    }

    /// The `seq` of the last event read, if any.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// The position after a whole read of `log`, with the store's `mark`.
    pub(crate) fn of_whole(log: &ReadLog, mark: Mark) -> Position {
        Position { events: log.events.len(), last_seq: log.events.last().map(|e| e.seq), mark }
    }

    /// The position after `appended`, read from `self`, with the store's
    /// new `mark`.
    pub(crate) fn advanced(&self, appended: &Appended, mark: Mark) -> Position {
        Position { events: self.events + appended.events.len(), last_seq: appended.events.last().map(|e| e.seq).or(self.last_seq), mark }
    }

    pub(crate) fn mark(&self) -> &Mark {
        &self.mark
    }
}

/// A store's own part of a [`Position`].
#[derive(Debug, Clone, Default)]
pub(crate) enum Mark {
    /// Nothing read yet.
    #[default]
    Start,
    /// Read whole by a store that cannot read less: the next read is
    /// whole again.
    Whole,
    /// A JSONL file (the flat store, or the harness store's plain logs):
    /// which file, how far it was read, and its last bytes before there.
    File(FileMark),
    /// A harness log read up to a frame or line boundary.
    #[cfg(feature = "harness")]
    Harness(harness::HarnessMark),
    /// Database rows: the last row read and its line number, and the
    /// session's row identity (a session removed and made again under the same id is
    /// another log).
    #[cfg(feature = "postgres")]
    Rows {
        /// The `seq` of the last row read (-1 for none).
        row: i64,
        /// The line number of the last row read (1 = the header).
        line: usize,
        /// When the session's row was stored, as the database prints it.
        stored: String,
    },
}

/// How far a file was read, and what tells an append from a rewrite: the
/// file's identity (device and inode) and the bytes just before the
/// offset, checked again before reading on.
#[derive(Debug, Clone)]
pub(crate) struct FileMark {
    /// Device and inode.
    pub identity: (u64, u64),
    /// Where the parse of lines stopped.
    pub lines: jsonl::LineState,
    /// Up to [`TAIL_CHECK`] bytes just before `lines.consumed`.
    pub tail: Vec<u8>,
}

/// How many bytes before a file position are compared again before the
/// file is read on from there.
pub(crate) const TAIL_CHECK: u64 = 64;

/// What [`SessionStore::read_since`] read.
#[derive(Debug)]
pub enum Since {
    /// The whole log, from its header: the first read, or the log changed
    /// otherwise than by appends (or the store's view of it could not be
    /// extended); the caller replaces what it had read.
    Whole(ReadLog),
    /// The events appended after the position read from (none when nothing
    /// was).
    Appended(Appended),
}

/// The events appended to a log after a [`Position`], with what a whole
/// read reports about their lines.
#[derive(Debug, Default)]
pub struct Appended {
    /// The new events, in log order.
    pub events: Vec<Event>,
    /// 1-based line of each event in `events`, numbered as in the whole
    /// log.
    pub lines: Vec<usize>,
    /// The problems of the new lines.
    pub problems: Vec<LineProblem>,
    /// A last line cut mid-record, not read: `(line, byte offset where it
    /// starts)`. The next read starts there again.
    pub torn: Option<(usize, u64)>,
}

impl Appended {
    /// Whether no line was read: no event and no problem.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.problems.is_empty()
    }
}

/// Follows every session of `store`, those created later included: a
/// [`StoreFollower`] whose [`StoreFollower::wait`] returns the ids of the
/// sessions that changed. File stores are polled every 100 ms (length and
/// modification time of each session's file); the PostgreSQL store listens
/// for notifications and polls.
///
/// # Errors
/// The store's own errors.
pub fn follow_every_session(store: std::sync::Arc<dyn SessionStore>) -> Result<Box<dyn StoreFollower>, StoreError> {
    match store.follow_all()? {
        Some(follower) => Ok(follower),
        None => Ok(Box::new(FilesFollower { store, seen: None })),
    }
}

/// Waits for changes of any session of a store.
pub trait StoreFollower: Send {
    /// Blocks at most `timeout`; returns the ids of the sessions that may
    /// have changed since the last call, sorted (the first call returns
    /// every session; an empty list means nothing changed in `timeout`).
    ///
    /// # Errors
    /// The store's errors (a connection lost, a folder that went away).
    fn wait(&mut self, timeout: std::time::Duration) -> Result<Vec<String>, StoreError>;
}

/// Follows every session of a file store by polling its sessions' files.
struct FilesFollower {
    store: std::sync::Arc<dyn SessionStore>,
    seen: Option<std::collections::BTreeMap<String, (u64, Option<std::time::SystemTime>)>>,
}

impl FilesFollower {
    fn snapshot(&self) -> Result<std::collections::BTreeMap<String, (u64, Option<std::time::SystemTime>)>, StoreError> {
        let mut now = std::collections::BTreeMap::new();
        for id in self.store.ids()? {
            let Some(path) = self.store.log_file(&id) else { continue };
            // A file removed between the listing and here is simply gone.
            if let Ok(meta) = std::fs::metadata(&path) {
                now.insert(id, (meta.len(), meta.modified().ok()));
            }
        }
        Ok(now)
    }
}

impl StoreFollower for FilesFollower {
    fn wait(&mut self, timeout: std::time::Duration) -> Result<Vec<String>, StoreError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let now = self.snapshot()?;
            let changed: Vec<String> = match &self.seen {
                None => now.keys().cloned().collect(),
                Some(seen) => now.iter().filter(|(id, state)| seen.get(*id) != Some(state)).map(|(id, _)| id.clone()).collect(),
            };
            self.seen = Some(now);
            if !changed.is_empty() || std::time::Instant::now() >= deadline {
                return Ok(changed);
            }
            std::thread::sleep(std::time::Duration::from_millis(100).min(deadline.saturating_duration_since(std::time::Instant::now())));
        }
    }
}

/// Waits for changes of one stored session.
pub trait Follower: Send {
    /// Blocks at most `timeout`; `true` when the session may have changed
    /// since the last call (the first call always says `true`).
    ///
    /// # Errors
    /// The store's errors (a connection lost, a file that went away).
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, StoreError>;
}

/// Follows a session file by its length and modification time, checked
/// every 50 ms.
struct FileFollower {
    path: std::path::PathBuf,
    seen: Option<(u64, Option<std::time::SystemTime>)>,
}

impl Follower for FileFollower {
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, StoreError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let meta = std::fs::metadata(&self.path).map_err(io(&self.path))?;
            let now = (meta.len(), meta.modified().ok());
            if self.seen != Some(now) {
                self.seen = Some(now);
                return Ok(true);
            }
            if std::time::Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::sleep(std::time::Duration::from_millis(50).min(timeout));
        }
    }
}

/// The appending end of one session's log; holds the session's lock.
pub trait LogWriter: Send + Debug {
    /// Appends one event (its `seq` follows the last one written). Under
    /// [`Durability::Event`] it is durable when this returns.
    ///
    /// # Errors
    /// [`StoreError::Io`]; the event must then be treated as not written.
    fn append(&mut self, event: &Event) -> Result<(), StoreError>;

    /// Marks the end of a turn: what [`Durability::Turn`] held back is
    /// written and synced.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    fn end_turn(&mut self) -> Result<(), StoreError>;

    /// The file written, for messages.
    fn path(&self) -> &Path;
}

/// When appended events are forced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// The store's folder (the state directory, its `sessions/`, a
    /// harness root) is a file.
    #[error("{0} is not a directory (the session store needs a folder there: --state-dir, --root or the persistence entry's root)")]
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
    /// This writer no longer holds the session: another writer took it
    /// (while this one's connection was down, or after its lease ran out).
    /// The event was not written, and nothing more will be.
    #[error("session `{id}` is no longer this process's to write: {detail}; the event was not written (continue the session again to write more)")]
    Lost {
        /// The id.
        id: String,
        /// What happened.
        detail: String,
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
    /// [`crate::structure`]) or of its history (a tool result without its
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
    let ok =
        !id.is_empty() && id.len() <= 128 && !id.starts_with('.') && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadId(id.escape_debug().to_string()))
    }
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
