//! The HTTP server: security checks, routes, and the live streams.
//!
//! Every request passes, in order:
//! 1. **Host**: the `Host` header must name loopback (`localhost`,
//!    `127.0.0.1`, `::1`), the bound address, or a name given with
//!    `--allow-host`, else 403 (a DNS-rebinding page cannot reach the
//!    server under its own name);
//! 2. **Origin**: a request that carries `Origin` must come from the
//!    server's own origin (`http://NAME:PORT` for the names above) or one
//!    given with `--allow-origin`, else 403;
//! 3. **token** (with `--token`): `Authorization: Bearer TOKEN`, or the
//!    `cordis_web_token` cookie, else 401. Opening any page with
//!    `?token=TOKEN` once sets the cookie (`HttpOnly`, `SameSite=Strict`) and
//!    redirects to the same page without the token;
//! 4. **method**: `GET` and `HEAD` only, else 405: the server is read-only.
//!
//! Routes: `/` the session list, `/live` its stream; `/s/ID` a session
//! (`?before=N` an earlier page), `/s/ID/live` its stream, `/s/ID/text/SEQ`
//! the whole text of one event's message as `text/plain` (`?part=reasoning`
//! its reasoning, `?part=arguments&call=ID` a call's arguments); `/mux` the
//! streams of several pages on one connection; `/assets/app.css`,
//! `/assets/app.js` and `/assets/worker.js`, compiled into the binary. Anything else is 404.
//!
//! Streams are Server-Sent Events. A session stream takes its session's
//! room ([`crate::live`]: one follower of the store per session, shared by
//! every page) and sends, after each change, the items that changed since
//! the last event the page has (by seq), the header and the plan strips
//! (event `update`). The list stream follows every session
//! ([`cordis_session::follow_every_session`]) once for all pages and sends
//! the changed rows (event `rows`), with ids that let a page that connects
//! again get what it missed, or the whole list (event `snapshot`).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use cordis_session::{Store, StoreError};
use cordis_sync::LockExt;

use crate::data::{self, Source, Summary};
use crate::html::{self, decode_segment, dom_id};
use crate::i18n::{self, Lang, Text};
use crate::live::{self, sse};
use crate::render;
use crate::WebError;

/// The stylesheet, compiled in.
const APP_CSS: &str = include_str!("../assets/app.css");
/// The script, compiled in.
const APP_JS: &str = include_str!("../assets/app.js");
/// The shared worker that holds one stream for every page of a browser,
/// compiled in.
const WORKER_JS: &str = include_str!("../assets/worker.js");

/// The cookie that carries the token after `?token=` was given once.
pub const TOKEN_COOKIE: &str = "cordis_web_token";

/// The Content-Security-Policy of every answer: scripts and styles from
/// the server only, nothing inline, no frames, no forms, no other origin.
pub const CSP: &str =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How to serve.
#[derive(Debug, Clone)]
pub struct WebOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The token every request must carry, if any (required to bind an
    /// address other than loopback).
    pub token: Option<String>,
    /// Names accepted in the `Host` header besides loopback and the bound
    /// address.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed besides the server's own
    /// (`scheme://host:port`).
    pub allowed_origins: Vec<String>,
    /// How often a live stream sends a heartbeat (an SSE comment and a
    /// `beat` event), so that proxies keep an idle stream open and the page
    /// can tell a live stream from a silent one.
    pub heartbeat: Duration,
}

/// The heartbeat interval `cordis web` uses unless told otherwise.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// Checks options before binding.
///
/// # Errors
/// [`WebError::Options`]: a non-loopback address without a token, an empty
/// token, a wildcard or malformed `--allow-host`, an origin without its
/// scheme.
pub fn check(options: &WebOptions) -> Result<(), WebError> {
    if options.token.as_deref().is_some_and(str::is_empty) {
        return Err(WebError::Options("--token is empty".into()));
    }
    if !options.addr.ip().is_loopback() && options.token.is_none() {
        return Err(WebError::Options(format!(
            "--http {} is reachable from other machines, and the pages show every session of the store: pass --token (or set CORDIS_WEB_TOKEN), or bind 127.0.0.1",
            options.addr
        )));
    }
    if options.heartbeat < Duration::from_millis(100) || options.heartbeat > Duration::from_secs(3600) {
        return Err(WebError::Options(format!(
            "--heartbeat {} s: give between 0.1 and 3600 seconds (proxies close streams idle for 60 s by default)",
            options.heartbeat.as_secs_f64()
        )));
    }
    for host in &options.allowed_hosts {
        if host.is_empty() || host.contains(['*', '/', ' ', ',']) {
            return Err(WebError::Options(format!(
                "--allow-host {host:?}: give one name or address browsers use in the Host header (e.g. agents.internal or 10.0.0.5); wildcards are not accepted, since they would turn off the DNS rebinding check"
            )));
        }
    }
    for origin in &options.allowed_origins {
        if !(origin.starts_with("http://") || origin.starts_with("https://")) || origin.trim_end_matches('/') != origin {
            return Err(WebError::Options(format!(
                "--allow-origin {origin}: give the scheme, host and port without a path, e.g. http://localhost:3000"
            )));
        }
    }
    Ok(())
}

