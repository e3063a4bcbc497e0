//! What the pages show, read through the host: a session's summary for the
//! list, and a window of a session (one page of its events) with the
//! projection states folded up to the window's last event.
//!
//! Everything is read with the `sessions` service's `view` (the store's
//! `read`, replayed as `cordis session show` replays it: owners' validators,
//! structure rules), so a page shows what the host derives, and never locks
//! or changes a session.

use std::sync::Arc;

use cordis_engine::context::Services;
use cordis_engine::tools::ToolRegistry;
use cordis_session::log::Backing;
use cordis_session::projection::Projections;
use cordis_session::store::{Position, ReadLog, Since};
use cordis_session::{EventTypes, LineProblem, Session, Sessions, StoreError};
use serde_json::Value;

use crate::items::{items, Item};
use crate::plan::{plan_of, Counts};

/// The events one page shows at most.
pub const PAGE_EVENTS: usize = 400;

/// The characters of a session's first prompt kept as its title.
const TITLE_CHARS: usize = 200;

/// The host's services the pages read.
#[derive(Clone)]
pub struct Source {
    /// `sessions`: the store.
    pub sessions: Arc<Sessions>,
    /// Owned event types (replay checks them).
    pub types: Arc<EventTypes>,
    /// Projections (plans).
    pub projections: Arc<Projections>,
    /// Tools, for how a call presents itself.
    pub tools: Arc<ToolRegistry>,
}

impl Source {
    /// The services of a booted host.
    pub fn of(services: &Services) -> Source {
        Source {
            sessions: services.sessions.clone(),
            types: services.events.clone(),
            projections: services.projections.clone(),
            tools: services.tools.clone(),
        }
    }

    /// Reads session `id` (see the [module](self)).
    ///
    /// # Errors
    /// The store's: [`StoreError::NotFound`], [`StoreError::BadId`], I/O.
    pub fn read(&self, id: &str) -> Result<(Session, Vec<LineProblem>), StoreError> {
        // The store's own read, never `view`, which would also open a path
        // on disk: a page names stored sessions only.
        let log = self.store(id)?.read(id)?;
        Ok(self.replay(log))
    }

    /// Reads what was appended to session `id` after `after` (the store's
    /// [`SessionStore::read_since`](cordis_session::store::SessionStore::read_since)).
    ///
    /// # Errors
    /// As [`Source::read`].
    pub fn read_since(&self, id: &str, after: &Position) -> Result<(Since, Position), StoreError> {
        self.store(id)?.read_since(id, after)
    }

    /// Whether session `id` is stored, without reading it: its log file
    /// for the file stores, the store's list of sessions otherwise.
    ///
    /// # Errors
    /// [`StoreError::BadId`] for an id the store could not hold; the
    /// store's own when it cannot be asked.
    pub fn exists(&self, id: &str) -> Result<bool, StoreError> {
        let store = self.store(id)?;
        match store.log_file(id) {
            Some(path) => Ok(path.is_file()),
            None => Ok(store.ids()?.iter().any(|known| known == id)),
        }
    }

    /// The session's store, once `id` is checked against it.
    fn store(&self, id: &str) -> Result<&cordis_session::Store, StoreError> {
        let Some(store) = self.sessions.store() else {
            return Err(StoreError::NotFound { id: id.to_string(), dir: "memory".into() });
        };
        store.check_id(id)?;
        Ok(store)
    }

    /// Replays a log read whole, read-only (so that it can follow what is
    /// appended: [`Session::follow_appended`]); a torn last line is
    /// reported as skipped.
    pub fn replay(&self, mut log: ReadLog) -> (Session, Vec<LineProblem>) {
        let torn = log.torn.take();
        let (session, mut problems) = Session::replay(log, Backing::ReadOnly, self.types.clone(), self.projections.clone());
        if let Some((line, _)) = torn {
            problems.push(torn_problem(line));
        }
        (session, problems)
    }
}

/// What a page says of a torn last line at `line`: a line the writer is
/// writing (or stopped writing) that was not read.
pub fn torn_problem(line: usize) -> LineProblem {
    LineProblem::skipped(line, "torn last line (the writer stopped mid-line)")
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// No events yet.
    Empty,
    /// A turn is open (being written, or left open by a writer that
    /// stopped).
    Running,
    /// The last turn completed.
    Completed,
    /// The last turn was interrupted.
    Interrupted,
    /// The last turn failed (or ended for another reason).
    Failed,
}

/// One session in the list.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The id.
    pub id: String,
    /// The last `session/title` event's title, else the first prompt (one
    /// line, at most 200 characters, then `…`); empty when there is
    /// neither.
    pub title: String,
    /// The last event's time, else the creation time (ms since the epoch).
    pub updated: i64,
    /// Where it stands.
    pub status: Status,
    /// Events in the log.
    pub events: usize,
    /// The counts of each plan projection that holds a plan now.
    pub plans: Vec<Counts>,
    /// Lines the replay reported (unreadable, or breaking a rule).
    pub problems: usize,
}

