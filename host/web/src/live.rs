//! Followed sessions, shared by every page that shows them.
//!
//! A [`Room`] follows one session for all its viewers: one thread waits on
//! the store's [`cordis_session::store::Follower`], reads the session once
//! when it starts, then after each change only what was appended
//! ([`SessionStore::read_since`](cordis_session::store::SessionStore::read_since)),
//! adds those events to the session it keeps
//! ([`Session::follow_appended`]), and publishes the result as a
//! [`Snapshot`] on a watch channel. Each viewer's stream takes the latest snapshot and sends
//! the items its page lacks; the update sent for a given page start,
//! language and last seq is rendered once per snapshot and shared by every
//! viewer that needs the same one ([`Snapshot::update`]). A viewer that
//! joins gets the room's current snapshot, without reading the log again.
//!
//! The cost of an append is one read of what was appended and the checks
//! of the new events, whatever the number of viewers and however long the
//! log (a log rewritten otherwise than by appends is read whole again);
//! the session list takes the session's row from the same read
//! ([`Rooms::on_read`]). A room lives while anything holds it (a stream, a page being
//! built) and for [`GRACE`] after, so a page load followed by its stream,
//! or a reconnect, reuses it; then its thread ends and the snapshot is
//! freed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cordis_session::store::{Position, Since};
use cordis_session::{LineProblem, Session, Store, StoreError};
use cordis_sync::LockExt;

use crate::data::{self, Source};
use crate::i18n::Lang;
use crate::render;

/// The most events a live page keeps: twice a page, so that a page opened
/// on a full window of [`data::PAGE_EVENTS`] keeps it for as long again.
pub const LIVE_EVENTS: usize = 2 * data::PAGE_EVENTS;

/// How long a room outlives its last viewer.
pub const GRACE: Duration = Duration::from_secs(5);

/// Which page an update is for: its window's first event index, its
/// language, and the seq of the last event it shows.
type PageKey = (usize, Lang, Option<u64>);

/// An update rendered once, shared by every stream that needs it, with
/// the seq of the last event it shows (`None`: the page is up to date).
type Rendered = Arc<OnceLock<Option<(Bytes, Option<u64>)>>>;

/// The session after one read of it: the session the room keeps
/// (replayed read-only, then extended by each read of what was appended),
/// what the replay reported, with the updates rendered from it so far.
pub struct Snapshot {
    /// The session. The room adds later events to the same session, so
    /// it may hold more than `last_seq` by the time it is shown.
    pub session: Arc<Session>,
    /// The lines the replay reported, as of this read (shared with the
    /// reads before it while they do not change).
    pub problems: Arc<Vec<LineProblem>>,
    /// The seq of the last event of this read.
    pub last_seq: Option<u64>,
    /// Rendered updates by (page start, language, the page's last seq).
    updates: Mutex<HashMap<PageKey, Rendered>>,
}

impl Snapshot {
    fn new(session: Arc<Session>, problems: Arc<Vec<LineProblem>>) -> Snapshot {
        let last_seq = session.with_events(|e| e.last().map(|e| e.seq));
        Snapshot { session, problems, last_seq, updates: Mutex::default() }
    }

    /// The `update` event for a page in `lang` whose window starts at event
    /// index `from` and whose last event is `after`: the items changed
    /// since, the header, the plans and the pager, with the seq of the last
    /// event it shows (the page's `after` from then on); `None` when the
    /// page is up to date. Rendered once per snapshot and key; later
    /// callers get the same bytes.
    pub fn update(&self, source: &Source, id: &str, lang: Lang, from: usize, after: Option<u64>) -> Option<(Bytes, Option<u64>)> {
        if self.last_seq.is_none() || self.last_seq == after {
            return None;
        }
        let cell = self.updates.lock_or_recover().entry((from, lang, after)).or_default().clone();
        cell.get_or_init(|| {
            // A page open for long keeps the last `LIVE_EVENTS` events: its
            // window's start moves up, and the page drops the items before
            // it, so neither the update nor the page grows without bound.
            let len = self.session.len();
            let from = from.max(len.saturating_sub(LIVE_EVENTS));
            let window = data::window(source, &self.session, &self.problems, None, Some(from));
            let title_of = render::title_of(source);
            let items: Vec<serde_json::Value> = window
                .items
                .iter()
                .filter(|i| after.is_none_or(|a| i.last > a))
                .map(|i| serde_json::json!({"id": i.id, "html": render::item(lang, id, i, &title_of)}))
                .collect();
            let update = serde_json::json!({
                "items": items,
                "head": render::session_head(lang, &window.summary),
                "plans": render::plans(lang, &window.strips),
                "pager": render::pager(lang, &window),
                "last": window.last_seq,
                "from": window.start,
            });
            Some((sse("update", window.last_seq, &update), window.last_seq))
        })
        .clone()
    }
}

