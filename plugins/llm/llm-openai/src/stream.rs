//! One streamed request: a worker thread that sends it (retrying what may
//! be retried), reads the answer's Server-Sent Events and queues the
//! provider events they carry, and the queue the `model` service's `next`
//! drains.
//!
//! Failures end the stream with one `error` event (`kind`, `message`,
//! `status`?) and never panic or hang: every network wait is bounded by
//! `requestTimeoutMs` (connecting, the response's headers, and each gap
//! between two reads of the body), every retry by [`MAX_RETRY_WAIT`], and a
//! cancelled stream stops at its next read.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use eventsource_stream::{EventStreamError, Eventsource};
use serde_json::{json, Value};

use crate::wire::{self, Chunk};

/// The longest wait for a retry this plugin accepts: a server asking for a
/// longer one (`Retry-After`) fails the request at once, with its wait in
/// the message.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// The first retry's wait when the server gives none; it doubles per retry,
/// and each wait is drawn between half of it and all of it ([`backoff`]).
pub const BASE_BACKOFF: Duration = Duration::from_millis(500);

/// The wait before retry `attempt` (0 for the first) when the server asks
/// for none: `BASE_BACKOFF × 2^attempt`, with "equal jitter" (a random
/// point between half of that and all of it), so that clients refused
/// together do not come back together.
pub fn backoff(attempt: u32) -> Duration {
    let full = BASE_BACKOFF.saturating_mul(1 << attempt.min(16));
    full / 2 + full.mul_f64(random_unit() / 2.0)
}

/// A random number in [0, 1), from the standard library's randomly seeded
/// hasher (no generator is kept; retries are rare).
fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Where and how requests go.
pub struct Endpoint {
    /// `{baseUrl}/chat/completions`.
    pub url: String,
    /// The API key, read from the environment at `apply`; never printed.
    api_key: Option<String>,
    /// The name of the environment variable the key came from.
    pub key_env: Option<String>,
    /// `requestTimeoutMs`.
    pub timeout: Duration,
    /// Retries after HTTP 429, 5xx, or a failed connection.
    pub max_retries: u32,
    /// Whether a request needs a key: when none was read at `apply`, each
    /// request reads `key_env` again and fails, naming it, while it is
    /// unset.
    key_required: bool,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never shown, only whether there is one.
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("key_env", &self.key_env)
            .field("has_key", &self.api_key.is_some())
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

impl Endpoint {
    /// An endpoint for `url`. A loopback host is reached directly, whatever
    /// proxy the environment names.
    pub fn new(url: String, api_key: Option<String>, key_env: Option<String>, timeout: Duration, max_retries: u32) -> Endpoint {
        let loopback = is_loopback(&url);
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(timeout))
            .timeout_recv_response(Some(timeout))
            .timeout_per_read(Some(timeout))
            .user_agent(concat!("cordis-llm-openai/", env!("CARGO_PKG_VERSION")));
        if loopback {
            config = config.proxy(None);
        }
        Endpoint { url, api_key, key_env, timeout, max_retries, key_required: false, agent: config.build().into() }
    }

    /// This endpoint, needing a key: without one read at `apply`, each
    /// request reads the variable again, and fails while it is unset.
    pub fn key_required(mut self) -> Endpoint {
        self.key_required = true;
        self
    }
}

fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The events of one stream, queued for `next`.
#[derive(Default)]
pub struct StreamState {
    queue: Mutex<Queue>,
    ready: Condvar,
    cancelled: AtomicBool,
}

#[derive(Default)]
struct Queue {
    events: VecDeque<Value>,
    done: bool,
}

