//! One session: its events in memory, the append pipeline, and the
//! projection states folded from it.
//!
//! Append pipeline: who may append the type (the host appends
//! core types, a plugin only the types it owns) → the owner's validator →
//! turn enclosure (execution events only inside an open turn) → durable
//! write → listeners (projection folds).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::json::RawJson;
use serde::Serialize;

use crate::event::{core, now_ms, to_raw, Event, Header, SurfaceOp};
use crate::event_types::{EventTypes, OwnedType};
use crate::history::{cut_short_compaction, history_notes};
use crate::owner::Owner;
use crate::projection::{Projections, RegisteredProjection};
use crate::store::{parse_data, LineProblem, LogWriter, ReadLog, StoreError};
use crate::structure::Trace;
use cordis_sync::LockExt;

/// Who is appending.
#[derive(Debug, Clone, Copy)]
pub enum Appender<'a> {
    /// The host itself (agent loop, import).
    Host,
    /// A plugin, through a tool call of the session's agent.
    Plugin(&'a Owner),
}

/// An append was refused; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// A plugin tried to append a core type.
    #[error("`{0}` is a core event type; plugins append only the types they own")]
    CoreType(String),
    /// Nobody owns the type.
    #[error("no loaded plugin owns event type `{0}`")]
    Unowned(String),
    /// Someone else owns the type.
    #[error("event type `{kind}` is owned by {owner}, not by {by}")]
    NotOwner {
        /// The type.
        kind: String,
        /// Its owner.
        owner: String,
        /// Who tried.
        by: String,
    },
    /// The owner's validator refused the data.
    #[error("{kind} rejected by {owner}: {reason}")]
    Invalid {
        /// The type.
        kind: String,
        /// The owner.
        owner: String,
        /// Why.
        reason: String,
    },
    /// The event would break a rule of the log's structure
    /// ([`crate::structure`]).
    #[error("the event would break the log's structure: {0}")]
    Structure(String),
    /// The data is not JSON.
    #[error("{0}")]
    NotJson(String),
    /// The session was opened for reading only.
    #[error("session `{0}` is open read-only")]
    ReadOnly(String),
    /// The durable write failed; the event is not in the log.
    #[error("the event could not be written: {0}")]
    Write(#[from] StoreError),
}

/// A projection's state for this session, folded over `events[..folded]`.
struct FoldState {
    token: u64,
    state: String,
    folded: usize,
}

struct State {
    header: Header,
    events: Vec<Event>,
    rejected: HashSet<u64>,
    trace: Trace,
    writer: Option<Box<dyn LogWriter>>,
    read_only: bool,
    folds: BTreeMap<String, FoldState>,
}

/// One event-sourced session.
pub struct Session {
    id: String,
    inner: Mutex<State>,
    types: Arc<EventTypes>,
    projections: Arc<Projections>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish_non_exhaustive()
    }
}

/// How a session is backed.
pub enum Backing {
    /// Appends go to this file.
    File(Box<dyn LogWriter>),
    /// Appends stay in memory.
    Memory,
    /// Appends are refused.
    ReadOnly,
}

impl Session {
    /// A new, empty session.
    pub fn new(header: Header, backing: Backing, types: Arc<EventTypes>, projections: Arc<Projections>) -> Session {
        let (writer, read_only) = match backing {
            Backing::File(w) => (Some(w), false),
            Backing::Memory => (None, false),
            Backing::ReadOnly => (None, true),
        };
        Session {
            id: header.id.clone(),
            inner: Mutex::new(State {
                header,
                events: Vec::new(),
                rejected: HashSet::new(),
                trace: Trace::new(),
                writer,
                read_only,
                folds: BTreeMap::new(),
            }),
            types,
            projections,
        }
    }

