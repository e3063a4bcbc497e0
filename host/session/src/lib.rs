//! Sessions: event-sourced logs, durable in a store, and what is derived
//! from them.
//!
//! - [`event`]: the header and event envelope, and the core event types;
//! - [`log`]: one session, its append pipeline and projection states;
//! - [`structure`]: the rules of turns, steps and tool calls the log obeys;
//! - [`history`]: the history a model sees, derived from surface events;
//! - [`projection`]: folds of a session's events into small states;
//! - [`event_types`]: which plugin owns which event type;
//! - [`owner`]: who registered something;
//! - [`packed`]: the harness's packed chunk rows;
//! - [`json`]: JSON kept as text;
//! - [`store`]: where logs live: the trait every store implements, our
//!   JSONL files, the harness's store (feature `harness`) and PostgreSQL
//!   (feature `postgres`).
//!
//! [`Sessions`] is the host's `sessions` service over one store.
//!
//! Dependency order, leaves first: `json`, `owner`, `event` ← `packed`,
//! `structure`, `history`, `event_types`, `projection` ← `store` ← `log` ←
//! the crate root.

pub mod event;
pub mod event_types;
pub mod history;
pub mod json;
pub mod log;
pub mod owner;
pub mod packed;
pub mod projection;
pub mod store;
pub mod structure;

use std::path::Path;
use std::sync::Arc;

pub use event::{Event, Header};
pub use event_types::EventTypes;
pub use history::{
    cut_short_compaction, derive_history, derive_messages, event_message, surface_nodes, unended_compaction, well_formed_history, CutShortCompaction,
    Message,
};
pub use log::{AppendError, Appender, Backing, Session};
pub use owner::Owner;
#[cfg(feature = "harness")]
pub use store::harness::{self, Compression, HarnessConfig, HarnessStore};
#[cfg(feature = "postgres")]
pub use store::postgres::{self, PostgresConfig, PostgresStore};
pub use store::{
    follow_every_session, skipped_lines, Durability, FlatStore, LineProblem, LogWriter, ProblemKind, SessionStore, StoreError, StoreFollower,
};

/// A session store shared by the `sessions` service and its users.
pub type Store = Arc<dyn SessionStore>;

use crate::projection::Projections;
use cordis_sync::LockExt;

/// A short description of one stored session.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The id.
    pub id: String,
    /// Creation time, ms since the epoch.
    pub created_at: u64,
    /// Number of events.
    pub events: usize,
    /// Time of the last event, ms since the epoch (0 when none).
    pub last_time: i64,
    /// One-line summaries of the projections that have something to say.
    pub summaries: Vec<(String, String)>,
    /// Lines that could not be read.
    pub problems: usize,
    /// A compaction with no `compaction/end`, if the log ends in one.
    pub cut_short: Option<CutShortCompaction>,
    /// The session's working folder, as its header gives it.
    pub cwd: Option<String>,
    /// The first line of the user's first message, up to 100 characters.
    pub title: Option<String>,
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct ImportReport {
    /// The id the session got.
    pub id: String,
    /// Where it was written (a file, or a location in the store).
    pub path: String,
    /// Events imported.
    pub events: usize,
    /// Events of types no loaded plugin owns, kept as opaque.
    pub opaque: usize,
    /// Lines that could not be read, and events an owner's validator
    /// rejected (not imported), each with its line in the source
    /// ([`ProblemKind::Skipped`]); breaks of the structure rules and repairs
    /// of the history (imported as they are; [`ProblemKind::Broken`]); notes.
    pub problems: Vec<LineProblem>,
}

/// The sessions service.
pub struct Sessions {
    store: Option<Store>,
    durability: Durability,
    types: Arc<EventTypes>,
    projections: Arc<Projections>,
    /// Sessions open in this process, by id (the `projections` service
    /// reads their state without replaying them).
    live: std::sync::Mutex<std::collections::HashMap<String, std::sync::Weak<Session>>>,
}

impl Sessions {
    /// Sessions stored under `store` (or kept in memory when `None`).
    pub fn new(store: Option<Store>, durability: Durability, types: Arc<EventTypes>, projections: Arc<Projections>) -> Sessions {
        Sessions { store, durability, types, projections, live: Default::default() }
    }

    /// Sessions of `store` read with this service's event types and
    /// projections (a host booted in memory reading a store on the side).
    pub fn over(&self, store: Store) -> Sessions {
        Sessions::new(Some(store), self.durability, self.types.clone(), self.projections.clone())
    }

    fn remember(&self, session: &Arc<Session>) {
        let mut live = self.live.lock_or_recover();
        live.retain(|_, s| s.strong_count() > 0);
        live.insert(session.id().to_string(), Arc::downgrade(session));
    }

