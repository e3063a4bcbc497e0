//! The live streams behind real proxies: Debian's nginx and Caddy
//! (installed by `tests/web/setup.sh`), started by each test on a loopback
//! port with a stock block (`proxy_pass`, `reverse_proxy`) in a scratch
//! folder, and the heartbeat that
//! keeps an idle stream open and tells the page whether it is live.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cordis_tests::Scratch;
use serde_json::json;

use crate::browser::Browser;
use crate::http::plan_session;
use crate::{four, Dev, Log, Web, TODO};

/// A running nginx in front of `cordis web`.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    dir: Scratch,
}

impl Nginx {
    /// Starts nginx on a free loopback port with the stock block: nothing but
    /// `proxy_pass` to `upstream` (HTTP/1.0 to the upstream, nginx's default
    /// buffering on). Panics, with nginx's error log, when it cannot start.
    fn start(upstream: SocketAddr) -> Nginx {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        Nginx::start_on(upstream, port)
    }

    /// As [`Nginx::start`], on `port`.
    fn start_on(upstream: SocketAddr, port: u16) -> Nginx {
        // The peer: the same setup every browser test runs.
        crate::browser::python();
        let dir = Scratch::new();
        let root = dir.path().display().to_string();
        let config = format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid {root}/nginx.pid;\nerror_log {root}/error.log info;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {root}/body;\n  proxy_temp_path {root}/proxy;\n  fastcgi_temp_path {root}/fastcgi;\n  \
             uwsgi_temp_path {root}/uwsgi;\n  scgi_temp_path {root}/scgi;\n  server {{\n    listen 127.0.0.1:{port};\n    \
             location / {{\n      proxy_pass http://{upstream};\n    }}\n  }}\n}}\n"
        );
        std::fs::write(dir.path().join("nginx.conf"), config).expect("write nginx.conf");
        let mut child = Command::new("/usr/sbin/nginx")
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start /usr/sbin/nginx (tests/web/setup.sh installs it): {e}"));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect(addr).is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut stderr = String::new();
                let _ = child.stderr.take().map(|mut s| s.read_to_string(&mut stderr));
                let log = std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default();
                panic!("nginx exited ({status}) before listening on {addr}:\n{stderr}\n{log}");
            }
            assert!(Instant::now() < deadline, "nginx did not listen on {addr} within 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Nginx { child, addr, dir }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

/// A running Caddy in front of `cordis web`.
struct Caddy {
    child: Child,
    addr: SocketAddr,
    _dir: Scratch,
}

impl Caddy {
    /// Starts Caddy on a free loopback port with the guide's block: nothing
    /// but `reverse_proxy` to `upstream` (its admin endpoint and automatic
    /// HTTPS off, its state in a scratch folder). Panics, with its output,
    /// when it cannot start.
    fn start(upstream: SocketAddr) -> Caddy {
        crate::browser::python();
        let dir = Scratch::new();
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let config = format!("{{\n  admin off\n  auto_https off\n}}\nhttp://127.0.0.1:{port} {{\n  reverse_proxy {upstream}\n}}\n");
        std::fs::write(dir.path().join("Caddyfile"), config).expect("write the Caddyfile");
        let log = std::fs::File::create(dir.path().join("caddy.log")).expect("create the log");
        let mut child = Command::new("/usr/bin/caddy")
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(dir.path().join("Caddyfile"))
            .env("HOME", dir.path())
            .env("XDG_DATA_HOME", dir.path().join("data"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start /usr/bin/caddy (tests/web/setup.sh installs it): {e}"));
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(dir.path().join("caddy.log")).unwrap_or_default();
                panic!("caddy exited ({status}) before listening on {addr}:\n{log}");
            }
            assert!(Instant::now() < deadline, "caddy did not listen on {addr} within 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Caddy { child, addr, _dir: dir }
    }
}

impl Drop for Caddy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Opens a stream at `path` over plain TCP; returns the answer's head and a
/// reader of its body (read with a timeout of `timeout`).
pub fn open_stream(addr: SocketAddr, path: &str, timeout: Duration) -> (String, BufReader<TcpStream>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(timeout)).expect("a timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n").expect("send");
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("read the head");
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    (head.to_ascii_lowercase(), reader)
}

#[test]
fn streams_carry_no_buffering_headers_and_beat_while_idle() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &["--heartbeat", "0.5"], &[]);
    for path in ["/live", "/s/web-plan/live"] {
        let (head, mut body) = open_stream(web.addr, path, Duration::from_secs(5));
        assert!(head.contains("content-type: text/event-stream"), "{path}: {head}");
        assert!(head.contains("x-accel-buffering: no"), "{path}: {head}");
        assert!(head.contains("cache-control: no-cache, no-transform"), "{path}: {head}");
        // Idle for two seconds: a beat (a comment and a `beat` event) about
        // every half second, and nothing else once the first update is in.
        let start = Instant::now();
        let mut beats = 0;
        let mut comments = 0;
        while start.elapsed() < Duration::from_secs(2) {
            let mut line = String::new();
            // Chunked framing lines (sizes, blank lines) pass through; the
            // SSE lines are what counts.
            body.read_line(&mut line).expect("the stream stays open and beats");
            if line.starts_with(": heartbeat") {
                comments += 1;
            }
            if line.starts_with("event: beat") {
                beats += 1;
            }
        }
        assert!((3..=6).contains(&beats), "{path}: {beats} beats in 2 s at a 0.5 s heartbeat");
        assert_eq!(comments, beats, "{path}: each beat is also a comment");
    }
    let refused = scratch.cordis(&["web", "--http", "127.0.0.1:0", "--heartbeat", "0"]);
    assert_eq!(refused.status.code(), Some(2), "{}", cordis_tests::text(&refused).1);
}

#[test]
fn an_update_after_an_idle_period_passes_nginx_at_once() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let mut dev = Dev::start(&scratch, &[]);
    dev.write(&json!([{"content": "first task", "status": "in_progress"}]));
    let web = Web::start(&scratch, &[], &[]);
    let nginx = Nginx::start(web.addr);
    idle_then_update(&scratch, &mut dev, &nginx.url(""), "nginx");
}

#[test]
fn an_update_after_an_idle_period_passes_caddy_at_once() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let mut dev = Dev::start(&scratch, &[]);
    dev.write(&json!([{"content": "first task", "status": "in_progress"}]));
    let web = Web::start(&scratch, &[], &[]);
    let caddy = Caddy::start(web.addr);
    idle_then_update(&scratch, &mut dev, &format!("http://{}", caddy.addr), "caddy");
}

/// Through the proxy at `base`: the page of `dev`'s session goes live,
/// nothing happens for 5 s, then an append reaches it within 3 s; the
/// same for a new session on the list page.
fn idle_then_update(scratch: &Scratch, dev: &mut Dev, base: &str, proxy: &str) {
    let mut b = Browser::start();
    b.open(&format!("{base}/s/{}", dev.id), 1024, "en-US");
    b.wait_text("#live-status", "Live", 10_000);
    assert_eq!(b.texts(".plan-counts"), vec!["1 in progress"]);
    // Idle: nothing is appended for five seconds, less than a heartbeat.
    std::thread::sleep(Duration::from_secs(5));
    let start = Instant::now();
    dev.write(&four());
    let took = b.wait_text(".plan-counts", "1 completed · 2 in progress · 1 pending", 3_000);
    eprintln!("through {proxy}, after 5 s idle: the append showed after {took:.0} ms ({:?} from the append)", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(3), "the update took {:?} through {proxy}", start.elapsed());
    b.wait_text("#live-status", "Live", 1_000);
    b.screenshot(&format!("live-through-{proxy}"));
    // The list page's stream passes the proxy as well.
    b.open(&format!("{base}/"), 1024, "en-US");
    b.wait_text("#live-status", "Live", 10_000);
    std::thread::sleep(Duration::from_secs(3));
    let mut other = Dev::start(scratch, &[]);
    let start = Instant::now();
    other.write(&json!([{"content": "a", "status": "completed"}, {"content": "b", "status": "completed"}, {"content": "c", "status": "completed"}]));
    b.wait_text("#rows", "3 completed", 3_000);
    assert!(start.elapsed() < Duration::from_secs(3), "the new row took {:?} through {proxy}", start.elapsed());
}

#[test]
fn a_silent_stream_reads_stale_until_the_beats_return() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &["--heartbeat", "1"], &[]);
    let mut b = Browser::start();
    b.open(&web.url("/s/web-plan"), 1024, "en-US");
    b.wait_text("#live-status", "Live", 10_000);
    // The server stops (SIGSTOP): the connection stays open, but no beat
    // comes. After two intervals the page says so.
    let pid = web.pid().to_string();
    let signal = |s: &str| assert!(Command::new("kill").args([s, &pid]).status().expect("kill").success(), "kill {s}");
    signal("-STOP");
    let stale = b.wait_text("#live-status", "Stale", 6_000);
    let state = b.eval("document.getElementById('main').getAttribute('data-live-state')");
    b.screenshot("stale");
    signal("-CONT");
    eprintln!("a silent stream read stale after {stale:.0} ms");
    assert_eq!(state, "stale");
    b.wait_text("#live-status", "Live", 6_000);
    // The status line is written once per change, not on every check.
    let writes = b.eval(
        "new Promise(r => { let n = 0; const o = new MutationObserver(m => n += m.length); \
         o.observe(document.getElementById('live-status'), {childList: true, characterData: true, subtree: true}); \
         setTimeout(() => { o.disconnect(); r(n); }, 3500); })",
    );
    assert_eq!(writes, 0, "the live status was rewritten while nothing changed");
}