/// Hands the heap freed by a room that ended back to the system. The
/// allocator keeps freed memory for reuse; a long session's snapshot is
/// tens of megabytes in many small blocks, which would otherwise stay in
/// the server's resident size after its last viewer left.
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of glibc's heap to the
    // kernel; it takes no pointer and touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// One Server-Sent Event: `event: NAME`, an optional `id`, and the JSON
/// data on one line.
pub fn sse(name: &str, id: Option<u64>, data: &serde_json::Value) -> Bytes {
    let id = id.map(|i| format!("id: {i}\n")).unwrap_or_default();
    Bytes::from(format!("{id}event: {name}\ndata: {data}\n\n"))
}

/// What a room publishes.
#[derive(Clone, Default)]
pub struct Feed {
    /// The latest read, once there is one.
    pub snapshot: Option<Arc<Snapshot>>,
    /// Why the session cannot be followed or read now, if it cannot.
    pub problem: Option<Arc<StoreError>>,
}

/// One followed session (see the [module](self)).
pub struct Room {
    feed: tokio::sync::watch::Sender<Feed>,
}

impl Room {
    /// A receiver of the room's feed, holding its latest value.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Feed> {
        self.feed.subscribe()
    }
}

/// What a room calls with its session's id after each new read of it
/// (the list takes its row from it), and with `None` when it ends (a
/// change it had not read yet is then the caller's to read).
pub type OnRead = Box<dyn Fn(&str, Option<&Snapshot>) + Send + Sync>;

/// Every room, by session id.
pub struct Rooms {
    source: Source,
    store: Store,
    stop: Arc<AtomicBool>,
    rooms: Mutex<HashMap<String, Weak<Room>>>,
    on_read: OnceLock<OnRead>,
}

impl Rooms {
    /// No rooms yet; rooms read through `source` and follow `store`, and
    /// their threads end once `stop` is true.
    pub fn new(source: Source, store: Store, stop: Arc<AtomicBool>) -> Arc<Rooms> {
        Arc::new(Rooms { source, store, stop, rooms: Mutex::default(), on_read: OnceLock::new() })
    }

    /// Sets what every room calls after each new read of its session (once;
    /// later calls are ignored).
    pub fn on_read(&self, f: OnRead) {
        let _ = self.on_read.set(f);
    }

    /// Whether session `id` has a room that reads it after each change.
    pub fn follows(&self, id: &str) -> bool {
        self.rooms.lock_or_recover().get(id).is_some_and(|r| r.strong_count() > 0)
    }

    /// The number of rooms being followed.
    pub fn len(&self) -> usize {
        self.rooms.lock_or_recover().values().filter(|r| r.strong_count() > 0).count()
    }

    /// Whether no room is followed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The room of session `id`, started when there is none.
    ///
    /// # Errors
    /// When its thread cannot start.
    pub fn join(self: &Arc<Self>, id: &str) -> std::io::Result<Arc<Room>> {
        let mut rooms = self.rooms.lock_or_recover();
        if let Some(room) = rooms.get(id).and_then(Weak::upgrade) {
            return Ok(room);
        }
        let (feed, _) = tokio::sync::watch::channel(Feed::default());
        let room = Arc::new(Room { feed });
        let (rooms_for_thread, held, id_owned) = (self.clone(), room.clone(), id.to_string());
        std::thread::Builder::new().name("cordis-web-room".into()).spawn(move || rooms_for_thread.follow(&id_owned, held))?;
        rooms.insert(id.to_string(), Arc::downgrade(&room));
        Ok(room)
    }