/// Parses `--http ADDR`: `HOST:PORT` (a name is resolved, its first address
/// taken), `[V6]:PORT`, or a port alone (on 127.0.0.1; 0 picks a free one).
///
/// # Errors
/// [`WebError::Options`] naming the text.
pub fn parse_addr(text: &str) -> Result<SocketAddr, WebError> {
    use std::net::ToSocketAddrs;
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.to_socket_addrs()
        .map_err(|e| WebError::Options(format!("--http {text}: {e} (expected HOST:PORT, e.g. 127.0.0.1:8790, or a port)")))?
        .next()
        .ok_or_else(|| WebError::Options(format!("--http {text}: the name has no address")))
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// A response body fed by a channel: one Server-Sent Events stream.
struct ChannelBody(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

/// The sessions of the store as the list shows them, kept up to date by one
/// follower of every session.
///
/// Every refresh is a new version; the list stream's event ids are
/// `EPOCH.VERSION`, where the epoch names this run of the server. A page
/// that connects again with the id it last had gets the rows of every
/// session changed (or removed) since that version; an id of another run,
/// or one that cannot be read, gets the whole list instead (`snapshot`).
struct Catalog {
    summaries: Mutex<BTreeMap<String, Summary>>,
    /// Sessions that could not be read, with why.
    unreadable: Mutex<BTreeMap<String, String>>,
    ready: tokio::sync::watch::Sender<bool>,
    /// The version of each refresh, with the sessions it read.
    changes: tokio::sync::broadcast::Sender<(u64, Vec<String>)>,
    /// This run of the server: its start, in ms since the epoch.
    epoch: u64,
    /// The last version, and the version of each session's last change,
    /// removed sessions included (one number per session ever seen).
    versions: Mutex<(u64, BTreeMap<String, u64>)>,
}

impl Catalog {
    /// The id of the list's state at `version`.
    fn event_id(&self, version: u64) -> String {
        format!("{}.{version}", self.epoch)
    }

    /// The version a list event id names, when it is one of this run's.
    fn version_of(&self, id: &str) -> Option<u64> {
        let (epoch, version) = id.split_once('.')?;
        let version: u64 = version.parse().ok()?;
        (epoch.parse::<u64>().ok()? == self.epoch && version <= self.versions.lock_or_recover().0).then_some(version)
    }
}

struct Shared {
    source: Source,
    store: Store,
    token: Option<String>,
    hosts: Vec<String>,
    origins: Vec<String>,
    catalog: Catalog,
    rooms: Arc<live::Rooms>,
    heartbeat: Duration,
    stop: Arc<AtomicBool>,
}

/// Serves the store of `source` until `stop` turns true; calls `ready` with
/// the bound address once listening.
///
/// # Errors
/// [`WebError::Options`] when the options are refused, [`WebError::NoStore`]
/// when sessions are kept in memory, [`WebError::Bind`] when the address
/// cannot be bound.
pub async fn serve(
    source: Source,
    options: WebOptions,
    mut stop: tokio::sync::watch::Receiver<bool>,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), WebError> {
    check(&options)?;
    let store = source.sessions.store().cloned().ok_or(WebError::NoStore)?;
    let listener = tokio::net::TcpListener::bind(options.addr).await.map_err(|e| WebError::Bind { addr: options.addr, source: e })?;
    let local = listener.local_addr().map_err(|e| WebError::Bind { addr: options.addr, source: e })?;
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if !local.ip().is_unspecified() {
        hosts.push(local.ip().to_string());
    } else if options.allowed_hosts.is_empty() {
        eprintln!(
            "cordis web: listening on every address, but only loopback names are accepted in the Host header; add --allow-host NAME for each name browsers use"
        );
    }
    hosts.extend(options.allowed_hosts.iter().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()));
    let port = local.port();
    let mut origins: Vec<String> =
        hosts.iter().map(|h| if h.contains(':') { format!("http://[{h}]:{port}") } else { format!("http://{h}:{port}") }).collect();
    origins.extend(options.allowed_origins.iter().map(|o| o.to_ascii_lowercase()));
    let (ready_tx, _) = tokio::sync::watch::channel(false);
    let (changes, _) = tokio::sync::broadcast::channel(64);
    let stop_flag = Arc::new(AtomicBool::new(false));
    let rooms = live::Rooms::new(source.clone(), store.clone(), stop_flag.clone());
    let shared = Arc::new(Shared {
        source,
        store,
        token: options.token.clone(),
        hosts,
        origins,
        catalog: Catalog {
            summaries: Mutex::default(),
            unreadable: Mutex::default(),
            ready: ready_tx,
            changes,
            epoch: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            versions: Mutex::default(),
        },
        rooms,
        heartbeat: options.heartbeat,
        stop: stop_flag,
    });
    let weak = Arc::downgrade(&shared);
    shared.rooms.on_read(Box::new(move |id, snapshot| {
        if let Some(shared) = weak.upgrade() {
            match snapshot {
                Some(snapshot) => publish_row(&shared, id, snapshot),
                // The room is gone: read the session once, in case a change
                // came between its last read and its end.
                None => refresh(&shared, &[id.to_string()]),
            }
        }
    }));
    let follower = shared.clone();
    std::thread::Builder::new()
        .name("cordis-web-store".into())
        .spawn(move || follow_store(&follower))
        .map_err(|e| WebError::Runtime(format!("cannot start the store follower: {e}")))?;
    ready(local);
    loop {
        let (stream, _) = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            },
        };
        let shared = shared.clone();
        let handle = service_fn(move |request: Request<Incoming>| {
            let shared = shared.clone();
            async move { Ok::<_, Infallible>(answer(&shared, request).await) }
        });
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handle);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => if let Err(e) = result { tracing::debug!("HTTP connection: {e}") },
                _ = stop.wait_for(|s| *s) => {}
            }
        });
    }
    shared.stop.store(true, Ordering::Relaxed);
    Ok(())
}

