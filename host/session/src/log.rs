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
use crate::history::{cut_short_compaction, history_notes, unended_compaction, HistoryNotes};
use crate::owner::Owner;
use crate::projection::{Projections, RegisteredProjection};
use crate::store::{parse_data, Appended, LineProblem, LogWriter, ReadLog, StoreError};
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
    /// What a session replayed read-only keeps to follow its log.
    followed: Option<Box<Followed>>,
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
                followed: None,
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
        let follows = matches!(backing, Backing::ReadOnly);
        let session = Session::new(header, backing, types, projections);
        let problems = {
            let mut st = session.lock();
            session.check_replayed(&mut st, &events, &lines, &mut problems);
            // The events are kept as read: the vector moves, no event is copied.
            st.events = events;
            if follows {
                // A read-only session can follow its log: what later reads
                // append is checked and noted as this replay was.
                let mut history = HistoryNotes::default();
                history.push(&st.events);
                let open_compaction = unended_compaction(&st.events).map(|e| e.seq);
                let mut followed = Followed { lines, problems, history, open_compaction, kinds: Vec::new(), notes: Vec::new() };
                followed.index_kinds(&st.events, 0);
                followed.refresh_notes(&st.events);
                let all = followed.all_problems();
                st.followed = Some(Box::new(followed));
                all
            } else {
                if let Some(open) = unended_compaction(&st.events) {
                    problems.extend(compaction_note(&st.events, &lines, open.seq));
                }
                let notes = history_notes(&st.events);
                for (seq, note) in notes {
                    problems.push(LineProblem::broken(line_of(&st.events, &lines, seq), note));
                }
                problems.sort_by_key(|p| p.line);
                problems
            }
        };
        (session, problems)
    }

    /// Checks events read from a log as [`Session::replay`] does, adding
    /// what it finds to `problems`: each event of an owned type against its
    /// owner's validator, and each against the log's structure rules (a
    /// rejected event is kept, and left out of projections).
    fn check_replayed(&self, st: &mut State, events: &[Event], lines: &[usize], problems: &mut Vec<LineProblem>) {
        // Each type's owner, looked up in the registry once per type: a
        // log has a few types, so a list beats hashing each event's type.
        let mut owners: Vec<(String, Option<Arc<OwnedType>>)> = Vec::new();
        for (event, &line) in events.iter().zip(lines.iter()) {
            let owned = match owners.iter().find(|(kind, _)| *kind == event.kind) {
                Some((_, owned)) => owned.clone(),
                None => {
                    let owned = self.types.get(&event.kind);
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
    }

    /// The indexes of the first and the last event of type `kind`, if
    /// any: kept as the log is read for a session replayed read-only (so
    /// a page asks without a pass over the log), found by a scan for any
    /// other.
    pub fn first_and_last_of(&self, kind: &str) -> Option<(usize, usize)> {
        let st = self.lock();
        match &st.followed {
            Some(followed) => followed.kinds.iter().find(|k| k.kind == kind).map(|k| (k.first, k.last)),
            None => {
                let first = st.events.iter().position(|e| e.kind == kind)?;
                let last = st.events.iter().rposition(|e| e.kind == kind)?;
                Some((first, last))
            }
        }
    }

    /// Adds the events a later read of the log found after the ones this
    /// session holds ([`crate::store::SessionStore::read_since`]) to a
    /// session replayed read-only, checking them as [`Session::replay`]
    /// checks a log: the cost is that of the new events (their checks, and
    /// their surface outlines), plus one pass over the history's outlines
    /// for its notes. Returns whether the log's problems changed (see
    /// [`Session::followed_problems`]); `None` (nothing added) for a
    /// session that was not replayed read-only.
    pub fn follow_appended(&self, appended: Appended) -> Option<bool> {
        let Appended { events, lines, mut problems, .. } = appended;
        let mut st = self.lock();
        // Only a session replayed read-only follows its log.
        st.followed.as_ref()?;
        self.check_replayed(&mut st, &events, &lines, &mut problems);
        let state = &mut *st;
        let followed = state.followed.as_mut()?;
        let added = !problems.is_empty();
        followed.problems.append(&mut problems);
        followed.lines.extend_from_slice(&lines);
        followed.history.push(&events);
        followed.index_kinds(&events, state.events.len());
        for event in &events {
            match event.kind.as_str() {
                core::COMPACTION_START => followed.open_compaction = Some(event.seq),
                core::COMPACTION_END => followed.open_compaction = None,
                _ => {}
            }
        }
        state.events.extend(events);
        let notes_changed = followed.refresh_notes(&state.events);
        Some(added || notes_changed)
    }

    /// Every problem of a session replayed read-only, as a replay of its
    /// whole log now would report them (sorted by line); `None` for any
    /// other session.
    pub fn followed_problems(&self) -> Option<Vec<LineProblem>> {
        self.lock().followed.as_ref().map(|f| f.all_problems())
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

/// What a session replayed read-only keeps to follow its log: the line
/// of each event, the problems that later events cannot change (the read's,
/// the validators', the structure's), and what the notes that can change
/// are found from (the history's outlines, the compaction left open).
struct Followed {
    lines: Vec<usize>,
    problems: Vec<LineProblem>,
    history: HistoryNotes,
    /// The seq of a `compaction/start` with no `compaction/end` after it.
    open_compaction: Option<u64>,
    /// Each event type of the log, with the indexes of its first and its
    /// last event.
    kinds: Vec<KindIndex>,
    /// The notes that later events can change: on a compaction left open,
    /// and on the history.
    notes: Vec<LineProblem>,
}

/// Where the events of one type are in a log.
struct KindIndex {
    kind: String,
    first: usize,
    last: usize,
}

impl Followed {
    /// Indexes the types of `events`, the log's events from index `from`.
    /// A log has a few types, which come in runs: the last one looked up
    /// is tried first, then the list.
    fn index_kinds(&mut self, events: &[Event], from: usize) {
        let mut at = 0;
        for (i, event) in events.iter().enumerate() {
            let index = from + i;
            if self.kinds.get(at).is_none_or(|k| k.kind != event.kind) {
                match self.kinds.iter().position(|k| k.kind == event.kind) {
                    Some(found) => at = found,
                    None => {
                        self.kinds.push(KindIndex { kind: event.kind.clone(), first: index, last: index });
                        at = self.kinds.len() - 1;
                    }
                }
            }
            self.kinds[at].last = index;
        }
    }

    /// Finds again the notes that later events can change, for the log
    /// `events` (the session's); whether they changed.
    fn refresh_notes(&mut self, events: &[Event]) -> bool {
        let mut notes = Vec::new();
        if let Some(seq) = self.open_compaction {
            notes.extend(compaction_note(events, &self.lines, seq));
        }
        for (seq, note) in self.history.notes() {
            notes.push(LineProblem::broken(line_of(events, &self.lines, seq), note));
        }
        let changed = notes != self.notes;
        self.notes = notes;
        changed
    }

    /// Every problem of the log, sorted by line, as [`Session::replay`]
    /// reports them.
    fn all_problems(&self) -> Vec<LineProblem> {
        let mut all = self.problems.clone();
        all.extend(self.notes.iter().cloned());
        all.sort_by_key(|p| p.line);
        all
    }
}

/// The line of the event of seq `seq` (1 when it is not there).
fn line_of(events: &[Event], lines: &[usize], seq: u64) -> usize {
    let at = events.binary_search_by_key(&seq, |e| e.seq).ok().or_else(|| events.iter().position(|e| e.seq == seq));
    at.and_then(|i| lines.get(i)).copied().unwrap_or(1)
}

/// The note on a compaction whose `compaction/start` (seq `seq`) has no
/// `compaction/end`: which compaction, and how the next writer closes it
/// ([`crate::history::CutShortCompaction::describe`]). Only the events from
/// that start on are looked at, so the cost does not grow with the log.
fn compaction_note(events: &[Event], lines: &[usize], seq: u64) -> Option<LineProblem> {
    let at = events.binary_search_by_key(&seq, |e| e.seq).ok().or_else(|| events.iter().position(|e| e.seq == seq))?;
    let open = cut_short_compaction(&events[at..])?;
    Some(LineProblem::note(lines.get(at).copied().unwrap_or(1), open.describe()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::jsonl::{parse_appended, parse_whole};
    use std::path::Path;

    const LOG: &str = concat!(
        "{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n",
        "{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n",
        "{\"seq\":1,\"time\":1,\"type\":\"user/message\",\"data\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]},\"surfaceOp\":\"append\"}\n",
        "{\"seq\":2,\"time\":1,\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}}\n",
        "{\"seq\":3,\"time\":1,\"type\":\"assistant/message\",\"data\":{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"tool-call\",\"id\":\"c1\",\"name\":\"t\",\"arguments\":\"{}\"}]}},\"surfaceOp\":\"append\"}\n",
        "not json\n",
        "{\"seq\":4,\"time\":1,\"type\":\"tool/result\",\"data\":{\"turn\":1,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c9\",\"content\":[]}]}},\"surfaceOp\":\"append\"}\n",
        "{\"seq\":5,\"time\":1,\"type\":\"tool/result\",\"data\":{\"turn\":1,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c1\",\"content\":[]}]}},\"surfaceOp\":\"append\"}\n",
        "{\"seq\":6,\"time\":1,\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":1}}\n",
        "{\"seq\":7,\"time\":1,\"type\":\"compaction/start\",\"data\":{\"compactionId\":\"k1\"}}\n",
        "{\"seq\":9,\"time\":1,\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n",
        "{\"seq\":10,\"time\":1,\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":1}}\n",
    );

    fn replayed(text: &[u8]) -> (Session, Vec<LineProblem>) {
        let (log, _) = parse_whole(text, Path::new("s.jsonl")).unwrap();
        Session::replay(log, Backing::ReadOnly, Arc::default(), Arc::default())
    }

    fn shown(session: &Session, problems: &[LineProblem]) -> (Vec<u64>, Vec<String>) {
        (session.with_events(|e| e.iter().map(|e| e.seq).collect()), problems.iter().map(|p| format!("{p} {:?}", p.kind)).collect())
    }

    /// A session replayed from the first lines of a log, then followed
    /// over the rest, reports what a replay of the whole log reports,
    /// wherever the log is split: the notes that later events settle (a
    /// call awaiting its result, a compaction under way) come and go.
    #[test]
    fn a_followed_session_reports_what_a_whole_replay_reports() {
        let (whole, whole_problems) = replayed(LOG.as_bytes());
        let expected = shown(&whole, &whole_problems);
        assert!(expected.1.iter().any(|p| p.contains("compaction k1")), "{expected:?}");
        assert!(!expected.1.iter().any(|p| p.contains("call c1 has no result")), "{expected:?}");
        let mut settled = false;
        let starts: Vec<usize> = LOG.match_indices('\n').map(|(i, _)| i + 1).collect();
        for &cut in &starts {
            let (log, mut state) = parse_whole(&LOG.as_bytes()[..cut], Path::new("s.jsonl")).unwrap();
            let (session, before) = Session::replay(log, Backing::ReadOnly, Arc::default(), Arc::default());
            let rest = parse_appended(&LOG.as_bytes()[cut..], &mut state).unwrap();
            let appended = Appended { events: rest.events, lines: rest.lines, problems: rest.problems, torn: rest.torn };
            let changed = session.follow_appended(appended).unwrap();
            let after = session.followed_problems().unwrap();
            assert_eq!(changed, after != before, "split after byte {cut}: whether the problems changed");
            assert_eq!(shown(&session, &after), expected, "split after byte {cut}");
            for kind in ["turn/start", "tool/result", "compaction/start", "step/end", "absent"] {
                let scanned = whole.with_events(|e| Some((e.iter().position(|e| e.kind == kind)?, e.iter().rposition(|e| e.kind == kind)?)));
                assert_eq!(session.first_and_last_of(kind), scanned, "split after byte {cut}: {kind}");
            }
            settled |= before.iter().any(|p| p.message.contains("call c1 has no result"));
        }
        assert!(settled, "no split left the call awaiting its result");
        // A session with a writer does not follow.
        let writing = Session::new(whole.header(), Backing::Memory, Arc::default(), Arc::default());
        assert!(writing.follow_appended(Appended::default()).is_none());
    }
}