/// The status of `session`.
pub fn status(session: &Session) -> Status {
    if session.open_turn().is_some() {
        return Status::Running;
    }
    let last_end = session.first_and_last_of("turn/end").map(|(_, last)| last);
    session.with_events(|events| {
        let Some(end) = last_end.and_then(|i| events.get(i)) else {
            return if events.is_empty() { Status::Empty } else { Status::Completed };
        };
        let data: Value = serde_json::from_str(end.data.get()).unwrap_or(Value::Null);
        match data["reason"]["kind"].as_str() {
            Some("completed") | None => Status::Completed,
            Some("interrupted") => Status::Interrupted,
            Some(_) => Status::Failed,
        }
    })
}

/// The summary of `session` read with `problems`.
pub fn summarize(session: &Session, problems: &[LineProblem]) -> Summary {
    // Where the titles and the first prompt are, known without a pass
    // over the log for a session followed read-only.
    let titles = session.first_and_last_of("session/title");
    let prompt = session.first_and_last_of("user/message").map(|(first, _)| first);
    let (title, updated, events) = session.with_events(|events| {
        let title_of = |e: &cordis_session::Event| serde_json::from_str::<Value>(e.data.get()).ok()?.get("title")?.as_str().map(str::to_string);
        let titled = titles.and_then(|(first, last)| {
            // The last title event's title; when it has none, the last
            // one before it that has.
            title_of(events.get(last)?).or_else(|| events.get(first..last)?.iter().rev().filter(|e| e.kind == "session/title").find_map(title_of))
        });
        let title = titled.or_else(|| {
            prompt.and_then(|i| events.get(i)).and_then(|e| match cordis_session::event_message(e) {
                Some(cordis_session::Message::User { text }) => Some(text),
                _ => None,
            })
        });
        let title = crate::html::one_line(&title.unwrap_or_default());
        // A cut title ends with an ellipsis, so it reads as cut.
        let title = match crate::html::cut(&title, TITLE_CHARS) {
            (shown, true) => format!("{}…", shown.trim_end()),
            (shown, false) => shown.to_string(),
        };
        (title, events.last().map(|e| e.time), events.len())
    });
    let created = i64::try_from(session.header().created_at).unwrap_or(i64::MAX);
    let plans = session.states().iter().filter_map(|(_, state)| plan_of(&serde_json::from_str(state).ok()?)).map(|p| Counts::of(&p)).collect();
    Summary {
        id: session.id().to_string(),
        title,
        updated: updated.unwrap_or(created),
        status: status(session),
        events,
        plans,
        problems: problems.len(),
    }
}

/// One plan strip: the projection's key and its plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Strip {
    /// The projection's key (`todos`).
    pub key: String,
    /// The plan.
    pub plan: Vec<crate::plan::Item>,
}

/// One page of a session.
#[derive(Debug, Clone)]
pub struct Window {
    /// The session's summary.
    pub summary: Summary,
    /// Index of the first event shown.
    pub start: usize,
    /// One past the last event shown.
    pub end: usize,
    /// The seq of the last event shown (`None` for an empty window).
    pub last_seq: Option<u64>,
    /// The conversation of events `start..end`.
    pub items: Vec<Item>,
    /// The plan projections, folded over events `0..end`.
    pub strips: Vec<Strip>,
}

impl Window {
    /// Whether this is the session's last page (the one that updates live).
    pub fn is_tail(&self) -> bool {
        self.end == self.summary.events
    }
}

/// The page of `session` ending before event index `before` (the last page
/// when `None`; clamped to the log), [`PAGE_EVENTS`] long, its items built
/// from `from` instead of the page's own start when given (a live page
/// keeps the start it was first shown with).
pub fn window(source: &Source, session: &Session, problems: &[LineProblem], before: Option<usize>, from: Option<usize>) -> Window {
    let summary = summarize(session, problems);
    let total = summary.events;
    let end = before.map_or(total, |b| b.min(total));
    let start = from.map_or(end.saturating_sub(PAGE_EVENTS), |f| f.min(end));
    let (built, last_seq) = session.with_events(|events| (items(&events[start..end]), events[..end].last().map(|e| e.seq)));
    let states = if end == total {
        session.states()
    } else {
        // The plan at the page's last event: a replay of the log up to it,
        // folded by the host's projections.
        let (header, events) = (session.header(), session.with_events(|e| e[..end].to_vec()));
        let lines = (2..events.len() + 2).collect();
        let log = ReadLog { header, events, lines, problems: Vec::new(), torn: None, unterminated: None };
        let (prefix, _) = Session::replay(log, Backing::ReadOnly, source.types.clone(), source.projections.clone());
        prefix.states()
    };
    let strips = states
        .into_iter()
        .filter_map(|(p, state)| {
            // No strip when the projection holds no plan at this point (a
            // new turn clears `todos`), or is not a plan.
            let value: Value = serde_json::from_str(&state).ok()?;
            plan_of(&value).map(|plan| Strip { key: p.key.clone(), plan })
        })
        .collect();
    Window { summary, start, end, last_seq, items: built, strips }
}