/// Follows every session of the store, keeping the catalog and telling the
/// list streams which sessions changed; follows again when the store is
/// lost (a database restart).
fn follow_store(shared: &Shared) {
    let mut follower: Option<Box<dyn cordis_session::StoreFollower>> = None;
    let mut lost: Option<String> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        let f = match follower.as_mut() {
            Some(f) => f,
            None => match cordis_session::follow_every_session(shared.store.clone()) {
                Ok(f) => follower.insert(f),
                Err(e) => {
                    if lost.replace(e.to_string()).is_none() {
                        eprintln!("cordis web: cannot follow {}: {e}; trying again", shared.store.location());
                    }
                    std::thread::sleep(Duration::from_millis(250));
                    continue;
                }
            },
        };
        match f.wait(Duration::from_millis(500)) {
            Ok(changed) => {
                if lost.take().is_some() {
                    eprintln!("cordis web: following {} again", shared.store.location());
                }
                if !changed.is_empty() {
                    refresh(shared, &changed);
                }
                shared.catalog.ready.send_replace(true);
            }
            Err(e) => {
                if lost.replace(e.to_string()).is_none() {
                    eprintln!("cordis web: lost {}: {e}; following it again", shared.store.location());
                }
                follower = None;
            }
        }
    }
}

/// Reads the sessions `ids` again into the catalog and tells the list
/// streams. A session that has a room is left to it: the room reads it
/// after each change anyway, and hands the catalog its row
/// ([`publish_row`]), so the log is read once per change, not twice.
fn refresh(shared: &Shared, ids: &[String]) {
    let ids: Vec<String> = ids.iter().filter(|id| !shared.rooms.follows(id)).cloned().collect();
    if ids.is_empty() {
        return;
    }
    for id in &ids {
        match shared.source.read(id) {
            Ok((session, problems)) => {
                let summary = data::summarize(&session, &problems);
                shared.catalog.summaries.lock_or_recover().insert(id.clone(), summary);
                shared.catalog.unreadable.lock_or_recover().remove(id);
            }
            Err(StoreError::NotFound { .. }) => {
                shared.catalog.summaries.lock_or_recover().remove(id);
                shared.catalog.unreadable.lock_or_recover().remove(id);
            }
            // An id no stored session can have (asked for by a request
            // for a page that does not exist): nothing to list.
            Err(StoreError::BadId(_) | StoreError::BadIdFor { .. }) => {
                shared.catalog.summaries.lock_or_recover().remove(id);
                shared.catalog.unreadable.lock_or_recover().remove(id);
            }
            // A file caught between two writes, a lost connection: the row
            // keeps what was last read, and says why it could not be read.
            // Only for a session the list holds: a request's id is not
            // remembered on the strength of the request alone.
            Err(e) => {
                if shared.catalog.summaries.lock_or_recover().contains_key(id) {
                    shared.catalog.unreadable.lock_or_recover().insert(id.clone(), format!("session {id}: {e}"));
                }
            }
        }
    }
    announce(shared, &ids);
}

/// Takes a room's new read of session `id` as its row of the list.
fn publish_row(shared: &Shared, id: &str, snapshot: &live::Snapshot) {
    let summary = data::summarize(&snapshot.session, &snapshot.problems);
    shared.catalog.summaries.lock_or_recover().insert(id.to_string(), summary);
    shared.catalog.unreadable.lock_or_recover().remove(id);
    announce(shared, &[id.to_string()]);
}

/// A new version of the list, in which sessions `ids` changed: told to
/// the list streams.
fn announce(shared: &Shared, ids: &[String]) {
    let version = {
        let mut versions = shared.catalog.versions.lock_or_recover();
        versions.0 += 1;
        let version = versions.0;
        for id in ids {
            versions.1.insert(id.clone(), version);
        }
        version
    };
    let _ = shared.catalog.changes.send((version, ids.to_vec()));
}

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The headers every answer carries.
fn harden(response: &mut Response<Body>) {
    let h = response.headers_mut();
    h.entry(header::CONTENT_SECURITY_POLICY).or_insert(HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The query's parameters, percent-decoded (`+` kept as it is).
fn query(request: &Request<Incoming>) -> Vec<(String, String)> {
    parse_query(request.uri().query().unwrap_or_default())
}

/// The parameters of a query string, percent-decoded (`+` kept as it is).
fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((decode_segment(k)?, decode_segment(v)?))
        })
        .collect()
}

fn param<'a>(query: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn cookie(request: &Request<Incoming>, name: &str) -> Option<String> {
    request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| decode_segment(v))
}

/// The host part of a `Host` header value, lower-case, without port or
/// brackets.
fn host_name(value: &str) -> String {
    let value = value.trim();
    let name = if let Some(rest) = value.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        match value.rsplit_once(':') {
            Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
            _ => value,
        }
    };
    name.to_ascii_lowercase()
}

