//! A stdio server's stderr, read by the host: each line is written to the
//! host's stderr as `mcp-client(NAME) stderr: LINE`, cut at
//! [`MAX_LINE_BYTES`], at most [`LINES_PER_SECOND`] lines a second on
//! average (bursts of [`BURST`]). Lines over the rate are dropped and
//! counted, and the count is written once a second while it grows.
//!
//! The pipe is read on the entry's runtime, which never blocks on the
//! host's stderr: the lines go to a writer thread through a bounded queue,
//! and when the queue is full (nobody reads the host's stderr) lines are
//! dropped and counted like the ones over the rate. A chatty server
//! therefore costs a bounded amount of work and never stalls its entry.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// The longest part of one line that is shown, in bytes; the rest is cut
/// and its size said.
pub const MAX_LINE_BYTES: usize = 2048;

/// The average number of lines a second that are shown.
pub const LINES_PER_SECOND: u32 = 20;

/// How many lines may be shown at once before the rate applies.
pub const BURST: u32 = 100;

/// Lines waiting for the writer thread.
const QUEUE: usize = 256;

/// Where an entry's server stderr lines go: a writer thread of the entry's.
#[derive(Debug, Clone)]
pub struct Sink {
    lines: SyncSender<String>,
}

/// The writer thread of a [`Sink`], stopped by the entry's disposal (the
/// thread runs this library's code, so it must end before the library
/// may be unloaded).
#[derive(Debug)]
pub struct Writer {
    stop: Arc<AtomicBool>,
    ended: std::sync::Mutex<Receiver<()>>,
}

impl Writer {
    /// Tells the thread to write what is queued and end, and waits for it
    /// at most `limit` (a thread blocked on a stderr nobody reads cannot
    /// be waited for).
    pub fn stop(&self, limit: Duration) {
        self.stop.store(true, Ordering::Release);
        let _ = self.ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv_timeout(limit);
    }
}

impl Sink {
    /// Starts the writer thread, named after the server.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn start(server: &str) -> std::io::Result<(Sink, Writer)> {
        let (lines, queue) = sync_channel::<String>(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let (ended_tx, ended) = sync_channel::<()>(1);
        let stopping = stop.clone();
        std::thread::Builder::new().name(format!("mcp-stderr:{server}")).spawn(move || {
            let _ended = ended_tx;
            // A closed or failing stderr loses the line, nothing else.
            let write = |line: String| {
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            };
            loop {
                match queue.recv_timeout(Duration::from_millis(100)) {
                    Ok(line) => write(line),
                    Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => {}
                }
                if stopping.load(Ordering::Acquire) {
                    queue.try_iter().for_each(write);
                    return;
                }
            }
        })?;
        Ok((Sink { lines }, Writer { stop, ended: std::sync::Mutex::new(ended) }))
    }

    /// A sink whose lines are kept in a queue of [`QUEUE`] (for tests).
    #[cfg(test)]
    pub(crate) fn capture() -> (Sink, Receiver<String>) {
        let (lines, queue) = sync_channel::<String>(QUEUE);
        (Sink { lines }, queue)
    }

    /// Writes a line of the entry's own (a dropped message, say); lost
    /// when the queue is full.
    pub fn notice(&self, text: String) {
        let _ = self.offer(text);
    }

    fn offer(&self, line: String) -> bool {
        match self.lines.try_send(line) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }
}

/// The token bucket and drop count of one server's stream.
struct Limiter {
    tokens: f64,
    last: Instant,
    dropped: u64,
    told: Instant,
}

impl Limiter {
    fn new() -> Limiter {
        let now = Instant::now();
        Limiter { tokens: f64::from(BURST), last: now, dropped: 0, told: now }
    }

    fn admit(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * f64::from(LINES_PER_SECOND);
        self.tokens = (self.tokens + refill).min(f64::from(BURST));
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Reads `stream` (a server's stderr) to its end, writing its lines to
/// `sink` under `label` within the bounds above.
pub async fn forward(label: String, stream: impl AsyncRead + Unpin, sink: Sink) {
    let mut reader = BufReader::with_capacity(16 * 1024, stream);
    let mut limiter = Limiter::new();
    let mut line: Vec<u8> = Vec::with_capacity(MAX_LINE_BYTES);
    let mut cut: usize = 0;
    loop {
        let (consumed, ended) = {
            let available = match reader.fill_buf().await {
                Ok(available) => available,
                Err(_) => break,
            };
            if available.is_empty() {
                break;
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let body = &available[..newline.unwrap_or(take)];
            let room = MAX_LINE_BYTES.saturating_sub(line.len());
            line.extend_from_slice(&body[..body.len().min(room)]);
            cut += body.len().saturating_sub(room);
            (take, newline.is_some())
        };
        reader.consume(consumed);
        if ended {
            emit(&label, &line, cut, &sink, &mut limiter);
            line.clear();
            cut = 0;
        }
    }
    if !line.is_empty() || cut > 0 {
        emit(&label, &line, cut, &sink, &mut limiter);
    }
    if limiter.dropped > 0 {
        let _ = sink.offer(format!("{label} stderr: {} lines dropped (over {LINES_PER_SECOND} lines/s)", limiter.dropped));
    }
}

fn emit(label: &str, line: &[u8], cut: usize, sink: &Sink, limiter: &mut Limiter) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    if limiter.admit() {
        let shown = if cut > 0 { format!("{label} stderr: {text} [… {cut} more bytes cut]") } else { format!("{label} stderr: {text}") };
        if !sink.offer(shown) {
            limiter.dropped += 1;
        }
    } else {
        limiter.dropped += 1;
    }
    if limiter.dropped > 0
        && limiter.told.elapsed() >= Duration::from_secs(1)
        && sink
            .offer(format!("{label} stderr: {} lines dropped (over {LINES_PER_SECOND} lines/s, or the host's stderr is not read)", limiter.dropped))
    {
        limiter.dropped = 0;
        limiter.told = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_cut_and_a_flood_is_counted() {
        let (lines, queue) = sync_channel::<String>(QUEUE);
        let sink = Sink { lines };
        let mut input = Vec::new();
        input.extend_from_slice(&vec![b'x'; MAX_LINE_BYTES + 10]);
        input.push(b'\n');
        for n in 0..1000 {
            input.extend_from_slice(format!("line {n}\n").as_bytes());
        }
        input.extend_from_slice(b"tail without newline");
        forward("mcp-client(t)".into(), &input[..], sink).await;
        let got: Vec<String> = queue.try_iter().collect();
        assert!(got[0].ends_with("[… 10 more bytes cut]"), "{}", &got[0][got[0].len() - 40..]);
        assert_eq!(got[0].len(), "mcp-client(t) stderr: ".len() + MAX_LINE_BYTES + " [… 10 more bytes cut]".len());
        let shown = got.iter().filter(|l| !l.contains("lines dropped")).count();
        assert!(shown >= BURST as usize && shown <= BURST as usize + 5, "{shown} lines shown");
        let last = got.last().map(String::as_str).unwrap_or_default();
        assert!(last.contains("lines dropped"), "{last}");
        let dropped: usize = last.split_whitespace().nth(2).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert_eq!(shown + dropped, 1002, "every line is shown or counted: {last}");
    }
}