impl StreamState {
    fn push(&self, event: Value) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.events.push_back(event);
        self.ready.notify_all();
    }

    fn finish(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.done = true;
        self.ready.notify_all();
    }

    fn fail(&self, kind: &str, status: Option<u16>, message: String) {
        let mut event = json!({"type": "error", "kind": kind, "message": message});
        if let Some(s) = status {
            event["status"] = json!(s);
        }
        self.push(event);
        self.finish();
    }

    /// Stops the stream: the worker gives up at its next read or wait.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.finish();
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Waits up to `wait` for events, then takes at most `max` of them;
    /// returns them and whether the stream has ended with nothing left.
    pub fn take(&self, wait: Duration, max: usize) -> (Vec<Value>, bool) {
        let deadline = Instant::now() + wait;
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        while q.events.is_empty() && !q.done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = self.ready.wait_timeout(q, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        let n = q.events.len().min(max);
        let events: Vec<Value> = q.events.drain(..n).collect();
        let done = q.done && q.events.is_empty();
        (events, done)
    }
}

/// Starts the worker thread for one request with JSON `body`.
///
/// # Errors
/// When the thread cannot be started.
pub fn spawn(endpoint: Arc<Endpoint>, body: String, state: Arc<StreamState>) -> std::io::Result<()> {
    std::thread::Builder::new().name("llm-openai-stream".into()).spawn(move || {
        // A panic here must not take the host down: it ends the stream.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&endpoint, &body, &state)));
        if outcome.is_err() {
            state.fail("internal", None, "the llm-openai stream worker failed unexpectedly".into());
        }
        state.finish();
    })?;
    Ok(())
}

/// Sleeps `wait`, waking early when the stream is cancelled; returns
/// whether it was.
fn sleep_unless_cancelled(state: &StreamState, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if state.is_cancelled() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20).min(deadline.saturating_duration_since(Instant::now())));
    }
    state.is_cancelled()
}