/// The checks every request passes before its route (see the
/// [module](self)); the refusal, if any.
fn guard(shared: &Shared, request: &Request<Incoming>, query: &[(String, String)]) -> Option<Response<Body>> {
    let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).map(host_name);
    match host {
        None => return Some(full(StatusCode::BAD_REQUEST, "text/plain; charset=utf-8", "a Host header is required")),
        Some(h) if !shared.hosts.contains(&h) => {
            return Some(full(
                StatusCode::FORBIDDEN,
                "text/plain; charset=utf-8",
                format!(
                    "the Host {h:?} is not one this server answers to (DNS rebinding protection); start cordis web with --allow-host {h} to serve it"
                ),
            ))
        }
        Some(_) => {}
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
        if !shared.origins.contains(&origin) {
            return Some(full(
                StatusCode::FORBIDDEN,
                "text/plain; charset=utf-8",
                "this origin may not read the sessions (start cordis web with --allow-origin to allow one)",
            ));
        }
    }
    if let Some(token) = &shared.token {
        let bearer = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        let given = bearer.map(str::to_string).or_else(|| cookie(request, TOKEN_COOKIE));
        let ok = given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes()));
        if !ok {
            if let Some(from_query) = param(query, "token") {
                if constant_time_eq(from_query.as_bytes(), token.as_bytes()) {
                    // Remember it, and take it out of the address bar.
                    let rest: Vec<String> = query
                        .iter()
                        .filter(|(k, _)| k != "token")
                        .map(|(k, v)| format!("{}={}", html::path_segment(k), html::path_segment(v)))
                        .collect();
                    let path = request.uri().path();
                    let location = if rest.is_empty() { path.to_string() } else { format!("{path}?{}", rest.join("&")) };
                    let mut response = full(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "");
                    if let Ok(v) = HeaderValue::from_str(&location) {
                        response.headers_mut().insert(header::LOCATION, v);
                    }
                    let cookie = format!("{TOKEN_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict", html::path_segment(token));
                    if let Ok(v) = HeaderValue::from_str(&cookie) {
                        response.headers_mut().insert(header::SET_COOKIE, v);
                    }
                    return Some(response);
                }
            }
            let mut response = full(
                StatusCode::UNAUTHORIZED,
                "text/plain; charset=utf-8",
                "a token is required: open this page once with ?token=TOKEN (the browser then keeps it in a cookie), or send Authorization: Bearer TOKEN",
            );
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Some(response);
        }
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = full(StatusCode::METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", "cordis web is read-only: GET and HEAD only");
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(response);
    }
    None
}

/// The language of a request, and whether the query chose it (the answer
/// then remembers it in a cookie).
fn language(request: &Request<Incoming>, query: &[(String, String)]) -> (Lang, bool) {
    if let Some(lang) = param(query, "lang").and_then(Lang::from_tag) {
        return (lang, true);
    }
    if let Some(lang) = cookie(request, i18n::COOKIE).as_deref().and_then(Lang::from_tag) {
        return (lang, false);
    }
    let accept = request.headers().get(header::ACCEPT_LANGUAGE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    (Lang::from_accept_language(accept).unwrap_or(Lang::En), false)
}

async fn answer(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let query = query(&request);
    let mut response = match guard(shared, &request, &query) {
        Some(refused) => refused,
        None => {
            let (lang, chosen) = language(&request, &query);
            let mut response = route(shared, &request, &query, lang).await;
            if chosen {
                let cookie = format!("{}={}; Path=/; SameSite=Strict", i18n::COOKIE, lang.tag());
                if let Ok(v) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().append(header::SET_COOKIE, v);
                }
            }
            response.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept-Language, Cookie"));
            response
        }
    };
    harden(&mut response);
    response
}

/// The page's own address without `lang`, for the language switch.
fn here(request: &Request<Incoming>, query: &[(String, String)]) -> String {
    let rest: Vec<String> = query
        .iter()
        .filter(|(k, _)| k != "lang" && k != "token")
        .map(|(k, v)| format!("{}={}", html::path_segment(k), html::path_segment(v)))
        .collect();
    if rest.is_empty() {
        request.uri().path().to_string()
    } else {
        format!("{}?{}", request.uri().path(), rest.join("&"))
    }
}

fn page(status: StatusCode, html: String) -> Response<Body> {
    full(status, "text/html; charset=utf-8", html)
}

fn error_page(lang: Lang, status: StatusCode, message: &str) -> Response<Body> {
    let heading = if status == StatusCode::NOT_FOUND { lang.t(Text::NotFound).to_string() } else { status.to_string() };
    page(status, render::page(lang, &heading, "/", &render::error_body(lang, &heading, message), None))
}

fn store_error(lang: Lang, e: &StoreError) -> Response<Body> {
    error_page(lang, store_status(e, StatusCode::INTERNAL_SERVER_ERROR), &e.to_string())
}

/// 404 for a session that is not stored or an id no session can have;
/// `otherwise` for the store's other errors.
fn store_status(e: &StoreError, otherwise: StatusCode) -> StatusCode {
    match e {
        StoreError::NotFound { .. } | StoreError::BadId(_) | StoreError::BadIdFor { .. } => StatusCode::NOT_FOUND,
        _ => otherwise,
    }
}

