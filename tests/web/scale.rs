//! Many viewers of one session: one follower (a room thread in the
//! server) reads each change once and every stream gets it; the follower
//! goes when the last viewer leaves.

use std::io::BufRead;
use std::time::{Duration, Instant};

use cordis_tests::Scratch;
use serde_json::json;

use crate::proxy::open_stream;
use crate::{eventually, four, Dev, Web, TODO};

/// The threads of process `pid` named `name`.
fn threads_named(pid: u32, name: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks.filter_map(Result::ok).filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name)).count()
}

/// Reads `stream` until an `update` event whose data holds `needle`;
/// panics after `within`.
fn read_update(stream: &mut std::io::BufReader<std::net::TcpStream>, needle: &str, within: Duration) {
    let start = Instant::now();
    let mut in_update = false;
    loop {
        assert!(start.elapsed() < within, "no update holding {needle:?} within {within:?}");
        let mut line = String::new();
        stream.read_line(&mut line).expect("the stream stays open");
        if line.starts_with("event: ") {
            in_update = line.trim_end() == "event: update";
        } else if in_update && line.starts_with("data: ") && line.contains(needle) {
            return;
        }
    }
}

#[test]
fn twenty_viewers_share_one_follower_that_goes_when_they_leave() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let mut dev = Dev::start(&scratch, &[]);
    dev.write(&json!([{"content": "first task", "status": "in_progress"}]));
    let web = Web::start(&scratch, &[], &[]);
    let pid = web.pid();
    let path = format!("/s/{}/live?from=0", dev.id);
    let mut streams: Vec<_> = (0..20).map(|_| open_stream(web.addr, &path, Duration::from_secs(10)).1).collect();
    // Each stream gets the page's items once.
    for s in &mut streams {
        read_update(s, "1 in progress", Duration::from_secs(10));
    }
    assert_eq!(threads_named(pid, "cordis-web-room"), 1, "one follower for twenty viewers of one session");
    dev.write(&four());
    let start = Instant::now();
    for s in &mut streams {
        read_update(s, "1 completed · 2 in progress · 1 pending", Duration::from_secs(5));
    }
    eprintln!("twenty viewers had the append after {:?}", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(threads_named(pid, "cordis-web-room"), 1);
    // A page loaded while the streams are open uses the same follower.
    assert_eq!(crate::http::get(web.addr, &format!("/s/{}", dev.id)).status, 200);
    assert_eq!(threads_named(pid, "cordis-web-room"), 1);
    drop(streams);
    // The server notices a closed stream at its next write (a beat at the
    // latest, 15 s), then keeps the follower for 5 s in case the page comes
    // back.
    eventually(Duration::from_secs(30), "the follower ends once every viewer left", || threads_named(pid, "cordis-web-room") == 0);
}

#[test]
fn a_closed_tab_lets_its_sessions_follower_go_within_seconds() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    crate::http::plan_session(&scratch.path().join(".cordis"));
    // A long heartbeat: the follower must go because the page went, not
    // because a beat found the connection closed.
    let web = Web::start(&scratch, &["--heartbeat", "600"], &[]);
    let pid = web.pid();
    let mut b = crate::browser::Browser::start();
    b.open(&web.url("/s/web-plan"), 1024, "en-US");
    b.wait_text("#live-status", "Live", 10_000);
    assert_eq!(threads_named(pid, "cordis-web-room"), 1);
    b.send(json!({"cmd": "goto", "url": "about:blank"}));
    let start = Instant::now();
    // The grace of 5 s, and a little more.
    eventually(Duration::from_secs(10), "the follower ends once the tab left", || threads_named(pid, "cordis-web-room") == 0);
    eprintln!("the follower went {:?} after the tab left", start.elapsed());
}

/// Requests for sessions that are not stored, or ids no session can have
/// (any web page can make a browser send them: an `<img>` to loopback
/// carries no Origin), start no follower and leave nothing on the list:
/// pages, live streams and multiplexed ones, a burst of 300, answered
/// within 20 s.
#[test]
fn a_missing_session_leaves_no_follower_behind() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    crate::http::plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let start = Instant::now();
    let before = crate::http::get(web.addr, "/").body;
    assert_eq!(crate::http::get(web.addr, "/s/missing").status, 404);
    assert_eq!(crate::http::get(web.addr, "/s/missing/text/0").status, 404);
    assert_eq!(crate::http::get(web.addr, "/s/missing/live").status, 404);
    assert_eq!(crate::http::get(web.addr, "/mux?sub=%2Fs%2Fmissing%2Flive").status / 100, 4);
    for bad in ["/s/..%2F..%2Fetc%2Fpasswd", "/s/%2e%2e", "/s/a%00b", "/s/.hidden-text", "/s/.hidden-text/live"] {
        assert_eq!(crate::http::get(web.addr, bad).status, 404, "{bad}");
    }
    for i in 0..300 {
        assert_eq!(crate::http::get(web.addr, &format!("/s/nosuch{i}")).status, 404);
        assert_eq!(threads_named(web.pid(), "cordis-web-room"), 0, "request {i} started a follower");
    }
    // A room that would have been opened ends after 5 s; the list is read
    // again after that and must not name any of the ids.
    std::thread::sleep(Duration::from_secs(6));
    let after = crate::http::get(web.addr, "/").body;
    for needle in ["passwd", "hidden-text", "nosuch", "missing", "invalid session id"] {
        assert!(!after.contains(needle), "the list names {needle:?}: {after}");
    }
    assert_eq!(after.len(), before.len(), "the list page changed");
    assert_eq!(threads_named(web.pid(), "cordis-web-room"), 0);
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
}

/// A followed session is read on from where the last read stopped: a line
/// written in two parts reaches the page once whole, and a log rewritten
/// under an open stream is read whole again, so the page shows the new log
/// and nothing of the old one.
#[test]
fn a_followed_log_is_read_on_and_read_whole_again_when_rewritten() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let state = scratch.path().join(".cordis");
    let mut log = crate::Log::new("grow");
    log.prompt("first prompt").end();
    log.write(&state);
    let web = Web::start(&scratch, &[], &[]);
    let (_, mut stream) = open_stream(web.addr, "/s/grow/live?from=0", Duration::from_secs(10));
    read_update(&mut stream, "first prompt", Duration::from_secs(10));
    // The next turn, its first line written in two parts.
    let before = log.lines.len();
    log.prompt("second prompt").end();
    let file = state.join("sessions").join("grow.jsonl");
    let added: String = log.lines[before..].iter().map(|l| format!("{l}\n")).collect();
    let (head, rest) = added.split_at(20);
    let append = |text: &str| {
        use std::io::Write;
        std::fs::OpenOptions::new().append(true).open(&file).expect("open the log").write_all(text.as_bytes()).expect("append");
    };
    append(head);
    std::thread::sleep(Duration::from_millis(400));
    append(rest);
    read_update(&mut stream, "second prompt", Duration::from_secs(5));
    // The log rewritten shorter, other text: the room reads it whole.
    let mut other = crate::Log::new("grow");
    other.prompt("rewritten prompt").end();
    other.write(&state);
    eventually(Duration::from_secs(5), "the page shows the rewritten log", || {
        let page = crate::http::get(web.addr, "/s/grow").body;
        page.contains("rewritten prompt") && !page.contains("second prompt") && !page.contains("first prompt")
    });
    assert_eq!(threads_named(web.pid(), "cordis-web-room"), 1, "the page and the stream share the room that read the rewrite");
}
