//! The store seam: what the `sessions` service needs from a place that keeps
//! session logs durably.
//!
//! Two stores implement it: [`super::store::FlatStore`] (our own
//! `<state dir>/sessions/<id>.jsonl` files, the default) and
//! [`super::harness::HarnessStore`] (the TypeScript harness's
//! `<root>/--<cwd>--/<id>/session.jsonl[.zstd]` layout). A store hands out
//! one [`LogWriter`] per open session; the writer is the only thing that
//! appends to that session while it lives (a second process is refused).

use std::fmt::Debug;
use std::path::Path;

use super::event::{Event, Header};
use super::store::{Durability, ReadLog, StoreError};

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
            let meta = std::fs::metadata(&self.path).map_err(super::store::io(&self.path))?;
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