    /// Rebuilds a session from a log read from disk: re-checks every event of
    /// an owned type with its owner's validator (a rejected event is kept in
    /// the log, reported, and left out of projections), checks the log's
    /// structure rules ([`crate::structure`]; a break is reported with its
    /// line and rule, and a plugin event outside a turn is left out of
    /// projections), reports what the derived history had to leave out or
    /// add ([`crate::history::derive_history`]), keeps events of types
    /// nobody owns as opaque, and folds the projections.
    pub fn replay(log: ReadLog, backing: Backing, types: Arc<EventTypes>, projections: Arc<Projections>) -> (Session, Vec<LineProblem>) {
        let ReadLog { header, events, lines, mut problems, .. } = log;
        let session = Session::new(header, backing, types, projections);
        {
            let mut st = session.lock();
            // Each type's owner, looked up in the registry once per type: a
            // log has a few types, so a list beats hashing each event's type.
            let mut owners: Vec<(String, Option<Arc<OwnedType>>)> = Vec::new();
            for (event, &line) in events.iter().zip(lines.iter()) {
                let owned = match owners.iter().find(|(kind, _)| *kind == event.kind) {
                    Some((_, owned)) => owned.clone(),
                    None => {
                        let owned = session.types.get(&event.kind);
                        owners.push((event.kind.clone(), owned.clone()));
                        owned
                    }
                };
                if let Some(owned) = &owned {
                    if let Err(reason) = owned.validate(event.data.get()) {
                        problems.push(LineProblem::broken(line, format!("{} rejected by {} on replay: {reason}", event.kind, owned.owner)));
                        st.rejected.insert(event.seq);
                    }
                }
                if let Err(rule) = st.trace.follow(&event.kind, &event.data, event.surface_op.as_ref(), owned.is_some()) {
                    problems.push(LineProblem::broken(line, format!("breaks the log's structure: {rule}")));
                    if owned.is_some() {
                        st.rejected.insert(event.seq);
                    }
                }
            }
            // The events are kept as read: the vector moves, no event is copied.
            st.events = events;
            if let Some(open) = cut_short_compaction(&st.events) {
                let at = st.events.iter().position(|e| e.seq == open.start);
                let line = at.and_then(|i| lines.get(i)).copied().unwrap_or(1);
                problems.push(LineProblem::note(line, open.describe()));
            }
            let notes = history_notes(&st.events);
            for (seq, note) in notes {
                let at = st.events.binary_search_by_key(&seq, |e| e.seq).ok().or_else(|| st.events.iter().position(|e| e.seq == seq));
                let line = at.and_then(|i| lines.get(i)).copied().unwrap_or(1);
                problems.push(LineProblem::broken(line, note));
            }
            problems.sort_by_key(|p| p.line);
        }
        (session, problems)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock_or_recover()
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The header.
    pub fn header(&self) -> Header {
        self.lock().header.clone()
    }

    /// A copy of every event.
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.clone()
    }