    /// The session `id` if it is open in this process.
    pub fn live(&self, id: &str) -> Option<Arc<Session>> {
        self.live.lock_or_recover().get(id).and_then(std::sync::Weak::upgrade)
    }

    /// The state of projection `key` for session `id`: from the open
    /// session when it is open here, else from its stored log.
    ///
    /// # Errors
    /// When the session does not exist or the projection is not registered.
    pub fn projection_state(&self, id: &str, key: &str) -> Result<String, String> {
        let state = match self.live(id) {
            Some(session) => session.state(key),
            None => {
                let (session, _) = self.view(id).map_err(|e| e.to_string())?;
                session.state(key)
            }
        };
        state.ok_or_else(|| format!("no projection `{key}` is registered"))
    }

    /// The store, if sessions are durable.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// Creates a session with a fresh id.
    ///
    /// # Errors
    /// [`StoreError`] when the file cannot be created.
    pub fn create(&self, cwd: Option<String>) -> Result<Arc<Session>, StoreError> {
        let id = format!("s-{}", uuid::Uuid::new_v4().simple());
        self.create_with_id(&id, cwd)
    }

    /// Creates a session with the given id.
    ///
    /// # Errors
    /// [`StoreError::BadId`], [`StoreError::Exists`], I/O errors.
    pub fn create_with_id(&self, id: &str, cwd: Option<String>) -> Result<Arc<Session>, StoreError> {
        if let Some(store) = &self.store {
            store.check_id(id)?;
        } else {
            store::check_id(id)?;
        }
        let header = Header::new(id, cwd);
        let backing = match &self.store {
            Some(store) => Backing::File(store.create(&header, self.durability)?),
            None => Backing::Memory,
        };
        let session = Arc::new(Session::new(header, backing, self.types.clone(), self.projections.clone()));
        self.remember(&session);
        Ok(session)
    }

    /// Opens stored session `id` for appending (locks its file, cuts a torn
    /// tail) and replays it. Returns the problems found while reading.
    ///
    /// # Errors
    /// [`StoreError`]: unknown id, locked by another process, bad header.
    pub fn open(&self, id: &str) -> Result<(Arc<Session>, Vec<LineProblem>), StoreError> {
        let Some(store) = &self.store else {
            return Err(StoreError::NotFound { id: id.to_string(), dir: "memory".into() });
        };
        let (writer, log) = store.open_for_append(id, self.durability)?;
        let named = log.header.id.clone();
        let path = writer.path().display().to_string();
        let (session, mut problems) = Session::replay(log, Backing::File(writer), self.types.clone(), self.projections.clone());
        if named != id {
            problems.insert(0, LineProblem::note(1, format!("the header names session `{named}`, but it is stored as `{id}` ({path})")));
        }
        let session = Arc::new(session);
        self.remember(&session);
        Ok((session, problems))
    }