async fn route(shared: &Arc<Shared>, request: &Request<Incoming>, query: &[(String, String)], lang: Lang) -> Response<Body> {
    let path = request.uri().path();
    match path {
        "/" => return list_page(shared, request, query, lang).await,
        "/live" => {
            let after = request
                .headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .or_else(|| param(query, "after").map(str::to_string));
            return list_live(shared, lang, after);
        }
        "/assets/app.css" => return asset("text/css; charset=utf-8", APP_CSS),
        "/assets/app.js" => return asset("text/javascript; charset=utf-8", APP_JS),
        "/assets/worker.js" => return asset("text/javascript; charset=utf-8", WORKER_JS),
        "/mux" => return mux(shared, query),
        _ => {}
    }
    let Some(rest) = path.strip_prefix("/s/") else { return error_page(lang, StatusCode::NOT_FOUND, &format!("no page at {path}")) };
    let mut parts = rest.split('/');
    let Some(id) = parts.next().and_then(decode_segment).filter(|id| !id.is_empty()) else {
        return error_page(lang, StatusCode::NOT_FOUND, "the session id in the address is malformed");
    };
    let number = |key: &str| param(query, key).and_then(|v| v.parse::<usize>().ok());
    match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => {
            // `?before=N`: the page of events before index N (1 or more; a
            // number past the end is the last page).
            let before = match param(query, "before") {
                None => None,
                Some(v) => match v.parse::<usize>() {
                    Ok(n) if n >= 1 => Some(n),
                    _ => {
                        return error_page(
                            lang,
                            StatusCode::BAD_REQUEST,
                            &format!("?before={v}: expected a whole number of events, 1 or more (the page's \"Earlier events\" link gives one)"),
                        )
                    }
                },
            };
            session_page(shared, request, query, lang, id, before).await
        }
        (Some("live"), None, _) => {
            let after = request
                .headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .or_else(|| param(query, "after").and_then(|v| v.parse().ok()));
            session_live(shared, lang, id, number("from").unwrap_or(0), after)
        }
        (Some("text"), Some(seq), None) => match seq.parse::<u64>() {
            Ok(seq) => {
                let part = match (param(query, "part"), param(query, "call")) {
                    (None | Some("text"), _) => TextPart::Text,
                    (Some("reasoning"), _) => TextPart::Reasoning,
                    (Some("arguments"), Some(call)) => TextPart::Arguments(call.to_string()),
                    (Some(other), _) => {
                        return error_page(lang, StatusCode::NOT_FOUND, &format!("no part {other:?} (text, reasoning, arguments&call=ID)"))
                    }
                };
                event_text(shared, lang, id, seq, part).await
            }
            Err(_) => error_page(lang, StatusCode::NOT_FOUND, &format!("no event {seq:?}")),
        },
        _ => error_page(lang, StatusCode::NOT_FOUND, &format!("no page at {path}")),
    }
}

fn asset(content_type: &'static str, text: &'static str) -> Response<Body> {
    let mut response = full(StatusCode::OK, content_type, text);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

async fn list_page(shared: &Arc<Shared>, request: &Request<Incoming>, query: &[(String, String)], lang: Lang) -> Response<Body> {
    let mut ready = shared.catalog.ready.subscribe();
    if tokio::time::timeout(Duration::from_secs(60), ready.wait_for(|r| *r)).await.is_err() {
        return error_page(lang, StatusCode::SERVICE_UNAVAILABLE, &format!("{} could not be listed in time; try again", shared.store.location()));
    }
    // The version first: a change after it is sent again by the stream.
    let version = shared.catalog.versions.lock_or_recover().0;
    let summaries: Vec<Summary> = shared.catalog.summaries.lock_or_recover().values().cloned().collect();
    let unreadable: Vec<String> = shared.catalog.unreadable.lock_or_recover().values().cloned().collect();
    let body = render::list_body(lang, &summaries, &unreadable);
    let live = format!("/live?lang={}&after={}", lang.tag(), shared.catalog.event_id(version));
    let live = render::Live { url: &live, beat: shared.heartbeat };
    page(StatusCode::OK, render::page(lang, lang.t(Text::Sessions), &here(request, query), &body, Some(live)))
}

/// A stream's answer: `text/event-stream`, neither cached nor transformed
/// (`no-transform` keeps a compressing proxy from holding it back), and
/// `X-Accel-Buffering: no`, which tells nginx to pass each event on as it
/// comes instead of filling its buffer first.
fn stream(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut response = Response::new(ChannelBody(rx).boxed());
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-transform"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// The heartbeat of a quiet stream: a comment, which keeps proxies from
/// closing it as idle, and a `beat` event, which the page counts (a
/// comment never reaches the page's script).
const BEAT: &[u8] = b": heartbeat\nevent: beat\ndata: {}\n\n";

/// The first bytes of every stream: how long the browser waits before it
/// connects again, and a first beat, so the page is live at once.
const OPENING: &[u8] = b"retry: 1000\n\n: heartbeat\nevent: beat\ndata: {}\n\n";

/// The rows of sessions `ids` as the list stream sends them (a removed
/// session as `removed`).
fn rows_of(shared: &Shared, lang: Lang, ids: &[String]) -> Vec<serde_json::Value> {
    let summaries = shared.catalog.summaries.lock_or_recover();
    ids.iter()
        .map(|id| match summaries.get(id) {
            Some(s) => serde_json::json!({"id": dom_id("row-", id), "updated": s.updated, "html": render::list_row(lang, s)}),
            None => serde_json::json!({"id": dom_id("row-", id), "removed": true}),
        })
        .collect()
}

/// One list event with its id.
fn list_event(shared: &Shared, name: &str, version: u64, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("id: {}\nevent: {name}\ndata: {data}\n\n", shared.catalog.event_id(version)))
}

/// Every row, for a page whose state cannot be brought up to date row by
/// row.
fn snapshot(shared: &Shared, lang: Lang) -> Bytes {
    let version = shared.catalog.versions.lock_or_recover().0;
    let summaries: Vec<Summary> = shared.catalog.summaries.lock_or_recover().values().cloned().collect();
    let html = render::list_rows(lang, &summaries);
    list_event(shared, "snapshot", version, &serde_json::json!({ "html": html, "count": summaries.len() }))
}

/// The list's stream. `after` is the last event id the page has (the
/// `Last-Event-ID` of a reconnect, or the page's own state): the rows
/// changed since come first, or the whole list when `after` is not one of
/// this run's ids.
fn list_live(shared: &Arc<Shared>, lang: Lang, after: Option<String>) -> Response<Body> {
    stream(list_feed(shared, lang, after))
}

/// The list's stream as a channel of whole events (see [`list_live`]).
fn list_feed(shared: &Arc<Shared>, lang: Lang, after: Option<String>) -> tokio::sync::mpsc::Receiver<Bytes> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let mut changes = shared.catalog.changes.subscribe();
    let shared = shared.clone();
    tokio::spawn(async move {
        if tx.send(Bytes::from_static(OPENING)).await.is_err() {
            return;
        }
        // What the page missed: subscribed first, so nothing falls between
        // this and the changes that follow (a row sent twice is harmless).
        let missed = after.as_deref().and_then(|id| match shared.catalog.version_of(id) {
            Some(seen) => {
                let (version, ids) = {
                    let versions = shared.catalog.versions.lock_or_recover();
                    let ids: Vec<String> = versions.1.iter().filter(|(_, v)| **v > seen).map(|(id, _)| id.clone()).collect();
                    (versions.0, ids)
                };
                (!ids.is_empty()).then(|| list_event(&shared, "rows", version, &serde_json::json!({ "rows": rows_of(&shared, lang, &ids) })))
            }
            None => Some(snapshot(&shared, lang)),
        });
        if let Some(bytes) = missed {
            if tx.send(bytes).await.is_err() {
                return;
            }
        }
        loop {
            let bytes = tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(shared.heartbeat) => Bytes::from_static(BEAT),
                changed = changes.recv() => match changed {
                    Ok((version, ids)) => list_event(&shared, "rows", version, &serde_json::json!({ "rows": rows_of(&shared, lang, &ids) })),
                    // Fell behind: the whole list.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => snapshot(&shared, lang),
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
            };
            if tx.send(bytes).await.is_err() {
                return;
            }
        }
    });
    rx
}