#[test]
fn the_list_gets_what_changed_while_its_stream_was_down() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let state = scratch.path().join(".cordis");
    let mut running = Log::new("web-was-running");
    running.prompt("A turn left open.");
    running.write(&state);
    let web = Web::start(&scratch, &["--heartbeat", "1"], &[]);
    let nginx = Nginx::start(web.addr);
    let port = nginx.addr.port();
    let mut b = Browser::start();
    b.open(&nginx.url("/"), 1024, "en-US");
    b.wait_text("#live-status", "Live", 10_000);
    assert_eq!(b.texts("#rows .status"), vec!["running"]);
    // The proxy goes away: the stream breaks, the page says so.
    drop(nginx);
    b.wait_text("#live-status", "reconnecting", 5_000);
    // While it is down, a session is created and the running one finishes.
    let mut created = Log::new("web-created-meanwhile");
    created.prompt("Born during the drop.").say("Hello.").end();
    created.write(&state);
    running.say("Finished.").end();
    running.write(&state);
    std::thread::sleep(Duration::from_millis(1500));
    let _back = Nginx::start_on(web.addr, port);
    b.wait_text("#rows", "Born during the drop.", 10_000);
    b.wait_text("#live-status", "Live", 5_000);
    assert_eq!(b.texts("#rows .status"), vec!["completed", "completed"]);
    assert_eq!(b.eval("document.querySelectorAll('#rows tr').length"), 2);
}