fn run(endpoint: &Endpoint, body: &str, state: &StreamState) {
    let url = &endpoint.url;
    let mut attempt = 0u32;
    loop {
        if state.is_cancelled() {
            return;
        }
        let mut request = endpoint.agent.post(url).header("Content-Type", "application/json").header("Accept", "text/event-stream");
        let late_key = match (&endpoint.api_key, &endpoint.key_env) {
            (None, Some(var)) if endpoint.key_required => match std::env::var(var).map(|k| k.trim().to_string()) {
                Ok(key) if !key.is_empty() => Some(key),
                _ => return state.fail("auth", None, format!("no API key for the model API at {url}: export it in ${var} (apiKeyEnv)")),
            },
            _ => None,
        };
        if let Some(key) = endpoint.api_key.as_ref().or(late_key.as_ref()) {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let retry: (String, Option<Duration>, &str, Option<u16>, String) = match request.send(body) {
            Err(e) if is_timeout(&e) => {
                return state.fail(
                    "timeout",
                    None,
                    format!("no answer from the model API at {url} within {} ms (requestTimeoutMs)", endpoint.timeout.as_millis()),
                );
            }
            Err(e) => {
                ("connection failed".into(), None, "connection", None, format!("cannot reach the model API at {url}: {}", transport_message(&e)))
            }
            Ok(response) => {
                let status = response.status().as_u16();
                if (200..300).contains(&status) {
                    return read_stream(endpoint, response, state);
                }
                let headers = response.headers().clone();
                let text = response.into_body().with_config().limit(64 * 1024).read_to_string().unwrap_or_default();
                let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                let server =
                    if parsed.is_null() { wire::clip(text.trim(), 300) } else { wire::error_message(parsed.get("error").unwrap_or(&parsed)) };
                match status {
                    401 | 403 => {
                        // The server's text is not repeated: some echo part
                        // of the key they refused.
                        let message = match &endpoint.key_env {
                            Some(var) => format!("the model API at {url} refused the API key (HTTP {status}): check the key in ${var} (apiKeyEnv)"),
                            None => format!(
                                "the model API at {url} asks for an API key (HTTP {status}): set apiKeyEnv to the environment variable that holds it"
                            ),
                        };
                        return state.fail("auth", Some(status), message);
                    }
                    429 | 500..=599 => {
                        let (what, kind) = if status == 429 { ("is rate-limiting requests", "rate-limit") } else { ("failed", "server") };
                        (
                            format!("HTTP {status}"),
                            retry_after(&headers),
                            kind,
                            Some(status),
                            format!(
                                "the model API at {url} {what} (HTTP {status}){}",
                                if server.is_empty() { String::new() } else { format!(": {server}") }
                            ),
                        )
                    }
                    _ if wire::is_context_length(&parsed) => {
                        return state.fail(
                            "context-length",
                            Some(status),
                            format!("the conversation does not fit the model's context window (HTTP {status} from {url}): {server}"),
                        );
                    }
                    _ => {
                        return state.fail("http", Some(status), format!("the model API at {url} refused the request (HTTP {status}): {server}"));
                    }
                }
            }
        };
        let (reason, asked, kind, status, message) = retry;
        if attempt >= endpoint.max_retries {
            let tries = if endpoint.max_retries == 0 {
                String::new()
            } else {
                format!(" (gave up after {} {})", endpoint.max_retries, if endpoint.max_retries == 1 { "retry" } else { "retries" })
            };
            let wanted = match asked {
                Some(wait) => format!("; its last answer asked to wait {:.1} s before retrying", wait.as_secs_f64()),
                None => String::new(),
            };
            return state.fail(kind, status, format!("{message}{tries}{wanted}"));
        }
        let wait = asked.unwrap_or_else(|| backoff(attempt));
        if wait > MAX_RETRY_WAIT {
            return state.fail(
                kind,
                status,
                format!("{message}; it asks to retry after {} s, longer than the {} s this plugin waits", wait.as_secs(), MAX_RETRY_WAIT.as_secs()),
            );
        }
        attempt += 1;
        state.push(
            json!({"type": "retry", "attempt": attempt, "retries": endpoint.max_retries, "delayMs": wait.as_millis() as u64, "reason": reason}),
        );
        if sleep_unless_cancelled(state, wait) {
            return;
        }
    }
}

/// The wait a 429 or 5xx answer asks for: `retry-after-ms` (milliseconds,
/// OpenAI), else `Retry-After` as RFC 9110 gives it, seconds or an HTTP
/// date (a date already past asks for no wait).
fn retry_after(headers: &ureq::http::HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let number = |name: &str| text(name).and_then(|v| v.parse::<f64>().ok()).filter(|n| n.is_finite() && *n >= 0.0);
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(1e6)));
    }
    if let Some(seconds) = number("retry-after") {
        return Some(Duration::from_secs_f64(seconds.min(1e6)));
    }
    let date = httpdate::parse_http_date(text("retry-after")?).ok()?;
    Some(date.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock),
        _ => false,
    }
}

fn transport_message(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    }
}

/// The body's bytes as they arrive, one read at a time.
struct Reads<R> {
    reader: R,
    buf: Vec<u8>,
    ended: bool,
}

impl<R: Read> Iterator for Reads<R> {
    type Item = Result<Vec<u8>, std::io::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        match self.reader.read(&mut self.buf) {
            Ok(0) => {
                self.ended = true;
                None
            }
            Ok(n) => Some(Ok(self.buf[..n].to_vec())),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Some(Ok(Vec::new())),
            Err(e) => {
                self.ended = true;
                Some(Err(e))
            }
        }
    }
}

fn io_is_timeout(e: &std::io::Error) -> bool {
    if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) {
        return true;
    }
    e.get_ref().and_then(|inner| inner.downcast_ref::<ureq::Error>()).is_some_and(|u| matches!(u, ureq::Error::Timeout(_)))
}