    /// The room's thread: follows session `id`, publishing a snapshot after
    /// each change, until nothing but this thread has held the room for
    /// [`GRACE`].
    fn follow(&self, id: &str, room: Arc<Room>) {
        let mut follower: Option<Box<dyn cordis_session::store::Follower>> = None;
        let mut idle_since: Option<Instant> = None;
        // Read again without waiting for a change: the first time, and
        // after a read that failed (a file caught between two writes).
        let mut pending = true;
        // The last read failed.
        let mut failing = false;
        // Where the last read stopped, and the session it was added to.
        let mut read = Reader { position: Position::start(), session: None, torn: None };
        while !self.stop.load(Ordering::Relaxed) {
            // Nobody holds the room, and it has read every change it saw (or
            // cannot read the session at all: a missing one).
            if Arc::strong_count(&room) == 1 && (!pending || failing) {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= GRACE {
                    let mut rooms = self.rooms.lock_or_recover();
                    // Joining takes the same lock: nobody can take the room
                    // between this check and its removal.
                    if Arc::strong_count(&room) == 1 {
                        if rooms.get(id).is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&room))) {
                            rooms.remove(id);
                        }
                        drop(rooms);
                        drop(room);
                        drop(read);
                        give_back_freed_memory();
                        if let Some(f) = self.on_read.get() {
                            f(id, None);
                        }
                        return;
                    }
                }
            } else {
                idle_since = None;
            }
            if follower.is_none() {
                // Listen first, then read: a change after the read is seen.
                // The first wait says "changed" whatever happened; it is
                // taken here, so one read follows.
                match self.store.follow(id) {
                    Ok(mut f) => {
                        if f.wait(Duration::ZERO).is_ok() {
                            follower = Some(f);
                        }
                    }
                    Err(e) => {
                        if room.feed.borrow().snapshot.is_none() {
                            room.feed.send_modify(|f| f.problem = Some(Arc::new(e)));
                        }
                    }
                }
                pending = true;
            }
            if pending {
                match read.next(&self.source, id) {
                    Ok(next) => {
                        pending = false;
                        failing = false;
                        if let Some(snapshot) = next {
                            if let Some(f) = self.on_read.get() {
                                f(id, Some(&snapshot));
                            }
                            room.feed.send_replace(Feed { snapshot: Some(snapshot), problem: None });
                        }
                    }
                    Err(e) => {
                        failing = true;
                        // A first read that fails says why; a later one keeps
                        // the last snapshot and reads again.
                        if room.feed.borrow().snapshot.is_none() {
                            room.feed.send_modify(|f| f.problem = Some(Arc::new(e)));
                        }
                    }
                }
            }
            let Some(f) = follower.as_mut() else {
                std::thread::sleep(Duration::from_millis(250));
                continue;
            };
            let wait = if pending { Duration::from_millis(50) } else { Duration::from_millis(250) };
            match f.wait(wait) {
                Ok(changed) => pending |= changed,
                Err(_) => {
                    follower = None;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
}

/// A room's reading of its session: where the last read stopped, the
/// session it read (extended by every read since) with its problems, and
/// the torn last line it saw, if any.
struct Reader {
    position: Position,
    session: Option<(Arc<Session>, Arc<Vec<LineProblem>>)>,
    torn: Option<usize>,
}

impl Reader {
    /// Reads what changed since the last read: a snapshot when anything
    /// did, `None` when nothing did.
    fn next(&mut self, source: &Source, id: &str) -> Result<Option<Arc<Snapshot>>, StoreError> {
        let (since, position) = source.read_since(id, &self.position)?;
        match since {
            Since::Appended(mut appended) => {
                let Some((session, problems)) = self.session.as_mut() else {
                    // A read from the start is whole: a store that says
                    // otherwise breaks the contract of `read_since`.
                    self.position = Position::start();
                    return Err(StoreError::Corrupt { path: id.to_string(), detail: "the store's first read of the session was not whole".into() });
                };
                let torn = appended.torn.take().map(|(line, _)| line);
                if appended.is_empty() && torn == self.torn {
                    self.position = position;
                    return Ok(None);
                }
                if !appended.is_empty() {
                    // The session was replayed read-only, so it follows.
                    let Some(changed) = session.follow_appended(appended) else {
                        self.position = Position::start();
                        self.session = None;
                        return Err(StoreError::Corrupt { path: id.to_string(), detail: "the followed session was not replayed read-only".into() });
                    };
                    if changed {
                        *problems = Arc::new(session.followed_problems().unwrap_or_default());
                    }
                }
                self.position = position;
                self.torn = torn;
                Ok(Some(Arc::new(Snapshot::new(session.clone(), with_torn(problems, torn)))))
            }
            Since::Whole(mut log) => {
                let torn = log.torn.take().map(|(line, _)| line);
                let (session, problems) = source.replay(log);
                let (session, problems) = (Arc::new(session), Arc::new(problems));
                let snapshot = Snapshot::new(session.clone(), with_torn(&problems, torn));
                // A whole read of an unchanged log (a follower that woke for
                // nothing the first read did not see) publishes nothing.
                let unchanged = self.session.as_ref().is_some_and(|(old, old_problems)| {
                    old.with_events(|e| e.last().map(|e| e.seq)) == snapshot.last_seq && old_problems.len() == problems.len() && self.torn == torn
                });
                self.position = position;
                self.session = Some((session, problems));
                self.torn = torn;
                Ok((!unchanged).then(|| Arc::new(snapshot)))
            }
        }
    }
}

/// `problems`, with a torn last line at `torn` reported (a copy only
/// then).
fn with_torn(problems: &Arc<Vec<LineProblem>>, torn: Option<usize>) -> Arc<Vec<LineProblem>> {
    match torn {
        None => problems.clone(),
        Some(line) => {
            let mut all = problems.to_vec();
            all.push(data::torn_problem(line));
            Arc::new(all)
        }
    }
}