async fn session_page(
    shared: &Arc<Shared>,
    request: &Request<Incoming>,
    query: &[(String, String)],
    lang: Lang,
    id: String,
    before: Option<usize>,
) -> Response<Body> {
    let here = here(request, query);
    if let Err(e) = stored(shared, &id) {
        return store_error(lang, &e);
    }
    // The page is built from the session's room: one read however many
    // pages open at once, and the stream the page opens next finds it.
    let room = match shared.rooms.join(&id) {
        Ok(room) => room,
        Err(e) => return error_page(lang, StatusCode::SERVICE_UNAVAILABLE, &format!("cannot follow the session: {e}")),
    };
    let mut feed = room.subscribe();
    let ready = tokio::time::timeout(Duration::from_secs(60), feed.wait_for(|f| f.snapshot.is_some() || f.problem.is_some()))
        .await
        .map(|f| f.map(|f| f.clone()));
    let snapshot = match ready {
        Ok(Ok(f)) => match (f.snapshot, f.problem) {
            (Some(s), _) => s,
            (None, Some(e)) => return store_error(lang, &e),
            (None, None) => return error_page(lang, StatusCode::SERVICE_UNAVAILABLE, "the session could not be read"),
        },
        _ => return error_page(lang, StatusCode::SERVICE_UNAVAILABLE, "the session could not be read in time; try again"),
    };
    let worker = shared.clone();
    let beat = shared.heartbeat;
    let built = tokio::task::spawn_blocking(move || {
        let window = data::window(&worker.source, &snapshot.session, &snapshot.problems, before, None);
        let body = render::session_body(lang, &window, &render::title_of(&worker.source));
        let live = window.is_tail().then(|| {
            let after = window.last_seq.map(|s| format!("&after={s}")).unwrap_or_default();
            format!("{}/live?from={}{after}&lang={}", render::session_href(&id), window.start, lang.tag())
        });
        let title = if window.summary.title.is_empty() { id.clone() } else { window.summary.title.clone() };
        render::page(lang, &title, &here, &body, live.as_deref().map(|url| render::Live { url, beat }))
    })
    .await;
    drop(room);
    match built {
        Ok(html) => page(StatusCode::OK, html),
        Err(e) => error_page(lang, StatusCode::INTERNAL_SERVER_ERROR, &format!("the page could not be built: {e}")),
    }
}

/// Checks that session `id` is stored before a room follows it: a request
/// for a session that is not there (or an id no session can have) starts
/// no follower and leaves nothing behind.
///
/// # Errors
/// [`StoreError::NotFound`] when it is not stored; the store's own errors.
fn stored(shared: &Shared, id: &str) -> Result<(), StoreError> {
    if shared.rooms.follows(id) || shared.catalog.summaries.lock_or_recover().contains_key(id) {
        return Ok(());
    }
    if shared.source.exists(id)? {
        Ok(())
    } else {
        Err(StoreError::NotFound { id: id.to_string(), dir: shared.store.location() })
    }
}