    /// Runs `f` over the events without copying them.
    pub fn with_events<R>(&self, f: impl FnOnce(&[Event]) -> R) -> R {
        f(&self.lock().events)
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// Whether the log has no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open turn's number, if a turn is open.
    pub fn open_turn(&self) -> Option<u64> {
        self.lock().trace.open_turn()
    }

    /// The open step's number, if a step is open.
    pub fn open_step(&self) -> Option<u64> {
        self.lock().trace.open_step()
    }

    /// The number the next turn will get.
    pub fn next_turn(&self) -> u64 {
        self.lock().trace.next_turn()
    }

    /// The number the open turn's next step will get.
    pub fn next_step(&self) -> u64 {
        self.lock().trace.next_step()
    }

    /// Appends an event whose data is JSON text.
    ///
    /// # Errors
    /// [`AppendError`]; nothing is written.
    pub fn append_text(&self, kind: &str, data: &str, by: Appender<'_>) -> Result<u64, AppendError> {
        let raw = parse_data(data).map_err(AppendError::NotJson)?;
        self.push(kind, raw, by, |_| ())
    }

    /// Appends an event whose data a plugin encoded with `serde_json`
    /// ([`cordis_abi::JsonStr`], JSON by construction): the data is copied,
    /// not parsed.
    ///
    /// # Errors
    /// [`AppendError`]; nothing is written.
    pub fn append_encoded(&self, kind: &str, data: cordis_abi::JsonStr<'_>, by: Appender<'_>) -> Result<u64, AppendError> {
        self.push(kind, RawJson::from_plugin(data.as_str()), by, |_| ())
    }

    /// Appends an event whose data is any serializable value.
    ///
    /// # Errors
    /// [`AppendError`]; nothing is written.
    pub fn append_value(&self, kind: &str, data: &impl Serialize, by: Appender<'_>) -> Result<Event, AppendError> {
        self.append(kind, to_raw(data), by)
    }

    /// Appends one event through the pipeline; returns it as written.
    ///
    /// # Errors
    /// [`AppendError`]; nothing is written.
    pub fn append(&self, kind: &str, data: RawJson, by: Appender<'_>) -> Result<Event, AppendError> {
        let mut written = None;
        self.push(kind, data, by, |e| written = Some(e.clone()))?;
        written.ok_or_else(|| AppendError::ReadOnly(self.id.clone()))
    }

    /// Appends a core surface event (`user/message`, `assistant/message`,
    /// `tool/result`) as the host, with its surface operation given:
    /// [`SurfaceOp::Replace`] puts it in place of a range of the history
    /// (a compaction's summary), and `sources` lists the events it stands
    /// for (`sourceEventSeqs`, never empty). Otherwise as [`Session::append`].
    ///
    /// # Errors
    /// [`AppendError`]: not a core surface type, data that is not JSON,
    /// no sources, or the pipeline's refusals; nothing is written.
    pub fn append_surface(&self, kind: &str, data: &impl Serialize, op: SurfaceOp, sources: Vec<u64>) -> Result<Event, AppendError> {
        if !core::is_surface(kind) {
            return Err(AppendError::Structure(format!("{kind} is not a core surface event type")));
        }
        if sources.is_empty() {
            return Err(AppendError::Structure(format!("{kind} with a given surface operation must cite its sources")));
        }
        let data = to_raw(data);
        let mut st = self.lock();
        if st.read_only {
            return Err(AppendError::ReadOnly(self.id.clone()));
        }
        if let Some(late) = sources.iter().find(|s| st.events.last().is_none_or(|e| **s > e.seq)) {
            return Err(AppendError::Structure(format!("{kind} cites seq {late}, which is not in the log")));
        }
        st.trace.check(kind, &data, Some(&op), false).map_err(AppendError::Structure)?;
        let seq = st.events.last().map_or(0, |e| e.seq + 1);
        let event = Event { seq, time: now_ms(), kind: kind.to_string(), data, surface_op: Some(op), source_event_seqs: Some(sources) };
        if let Some(writer) = st.writer.as_mut() {
            writer.append(&event)?;
        }
        st.trace.apply(kind, &event.data);
        st.events.push(event.clone());
        Ok(event)
    }

    /// The append pipeline; `seen` gets the event as written (under the
    /// session's lock). Projections are not folded here: [`Session::state`]
    /// catches up from the log when a state is read.
    fn push(&self, kind: &str, data: RawJson, by: Appender<'_>, seen: impl FnOnce(&Event)) -> Result<u64, AppendError> {
        let is_core = core::is_core(kind);
        let owned = if is_core { None } else { self.types.get(kind) };
        match (&by, is_core, &owned) {
            (Appender::Plugin(_), true, _) => return Err(AppendError::CoreType(kind.to_string())),
            (_, false, None) => return Err(AppendError::Unowned(kind.to_string())),
            (Appender::Plugin(who), false, Some(o)) if o.owner.fiber != who.fiber => {
                return Err(AppendError::NotOwner { kind: kind.to_string(), owner: o.owner.to_string(), by: who.to_string() })
            }
            _ => {}
        }
        // The owner's invariant guards events that come from elsewhere (the
        // host, replay, import). An owner's own append, from its tool call,
        // is data the owner built and checked itself: checking it again
        // across the ABI would parse the same text twice per call.
        if let Some(o) = owned.as_ref().filter(|_| matches!(by, Appender::Host)) {
            o.validate(data.get()).map_err(|reason| AppendError::Invalid { kind: kind.to_string(), owner: o.owner.to_string(), reason })?;
        }
        let mut st = self.lock();
        if st.read_only {
            return Err(AppendError::ReadOnly(self.id.clone()));
        }
        let surface = (core::is_surface(kind) || owned.as_ref().is_some_and(|o| o.surface)).then_some(SurfaceOp::Append);
        st.trace.check(kind, &data, surface.as_ref(), owned.is_some()).map_err(AppendError::Structure)?;
        let seq = st.events.last().map_or(0, |e| e.seq + 1);
        let event = Event { seq, time: now_ms(), kind: kind.to_string(), data, surface_op: surface, source_event_seqs: None };
        if let Some(writer) = st.writer.as_mut() {
            writer.append(&event)?;
        }
        st.trace.apply(kind, &event.data);
        if kind == core::TURN_END {
            if let Some(writer) = st.writer.as_mut() {
                writer.end_turn()?;
            }
        }
        seen(&event);
        st.events.push(event);
        Ok(seq)
    }

    /// The current state of projection `key` (JSON text): folded from the
    /// whole log if the projection was registered (or changed) since the last
    /// fold, else caught up over the events appended since.
    pub fn state(&self, key: &str) -> Option<String> {
        let p = self.projections.get(key)?;
        let mut st = self.lock();
        fold(&mut st, &p);
        st.folds.get(key).map(|f| f.state.clone())
    }

    /// Every registered projection's current state, by key.
    pub fn states(&self) -> Vec<(Arc<RegisteredProjection>, String)> {
        self.projections
            .all()
            .into_iter()
            .filter_map(|p| {
                let state = self.state(&p.key)?;
                Some((p, state))
            })
            .collect()
    }
}

/// Brings `p`'s state up to date with the log: from the start when it was
/// folded under another registration (or never), else from where the last
/// fold stopped. Events rejected on replay are skipped; an event the plugin
/// cannot fold leaves the state as it was.
fn fold(st: &mut State, p: &RegisteredProjection) {
    let (mut state, from) = match st.folds.get(&p.key) {
        Some(f) if f.token == p.token() => (f.state.clone(), f.folded),
        _ => (p.init.clone(), 0),
    };
    // Whether the projection folds a type, remembered for the last type
    // asked (a log's types come in runs and repeat).
    let mut last: Option<(&str, bool)> = None;
    for event in &st.events[from.min(st.events.len())..] {
        let folds = match last {
            Some((kind, folds)) if kind == event.kind => folds,
            _ => {
                let folds = p.folds(&event.kind);
                last = Some((&event.kind, folds));
                folds
            }
        };
        if !folds || (!st.rejected.is_empty() && st.rejected.contains(&event.seq)) {
            continue;
        }
        match p.apply(&state, &event.kind, event.data.get()) {
            Ok(next) => state = next,
            Err(e) => tracing::warn!(projection = %p.key, seq = event.seq, "projection skipped an event: {e}"),
        }
    }
    let folded = st.events.len();
    st.folds.insert(p.key.clone(), FoldState { token: p.token(), state, folded });
}
