//! `cordis session watch (ID | --all)`: a session's projections (the plan)
//! printed again after every event they fold, following the store.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use cordis_engine::runtime::Host;
use cordis_session::store::{Position, Since};
use cordis_session::{Backing, Session, Store, StoreError};

use crate::cli::boot::boot_for_sessions;
use crate::cli::{render, Cli, CliError};

/// Follows session `session`, or every session when `None`.
///
/// # Errors
/// Exit 2 when the store cannot be opened or keeps sessions in memory.
pub fn run(cli: &Cli, session: Option<&str>, resume_within: Duration) -> Result<ExitCode, CliError> {
    let host = boot_for_sessions(cli)?;
    watch(&host, session, resume_within)
}

/// Adapts a one-session [`Follower`](cordis_session::store::Follower) to the
/// every-session shape.
struct OneSession {
    id: String,
    follower: Box<dyn cordis_session::store::Follower>,
}

impl cordis_session::StoreFollower for OneSession {
    fn wait(&mut self, timeout: Duration) -> Result<Vec<String>, cordis_session::StoreError> {
        Ok(if self.follower.wait(timeout)? { vec![self.id.clone()] } else { Vec::new() })
    }
}

/// `cordis session watch`: prints the projections of one session (`id`),
/// or of every session (`None`), once, then again after every change that
/// a projection folds, until interrupted. When the store is lost, it
/// follows again (listening before it reads everything after what it
/// showed) for up to `resume_within`, then gives up with exit status 1.
fn watch(host: &Host, id: Option<&str>, resume_within: Duration) -> Result<ExitCode, CliError> {
    let sessions = &host.services.sessions;
    let Some(store) = sessions.store() else { return Err("sessions are kept in memory here; there is nothing to watch".to_string().into()) };
    let follow = || -> Result<Box<dyn cordis_session::StoreFollower>, cordis_session::StoreError> {
        match id {
            Some(id) => Ok(Box::new(OneSession { id: id.to_string(), follower: store.follow(id)? })),
            None => cordis_session::follow_every_session(store.clone()),
        }
    };
    let what = id.map_or_else(|| format!("the sessions of {}", store.location()), |id| format!("session {}", render::printable(id)));
    let mut follower = Some(follow().map_err(|e| e.to_string())?);
    // `watch ID` keeps its session and reads only what is appended to it;
    // `--all` reads each changed session whole (keeping every session of
    // a store in memory would cost more than the reads).
    let mut kept: Option<Option<(Position, Session)>> = id.map(|_| None);
    // The last folded seq drawn, per session.
    let mut shown: std::collections::BTreeMap<String, Option<u64>> = Default::default();
    let mut pending: std::collections::BTreeSet<String> = Default::default();
    // Since when the store has been lost, and the last error.
    let mut down: Option<(std::time::Instant, String)> = None;
    let mut out = std::io::stdout().lock();
    loop {
        if let Some((since, error)) = &down {
            if since.elapsed() >= resume_within {
                eprintln!("cordis session watch: cannot follow {what} again after {} s: {error}", resume_within.as_secs());
                return Ok(ExitCode::FAILURE);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if follower.is_none() {
            match follow() {
                Ok(f) => follower = Some(f),
                Err(e) => {
                    down.get_or_insert_with(|| (std::time::Instant::now(), String::new())).1 = e.to_string();
                    continue;
                }
            }
        }
        let Some(f) = follower.as_mut() else { continue };
        match f.wait(Duration::from_secs(1)) {
            Ok(changed) => pending.extend(changed),
            Err(e) => {
                if down.is_none() {
                    eprintln!("warning: {e}; following {what} again");
                }
                down.get_or_insert_with(|| (std::time::Instant::now(), String::new())).1 = e.to_string();
                follower = None;
                continue;
            }
        }
        let mut failed = None;
        for id in pending.clone() {
            // A session read whole (`--all`) lives here while it is drawn.
            let whole: Session;
            let read = match kept.as_mut() {
                Some(kept) => read_on(host, store, &id, kept),
                None => match sessions.view(&id) {
                    Ok((session, _)) => {
                        whole = session;
                        Ok(&whole)
                    }
                    Err(e) => Err(e),
                },
            };
            match read {
                Ok(session) => {
                    pending.remove(&id);
                    if draw(&mut out, host, &id, session, shown.entry(id.clone()).or_default()).is_err() {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
                // A session removed while followed.
                Err(cordis_session::StoreError::NotFound { .. }) => {
                    pending.remove(&id);
                }
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            }
        }
        match failed {
            // A file between two writes reads as damaged for a moment, and a
            // lost connection fails the read: keep the session pending and
            // read it again, on a new follower if the store was lost.
            Some(e) => {
                down.get_or_insert_with(|| (std::time::Instant::now(), String::new())).1 = e;
            }
            None => {
                if down.take().is_some() {
                    eprintln!("following {what} again");
                }
            }
        }
    }
}

/// Session `id` as `kept` holds it, extended by what was appended since it
/// was read (read whole the first time, and when the log changed
/// otherwise than by appends).
///
/// # Errors
/// The store's.
fn read_on<'a>(host: &Host, store: &Store, id: &str, kept: &'a mut Option<(Position, Session)>) -> Result<&'a Session, StoreError> {
    let at = kept.as_ref().map_or_else(Position::start, |(position, _)| position.clone());
    let (since, next) = store.read_since(id, &at)?;
    let (position, session) = match (since, kept.take()) {
        (Since::Appended(appended), Some((_, session))) => {
            // The kept session was replayed read-only, so it follows.
            if !appended.is_empty() {
                let _ = session.follow_appended(appended);
            }
            (next, session)
        }
        (Since::Whole(log), _) => {
            let (session, _) = Session::replay(log, Backing::ReadOnly, host.services.events.clone(), host.services.projections.clone());
            (next, session)
        }
        // A store's first read is whole; one that is not is read again
        // from the start.
        (Since::Appended(_), None) => {
            let (Since::Whole(log), next) = store.read_since(id, &Position::start())? else {
                return Err(StoreError::Corrupt { path: id.to_string(), detail: "the store's first read of the session was not whole".into() });
            };
            let (session, _) = Session::replay(log, Backing::ReadOnly, host.services.events.clone(), host.services.projections.clone());
            (next, session)
        }
    };
    Ok(&kept.insert((position, session)).1)
}

/// Draws session `id`'s projections when the last event they fold is not
/// the one drawn last (`shown`).
///
/// # Errors
/// When stdout is closed.
fn draw(out: &mut impl Write, host: &Host, id: &str, session: &Session, shown: &mut Option<u64>) -> std::io::Result<()> {
    let projections = host.services.projections.all();
    let folded = session.with_events(|events| events.iter().rev().find(|e| projections.iter().any(|p| p.folds(&e.kind))).map(|e| (e.seq, e.time)));
    let key = folded.map_or(u64::MAX, |f| f.0);
    if *shown == Some(key) {
        return Ok(());
    }
    *shown = Some(key);
    let at = folded.map_or_else(|| "no plan yet".to_string(), |(seq, time)| format!("seq {seq}, {}", render::format_time(time)));
    writeln!(out, "── session {} · {} · {at}", render::printable(id), render::count(session.len(), "event", "events"))?;
    for (p, state) in session.states() {
        let view = p.render(&state);
        writeln!(out, "{}:", p.key)?;
        if view.is_empty() {
            writeln!(out, "  (none)")?;
        }
        for line in view.lines() {
            writeln!(out, "  {}", render::printable(line))?;
        }
    }
    out.flush()
}
