//! A loopback HTTP server that plays a Chat Completions API for the
//! `llm-openai` tests: each connection gets the next scripted reply (a
//! streamed answer, an HTTP error, a cut, a stall), and every request is
//! kept for the test to inspect. It listens on 127.0.0.1 only.
//!
//! Streamed answers are written the way the API writes them (HTTP/1.1,
//! chunked transfer encoding, `data: {json}\n\n` events, `data: [DONE]`),
//! and the bytes go out in small pieces cut at fixed offsets that ignore
//! event, JSON and UTF-8 boundaries, so the client must reassemble them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// How a reply ends.
#[derive(Debug, Clone)]
pub enum End {
    /// `data: [DONE]`, then the end of the chunked body.
    Done,
    /// The connection is closed after the events, without `[DONE]` or the
    /// end of the chunked body.
    Cut,
    /// Nothing more is sent for this long (then the connection closes).
    Stall(Duration),
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200` with these SSE `data` payloads, then `end`.
    Stream {
        /// The `data` payloads (JSON text, or anything to test a bad one).
        events: Vec<String>,
        /// How it ends.
        end: End,
    },
    /// A status with headers and a body (an error).
    Status {
        /// The status code.
        status: u16,
        /// Extra headers (`Retry-After`).
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// The request is read and nothing is answered for this long.
    Silent(Duration),
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line, e.g. `POST /v1/chat/completions HTTP/1.1`.
    pub line: String,
    /// The headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, parsed as JSON (`null` when it is not).
    pub body: Value,
}

impl Request {
    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// The running server.
pub struct SseServer {
    /// `http://127.0.0.1:PORT/v1`: the `baseUrl` to configure.
    pub base_url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

/// How many bytes each write of a streamed body carries.
const PIECE: usize = 7;

impl SseServer {
    /// Starts a server answering connections with `replies` in order (a
    /// connection beyond them gets HTTP 500).
    pub fn start(replies: Vec<Reply>) -> SseServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().expect("a local address").port();
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let seen = requests.clone();
        std::thread::spawn(move || {
            let mut replies = replies.into_iter();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let reply = replies.next().unwrap_or(Reply::Status {
                    status: 500,
                    headers: vec![],
                    body: "{\"error\":{\"message\":\"no more replies scripted\"}}".into(),
                });
                let seen = seen.clone();
                // One thread per connection: a stalled reply must not hold
                // up the next request (a retry, another test step).
                std::thread::spawn(move || serve(stream, reply, &seen));
            }
        });
        SseServer { base_url: format!("http://127.0.0.1:{port}/v1"), requests }
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until `n` requests have arrived (at most 30 s).
    pub fn wait_for_requests(&self, n: usize) -> Vec<Request> {
        let start = std::time::Instant::now();
        while self.requests.lock().unwrap().len() < n {
            assert!(start.elapsed() < Duration::from_secs(30), "only {} of {n} requests arrived", self.requests.lock().unwrap().len());
            std::thread::sleep(Duration::from_millis(10));
        }
        self.requests()
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Request { line: line.trim_end().to_string(), headers, body })
}

fn serve(mut stream: TcpStream, reply: Reply, seen: &Mutex<Vec<Request>>) {
    let _ = stream.set_nodelay(true);
    let Some(request) = read_request(&stream) else { return };
    seen.lock().unwrap().push(request);
    match reply {
        Reply::Silent(d) => std::thread::sleep(d),
        Reply::Status { status, headers, body } => {
            let mut head =
                format!("HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
            for (n, v) in headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
        Reply::Stream { events, end } => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            let mut body = String::from(": keep-alive\n\n");
            for e in &events {
                body.push_str("data: ");
                body.push_str(e);
                body.push_str("\n\n");
            }
            if matches!(end, End::Done) {
                body.push_str("data: [DONE]\n\n");
            }
            for piece in body.as_bytes().chunks(PIECE) {
                let framed = [format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat();
                if stream.write_all(&framed).and_then(|()| stream.flush()).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            match end {
                End::Done => {
                    let _ = stream.write_all(b"0\r\n\r\n");
                }
                End::Cut => {}
                End::Stall(d) => std::thread::sleep(d),
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}