fn read_stream(endpoint: &Endpoint, response: ureq::http::Response<ureq::Body>, state: &StreamState) {
    let reader = response.into_body().into_reader();
    let reads = Reads { reader, buf: vec![0; 16 * 1024], ended: false };
    let events = futures_executor::block_on_stream(futures_util::stream::iter(reads).eventsource());
    let mut chunks = 0u64;
    let mut finished = false;
    for event in events {
        if state.is_cancelled() {
            return;
        }
        match event {
            Ok(event) => {
                if event.data.is_empty() {
                    continue;
                }
                chunks += 1;
                match wire::parse_chunk(&event.data) {
                    Ok(Chunk::Done) => return,
                    Ok(Chunk::Events(list)) => {
                        for e in list {
                            finished |= e["type"] == "finish";
                            state.push(e);
                        }
                    }
                    Ok(Chunk::ServerError(message)) => {
                        return state.fail("server", None, format!("the model API reported an error in the middle of the answer: {message}"));
                    }
                    Err(detail) => {
                        return state.fail("malformed", None, format!("the model API sent a malformed chunk (chunk {chunks}): {detail}"));
                    }
                }
            }
            Err(EventStreamError::Transport(e)) if io_is_timeout(&e) => {
                return state.fail(
                    "timeout",
                    None,
                    format!("the model's stream stalled: nothing arrived for {} ms (requestTimeoutMs)", endpoint.timeout.as_millis()),
                );
            }
            Err(EventStreamError::Transport(e)) => {
                return state.fail(
                    "connection",
                    None,
                    format!("the connection to the model API closed in the middle of the answer (after {chunks} chunks): {e}"),
                );
            }
            Err(e) => {
                return state.fail(
                    "malformed",
                    None,
                    format!("the model API sent a stream that is not Server-Sent Events (after {chunks} chunks): {e}"),
                );
            }
        }
    }
    // The body ended without `[DONE]`. An answer whose `finish_reason`
    // came is whole (only a usage chunk after it may be lost, and the
    // message then has no usage); any other is cut off.
    if !finished {
        state.fail("connection", None, format!("the connection to the model API closed in the middle of the answer (after {chunks} chunks)"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let headers = |name: &str, value: &str| {
            let mut h = ureq::http::HeaderMap::new();
            h.insert(ureq::http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
            h
        };
        assert_eq!(retry_after(&headers("retry-after", "4")), Some(Duration::from_secs(4)));
        assert_eq!(retry_after(&headers("retry-after-ms", "250")), Some(Duration::from_millis(250)));
        let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(10));
        let wait = retry_after(&headers("retry-after", &later)).unwrap();
        assert!(wait > Duration::from_secs(8) && wait <= Duration::from_secs(10), "{wait:?}");
        assert_eq!(retry_after(&headers("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")), Some(Duration::ZERO));
        assert_eq!(retry_after(&headers("retry-after", "soon")), None);
    }

    #[test]
    fn backoff_doubles_with_jitter() {
        let waits: Vec<Duration> = (0..50).map(|_| backoff(1)).collect();
        assert!(waits.iter().all(|w| *w >= Duration::from_millis(500) && *w <= Duration::from_millis(1000)), "{waits:?}");
        assert!(waits.iter().any(|w| *w != waits[0]), "no jitter: {waits:?}");
    }

    #[test]
    fn loopback_hosts_are_recognized() {
        assert!(is_loopback("http://127.0.0.1:8080/v1/chat/completions"));
        assert!(is_loopback("http://localhost/v1"));
        assert!(is_loopback("http://[::1]:9/x"));
        assert!(!is_loopback("https://api.deepseek.com/chat/completions"));
        assert!(!is_loopback("http://127.example.com/"));
    }

    #[test]
    fn take_waits_then_returns_what_arrived() {
        let s = StreamState::default();
        let (events, done) = s.take(Duration::from_millis(10), 10);
        assert!(events.is_empty() && !done);
        s.push(json!(1));
        s.push(json!(2));
        s.finish();
        assert_eq!(s.take(Duration::ZERO, 1), (vec![json!(1)], false));
        assert_eq!(s.take(Duration::ZERO, 10), (vec![json!(2)], true));
    }
}