fn session_live(shared: &Arc<Shared>, lang: Lang, id: String, from: usize, after: Option<u64>) -> Response<Body> {
    if let Err(e) = stored(shared, &id) {
        return full(store_status(&e, StatusCode::SERVICE_UNAVAILABLE), "text/plain; charset=utf-8", e.to_string());
    }
    match session_feed(shared, lang, id, from, after) {
        Ok(rx) => stream(rx),
        Err(e) => full(StatusCode::SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", format!("cannot follow the session: {e}")),
    }
}

/// A session page's stream as a channel of whole events (see
/// [`view_session`]).
fn session_feed(
    shared: &Arc<Shared>,
    lang: Lang,
    id: String,
    from: usize,
    after: Option<u64>,
) -> std::io::Result<tokio::sync::mpsc::Receiver<Bytes>> {
    let room = shared.rooms.join(&id)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let shared = shared.clone();
    tokio::spawn(async move { view_session(&shared, room, lang, id, from, after, tx).await });
    Ok(rx)
}

/// The most pages one multiplexed stream carries.
const MUX_MAX: usize = 64;

/// `/mux?sub=ADDR&sub=ADDR…`: the streams of several pages on one
/// connection, so that a browser with many pages of the server open holds
/// one stream however many there are (browsers allow six HTTP/1.1
/// connections per host; a stream holds one for as long as it lasts).
/// Each `ADDR` is a page's live address (`/live?…`, `/s/ID/live?…`),
/// percent-encoded. Every event of page `N` (0-based, in the order given)
/// comes as a `mux` event whose data is `{"sub": N, "event": NAME, "id":
/// ID, "data": DATA}`; the beats of the pages come as the stream's own.
fn mux(shared: &Arc<Shared>, query: &[(String, String)]) -> Response<Body> {
    let subs: Vec<&str> = query.iter().filter(|(k, _)| k == "sub").map(|(_, v)| v.as_str()).collect();
    if subs.is_empty() || subs.len() > MUX_MAX {
        return full(
            StatusCode::BAD_REQUEST,
            "text/plain; charset=utf-8",
            format!("give between 1 and {MUX_MAX} sub=ADDR, each a page's live address"),
        );
    }
    let mut feeds = Vec::with_capacity(subs.len());
    for sub in subs {
        match feed_of(shared, sub) {
            Ok(feed) => feeds.push(feed),
            Err(message) => return full(StatusCode::BAD_REQUEST, "text/plain; charset=utf-8", message),
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    // The stream's own retry; each page's opening beat follows.
    if tx.try_send(Bytes::from_static(b"retry: 1000\n\n")).is_err() {
        return full(StatusCode::SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", "cannot open the stream");
    }
    for (n, mut feed) in feeds.into_iter().enumerate() {
        let tx = tx.clone();
        tokio::spawn(async move {
            loop {
                // Ends as soon as the browser goes, not at the page's next
                // event: the page's stream (and its hold on the session's
                // follower) ends with it.
                let bytes = tokio::select! {
                    _ = tx.closed() => return,
                    bytes = feed.recv() => match bytes {
                        Some(bytes) => bytes,
                        None => return,
                    },
                };
                for wrapped in wrap(n, &bytes) {
                    if tx.send(wrapped).await.is_err() {
                        return;
                    }
                }
            }
        });
    }
    stream(rx)
}

/// The stream of the page whose live address is `sub`.
fn feed_of(shared: &Arc<Shared>, sub: &str) -> Result<tokio::sync::mpsc::Receiver<Bytes>, String> {
    let (path, query) = sub.split_once('?').unwrap_or((sub, ""));
    let query = parse_query(query);
    let lang = param(&query, "lang").and_then(Lang::from_tag).unwrap_or(Lang::En);
    if path == "/live" {
        return Ok(list_feed(shared, lang, param(&query, "after").map(str::to_string)));
    }
    let id = path
        .strip_prefix("/s/")
        .and_then(|rest| rest.strip_suffix("/live"))
        .filter(|segment| !segment.contains('/'))
        .and_then(decode_segment)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| format!("sub={sub:?} is not a page's live address (/live?…, /s/ID/live?…)"))?;
    let from = param(&query, "from").and_then(|v| v.parse().ok()).unwrap_or(0);
    let after = param(&query, "after").and_then(|v| v.parse().ok());
    stored(shared, &id).map_err(|e| format!("sub={sub:?}: {e}"))?;
    session_feed(shared, lang, id, from, after).map_err(|e| format!("cannot follow the session: {e}"))
}

/// The events of page `n`'s stream (`bytes`: whole events) as the
/// multiplexed stream sends them: beats as they are, every other event as
/// a `mux` event naming the page; comments and `retry` are left out.
fn wrap(n: usize, bytes: &[u8]) -> Vec<Bytes> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let (mut id, mut name, mut data) = (None, None, None);
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v);
            } else if let Some(v) = line.strip_prefix("event: ") {
                name = Some(v);
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(v);
            }
        }
        match (name, data) {
            (Some("beat"), _) => out.push(Bytes::from_static(BEAT)),
            (Some(name), Some(data)) => {
                let data: serde_json::Value = serde_json::from_str(data).unwrap_or(serde_json::Value::Null);
                out.push(sse("mux", None, &serde_json::json!({"sub": n, "event": name, "id": id, "data": data})));
            }
            _ => {}
        }
    }
    out
}