    /// Reads a session for viewing, without locking: `what` is a stored id or
    /// a path to a session file (a stored id is looked up first).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn view(&self, what: &str) -> Result<(Session, Vec<LineProblem>), StoreError> {
        // A stored session's id wins over a file of that name: a harness
        // store's ids may contain `/` or end in `.jsonl`.
        let stored = match &self.store {
            Some(store) if store.check_id(what).is_ok() => match store.read(what) {
                Ok(log) => Some(log),
                Err(StoreError::NotFound { .. }) if looks_like_path(what) => None,
                Err(e) => return Err(e),
            },
            _ => None,
        };
        let mut log = match stored {
            Some(log) => log,
            None if looks_like_path(what) => read_path(Path::new(what))?,
            None => {
                return Err(match &self.store {
                    Some(store) => store.check_id(what).err().unwrap_or_else(|| StoreError::NotFound { id: what.to_string(), dir: store.location() }),
                    None => StoreError::NotFound { id: what.to_string(), dir: "memory".into() },
                })
            }
        };
        if let Some((line, _)) = log.torn.take() {
            log.problems.push(LineProblem::skipped(line, "torn last line (the writer stopped mid-line)"));
        }
        Ok(Session::replay(log, Backing::ReadOnly, self.types.clone(), self.projections.clone()))
    }

    /// Copies the session log at `source` (ours, or one written by the
    /// TypeScript harness) into the store as a new session, never touching
    /// the source. Packed chunk rows are expanded; events of owned types
    /// are checked by their owner's validator and left out, with their line,
    /// when rejected; unreadable lines are reported; everything else,
    /// opaque events included, is copied with its data byte for byte.
    ///
    /// The new session's id is `id`, else the source header's id when it is a
    /// valid id, else a fresh one.
    ///
    /// # Errors
    /// [`StoreError`]: no store, an unreadable source, an id already taken.
    pub fn import(&self, source: &Path, id: Option<&str>) -> Result<ImportReport, StoreError> {
        let Some(store) = &self.store else {
            return Err(StoreError::NotFound { id: source.display().to_string(), dir: "memory".into() });
        };
        let mut log = read_path(source)?;
        let mut problems = std::mem::take(&mut log.problems);
        if let Some((line, _)) = log.torn {
            problems.push(LineProblem::skipped(line, "torn last line (the writer stopped mid-line); not imported"));
        }
        let mut header = log.header;
        header.id = match id {
            Some(id) => {
                store.check_id(id)?;
                id.to_string()
            }
            None if store.check_id(&header.id).is_ok() => header.id,
            None => format!("s-{}", uuid::Uuid::new_v4().simple()),
        };
        let mut events = Vec::with_capacity(log.events.len());
        let mut kept_lines = Vec::with_capacity(log.events.len());
        let mut opaque = 0;
        for (event, line) in log.events.into_iter().zip(log.lines) {
            if let Some(owned) = self.types.get(&event.kind) {
                if let Err(reason) = owned.validate(event.data.get()) {
                    problems.push(LineProblem::skipped(line, format!("{} rejected by {}, not imported: {reason}", event.kind, owned.owner)));
                    continue;
                }
            } else if !event::core::is_core(&event.kind) {
                opaque += 1;
            }
            events.push(event);
            kept_lines.push(line);
        }
        // The structure and history checks of a replay, on what is copied.
        let lines = kept_lines;
        let checked = store::ReadLog { header: header.clone(), events, lines, problems: Vec::new(), torn: None, unterminated: None };
        let (session, found) = Session::replay(checked, Backing::ReadOnly, self.types.clone(), self.projections.clone());
        problems.extend(found);
        problems.sort_by_key(|p| p.line);
        let events = session.events();
        let path = store.write_whole(&header, &events)?;
        Ok(ImportReport { id: header.id, path, events: events.len(), opaque, problems })
    }

    /// Every stored session, oldest first, and a message for each file that
    /// could not be read.
    ///
    /// # Errors
    /// [`StoreError`] when the folder cannot be listed.
    pub fn list(&self) -> Result<(Vec<SessionInfo>, Vec<String>), StoreError> {
        let Some(store) = &self.store else { return Ok((Vec::new(), Vec::new())) };
        let mut out = Vec::new();
        let mut skipped = Vec::new();
        for id in store.ids()? {
            match self.view(&id) {
                Ok((session, problems)) => {
                    let header = session.header();
                    let (events, last_time, cut_short) = session.with_events(|e| (e.len(), e.last().map_or(0, |e| e.time), cut_short_compaction(e)));
                    let summaries =
                        session.states().into_iter().map(|(p, state)| (p.key.clone(), p.summary(&state))).filter(|(_, s)| !s.is_empty()).collect();
                    let title = session.with_events(first_user_line);
                    out.push(SessionInfo {
                        id,
                        created_at: header.created_at,
                        events,
                        last_time,
                        summaries,
                        problems: problems.len(),
                        cut_short,
                        cwd: header.cwd.clone(),
                        title,
                    });
                }
                Err(e) => skipped.push(format!("skipping session {id}: {e}")),
            }
        }
        out.sort_by_key(|s| (s.created_at, s.id.clone()));
        Ok((out, skipped))
    }
}

/// The first non-empty line of the user's first message, cut at 100
/// characters.
fn first_user_line(events: &[Event]) -> Option<String> {
    let first = events.iter().find(|e| e.kind == event::core::USER_MESSAGE)?;
    let data = first.data_value();
    let text = match &data["content"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => return None,
    };
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(100).collect())
}

/// Whether `what` names a file rather than a stored session's id: it has a
/// `/`, or ends in `.jsonl` or `.jsonl.zstd`.
pub fn looks_like_path(what: &str) -> bool {
    what.contains('/') || what.ends_with(".jsonl") || what.ends_with(".jsonl.zstd")
}

/// Reads one session file, whatever wrote it: a Zstandard-framed harness
/// log (`session.jsonl.zstd`, recognized by its frame magic) by the
/// harness's rules (nothing repaired on disk; an open turn is closed in the
/// view only), anything else as a JSONL log ([`store::read_file`]).
///
/// # Errors
/// [`StoreError`].
pub fn read_path(path: &Path) -> Result<store::ReadLog, StoreError> {
    #[cfg(feature = "harness")]
    if harness::frames::is_zstd_file(path)? {
        return harness::read_file(path, Compression::Zstd);
    }
    store::read_file(path)
}

/// Whether events of `kind` are understood here: a core type or a type a
/// loaded plugin owns. Anything else is kept and replayed as opaque.
pub fn core_type_or_owned(types: &EventTypes, kind: &str) -> bool {
    event::core::is_core(kind) || types.get(kind).is_some()
}