/// One page's stream of session `id`: from the room's latest snapshot,
/// the items of the page's window (from event index `from`) that changed
/// after seq `after`, with the header and the plans; a beat when nothing
/// was sent for a heartbeat. Holds the room until the page goes away.
async fn view_session(
    shared: &Arc<Shared>,
    room: Arc<live::Room>,
    lang: Lang,
    id: String,
    from: usize,
    mut after: Option<u64>,
    tx: tokio::sync::mpsc::Sender<Bytes>,
) {
    if tx.send(Bytes::from_static(OPENING)).await.is_err() {
        return;
    }
    let mut feed = room.subscribe();
    feed.mark_changed();
    let mut told: Option<String> = None;
    let id = Arc::new(id);
    loop {
        tokio::select! {
            _ = tx.closed() => return,
            _ = tokio::time::sleep(shared.heartbeat) => {
                if tx.send(Bytes::from_static(BEAT)).await.is_err() { return; }
                continue;
            }
            changed = feed.changed() => if changed.is_err() { return },
        }
        let current = feed.borrow_and_update().clone();
        if let Some(problem) = &current.problem {
            let message = problem.to_string();
            if told.as_deref() != Some(&message) {
                if tx.send(live::sse("problem", None, &serde_json::json!({ "message": message }))).await.is_err() {
                    return;
                }
                told = Some(message);
            }
        }
        let Some(snapshot) = current.snapshot else { continue };
        let (worker, id) = (shared.clone(), id.clone());
        let update = tokio::task::spawn_blocking(move || snapshot.update(&worker.source, &id, lang, from, after)).await.ok().flatten();
        if let Some((bytes, last)) = update {
            if tx.send(bytes).await.is_err() {
                return;
            }
            after = last;
        }
    }
}

/// Which text of an event `/s/ID/text/SEQ` answers (`?part=`).
enum TextPart {
    /// The message's text (the default).
    Text,
    /// The reasoning of an assistant's message.
    Reasoning,
    /// The arguments of the call with this id (`?part=arguments&call=ID`).
    Arguments(String),
}

/// The whole text of `part` of event `seq` of session `id`, as plain text:
/// a message's text (a streamed answer's, from the chunk that ends it), an
/// assistant message's reasoning, or a call's arguments.
async fn event_text(shared: &Arc<Shared>, lang: Lang, id: String, seq: u64, part: TextPart) -> Response<Body> {
    let worker = shared.clone();
    let found = tokio::task::spawn_blocking(move || {
        let (session, _) = worker.source.read(&id)?;
        let text = session.with_events(|events| {
            use crate::items::{items, Kind};
            match part {
                TextPart::Text => {
                    let event = events.iter().find(|e| e.seq == seq)?;
                    match cordis_session::event_message(event) {
                        Some(cordis_session::Message::User { text } | cordis_session::Message::Tool { text, .. }) => Some(text),
                        Some(cordis_session::Message::Assistant { text, .. }) => Some(text),
                        None => items(events).into_iter().find_map(|i| match i.kind {
                            Kind::Assistant { text, seq: s, .. } if s == seq && !text.is_empty() => Some(text),
                            _ => None,
                        }),
                    }
                }
                TextPart::Reasoning => items(events).into_iter().find_map(|i| match i.kind {
                    Kind::Assistant { reasoning, seq: s, .. } if s == seq && !reasoning.is_empty() => Some(reasoning),
                    _ => None,
                }),
                TextPart::Arguments(call) => items(events).into_iter().find_map(|i| match i.kind {
                    Kind::Tool(t) if t.seq == seq && t.call_id == call => Some(t.arguments),
                    _ => None,
                }),
            }
        });
        Ok::<_, StoreError>(text)
    })
    .await;
    match found {
        Ok(Ok(Some(text))) => {
            let mut response = full(StatusCode::OK, "text/plain; charset=utf-8", text);
            response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
            response
        }
        Ok(Ok(None)) => error_page(lang, StatusCode::NOT_FOUND, &format!("event {seq} holds no such text")),
        Ok(Err(e)) => store_error(lang, &e),
        Err(e) => error_page(lang, StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(addr: &str, token: Option<&str>) -> WebOptions {
        WebOptions {
            addr: parse_addr(addr).unwrap(),
            token: token.map(str::to_string),
            allowed_hosts: vec![],
            allowed_origins: vec![],
            heartbeat: HEARTBEAT,
        }
    }

    #[test]
    fn a_public_address_needs_a_token() {
        assert!(check(&options("8790", None)).is_ok());
        assert_eq!(parse_addr("8790").unwrap().to_string(), "127.0.0.1:8790");
        let refused = check(&options("0.0.0.0:8790", None)).unwrap_err().to_string();
        assert!(refused.contains("--token"), "{refused}");
        assert!(check(&options("0.0.0.0:8790", Some("t"))).is_ok());
        assert!(check(&options("127.0.0.1:1", Some(""))).is_err());
        let wild = WebOptions { allowed_hosts: vec!["*".into()], ..options("1", None) };
        assert!(check(&wild).is_err());
        let origin = WebOptions { allowed_origins: vec!["example.com".into()], ..options("1", None) };
        assert!(check(&origin).is_err());
    }

    #[test]
    fn host_names_lose_port_and_brackets() {
        assert_eq!(host_name("LocalHost:8790"), "localhost");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("evil.example:1"), "evil.example");
    }
}
