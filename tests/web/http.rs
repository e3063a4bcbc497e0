//! The HTTP surface of `cordis web`, spoken to over plain TCP: the security
//! checks (token, Host, Origin, methods), escaping in the HTML sent, the
//! routes and their 404s, the language, and the plan of an earlier page.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use cordis_tests::{text, Scratch};
use serde_json::json;

use crate::{four, todo_args, Log, Web, TODO};

/// An answer: status, headers (lower-case names) and body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Sends one request (`Connection: close`) with `headers`, `Host` set to the
/// server's address unless given; reads the whole answer.
pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect to cordis web");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send the request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the answer");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an answer head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).expect("a status line");
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    if headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked")) {
        body = dechunk(&body);
    }
    Answer { status, headers, body: String::from_utf8(body).expect("the body is UTF-8") }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = raw.windows(2).position(|w| w == b"\r\n") else { return out };
        let size = usize::from_str_radix(String::from_utf8_lossy(&raw[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[end + 4 + size..];
    }
}

pub fn get(addr: SocketAddr, path: &str) -> Answer {
    request(addr, "GET", path, &[])
}

/// The seed's plan session: a long-named parallel plan, a failed call whose
/// arguments name two active items, then the four-item parallel plan.
pub fn plan_session(state: &std::path::Path) {
    let long = format!("implement the {} fixture sample", "x".repeat(200 - 29));
    assert_eq!(long.chars().count(), 200);
    let long_plan = json!([
        {"content": long, "status": "in_progress"},
        {"content": "run the parser tests", "status": "in_progress"},
        {"content": "watch the background build", "status": "in_progress"},
        {"content": "read the code", "status": "completed"},
    ]);
    let bad = json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}], "extra": 1}).to_string();
    Log::new("web-plan")
        .prompt("Fix the parser, in parallel where you can.")
        .call(
            "Planning.",
            "todo_write",
            &todo_args(&long_plan),
            Some(long_plan.clone()),
            "Updated todo list: 0 pending, 3 in progress, 1 completed.",
            false,
        )
        .call("", "todo_write", &bad, None, "Error: invalid arguments: $.extra is not an allowed key (allowed: todos)", true)
        .call("Replanning.", "todo_write", &todo_args(&four()), Some(four()), "Updated todo list: 1 pending, 2 in progress, 1 completed.", false)
        .say("Working on it.")
        .write(state);
}

/// Hostile text everywhere a session holds text.
pub fn hostile_session(state: &std::path::Path) -> usize {
    let big = "0123456789abcdef".repeat(65_536);
    let html = "<a href=\"javascript:window.__pwned=4\">click</a><b>bold</b><img src=x onerror=\"window.__pwned=5\">";
    let plan = json!([{"content": "<script>window.__pwned=6</script>", "status": "in_progress"}]);
    let mut log = Log::new("web-hostile");
    log.prompt("<script>window.__pwned=1</script> [link](javascript:window.__pwned=3) javascript:alert(1) abc\u{202E}fed\u{2066}x")
        .call("<img src=x onerror=\"window.__pwned=2\">", "todo_write", &todo_args(&plan), Some(plan.clone()), html, false)
        .say(&big)
        .end();
    log.write(state);
    // The seq of the big message: header, then 2 + 6 + 1 events before it.
    9
}

#[test]
fn pages_escape_every_piece_of_session_text() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let big_seq = hostile_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let page = get(web.addr, "/s/web-hostile");
    assert_eq!(page.status, 200, "{}", page.body);
    for raw in ["<script>window", "<img src=x", "<a href=\"javascript:", "<b>bold", "\u{202E}", "\u{2066}"] {
        assert!(!page.body.contains(raw), "the page holds {raw:?} unescaped");
    }
    for escaped in [
        "&lt;script&gt;window.__pwned=1&lt;/script&gt;",
        "&lt;img src=x onerror=&quot;window.__pwned=2&quot;&gt;",
        "<span class=\"ctl\">U+202E</span>",
    ] {
        assert!(page.body.contains(escaped), "the page lacks {escaped:?}");
    }
    assert_eq!(page.body.matches("<script").count(), 1, "only the page's own script");
    // The 1 MiB message is cut on the page, and whole as plain text.
    assert!(page.body.len() < 600_000, "the page is {} bytes", page.body.len());
    assert!(page.body.contains(&format!("/s/web-hostile/text/{big_seq}")), "no link to the whole text");
    let whole = get(web.addr, &format!("/s/web-hostile/text/{big_seq}"));
    assert_eq!(whole.status, 200);
    assert_eq!(whole.body.len(), 1 << 20);
    assert_eq!(whole.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(whole.header("content-security-policy"), Some("sandbox"));
    // Every answer forbids inline script and sniffing.
    let csp = page.header("content-security-policy").expect("a CSP");
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    // The list escapes the title (the first prompt) too.
    let list = get(web.addr, "/");
    assert!(list.body.contains("&lt;script&gt;window.__pwned=1") && !list.body.contains("<script>window"), "{}", list.body);
}

#[test]
fn a_public_address_needs_a_token() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let refused = Web::try_start(&scratch, &["--http", "0.0.0.0:0"], &[]).err().expect("refused");
    assert!(refused.contains("--token"), "{refused}");
    let out = scratch.cordis(&["web", "--http", "0.0.0.0:0", "--allow-host", "*"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out).1);
}

#[test]
fn the_token_is_checked_on_every_request() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &["--token", "s3cret;x"], &[]);
    for path in ["/", "/live", "/assets/app.js", "/s/web-plan", "/nope"] {
        let refused = get(web.addr, path);
        assert_eq!(refused.status, 401, "{path}");
        assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
        assert_eq!(request(web.addr, "GET", path, &[("Authorization", "Bearer wrong")]).status, 401, "{path}");
    }
    assert_eq!(request(web.addr, "GET", "/s/web-plan", &[("Authorization", "Bearer s3cret;x")]).status, 200);
    // Given once in the address, it becomes a cookie and leaves the address.
    let redirect = get(web.addr, "/s/web-plan?token=s3cret%3Bx&before=3");
    assert_eq!(redirect.status, 303);
    assert_eq!(redirect.header("location"), Some("/s/web-plan?before=3"));
    let cookie = redirect.header("set-cookie").expect("a cookie");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().expect("name=value");
    assert_eq!(request(web.addr, "GET", "/", &[("Cookie", pair)]).status, 200);
    assert_eq!(get(web.addr, "/?token=wrong").status, 401);
}

#[test]
fn host_and_origin_are_checked() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let web = Web::start(&scratch, &["--allow-host", "agents.internal"], &[]);
    let port = web.addr.port();
    let evil = request(web.addr, "GET", "/", &[("Host", "evil.example")]);
    assert_eq!(evil.status, 403);
    assert!(evil.body.contains("DNS rebinding"), "{}", evil.body);
    assert_eq!(request(web.addr, "GET", "/", &[("Host", &format!("evil.example:{port}"))]).status, 403);
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), "agents.internal".to_string()] {
        assert_eq!(request(web.addr, "GET", "/", &[("Host", &host)]).status, 200, "{host}");
    }
    assert_eq!(request(web.addr, "GET", "/", &[("Origin", "http://evil.example")]).status, 403);
    assert_eq!(request(web.addr, "GET", "/", &[("Origin", "null")]).status, 403);
    assert_eq!(request(web.addr, "GET", "/", &[("Origin", &format!("http://localhost:{port}"))]).status, 200);
}

#[test]
fn only_get_and_head_are_answered() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let refused = request(web.addr, method, "/s/web-plan", &[("Content-Length", "0")]);
        assert_eq!(refused.status, 405, "{method}");
        assert_eq!(refused.header("allow"), Some("GET, HEAD"));
    }
    let head = request(web.addr, "HEAD", "/s/web-plan", &[]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
}

#[test]
fn unknown_pages_and_sessions_are_404() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    for path in
        ["/nope", "/s/", "/s/missing", "/s/web-plan/nope", "/s/web-plan/text/9999", "/s/web-plan/text/x", "/s/%zz", "/s/..%2F..%2Fetc%2Fpasswd"]
    {
        let answer = get(web.addr, path);
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
        assert_eq!(answer.header("content-type"), Some("text/html; charset=utf-8"), "{path}");
    }
    let scripted = get(web.addr, "/s/%3Cscript%3Ealert(1)%3C%2Fscript%3E");
    assert_eq!(scripted.status, 404);
    assert!(!scripted.body.contains("<script>alert") && scripted.body.contains("&lt;script&gt;alert"), "{}", scripted.body);
    // A bad `?before=` is said, not taken for the latest page.
    for bad in ["abc", "-1", "0", "1.5"] {
        let answer = get(web.addr, &format!("/s/web-plan?before={bad}"));
        assert_eq!(answer.status, 400, "?before={bad}: {}", answer.body);
        assert!(answer.body.contains("expected a whole number of events, 1 or more"), "{}", answer.body);
    }
    assert_eq!(get(web.addr, "/s/web-plan?before=999999").status, 200, "past the end: the last page");
    // A path is never read as a file, whatever the store.
    std::fs::write(scratch.path().join("outside.jsonl"), "{}\n").expect("write");
    assert_eq!(get(web.addr, &format!("/s/{}", "%2Ftmp%2Foutside.jsonl")).status, 404);
}

#[test]
fn the_language_follows_the_browser_and_the_switch() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let zh = request(web.addr, "GET", "/s/web-plan", &[("Accept-Language", "zh-CN,zh;q=0.9,en;q=0.8")]);
    assert!(zh.body.contains("<html lang=\"zh-CN\">") && zh.body.contains("1 已完成 · 2 进行中 · 1 待处理"), "{}", zh.body);
    let en = request(web.addr, "GET", "/s/web-plan?lang=en", &[("Accept-Language", "zh-CN")]);
    assert!(en.body.contains("<html lang=\"en\">") && en.body.contains("1 completed · 2 in progress · 1 pending"));
    assert!(en.header("set-cookie").is_some_and(|c| c.starts_with("cordis_lang=en")));
    let remembered = request(web.addr, "GET", "/", &[("Accept-Language", "zh-CN"), ("Cookie", "cordis_lang=en")]);
    assert!(remembered.body.contains("<html lang=\"en\">"));
}

#[test]
fn an_earlier_page_shows_the_plan_at_its_last_event() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let first = json!([{"content": "early task", "status": "in_progress"}, {"content": "done early", "status": "completed"}]);
    let mut log = Log::new("web-long");
    log.prompt("A long session.").call("", "todo_write", &todo_args(&first), Some(first.clone()), "ok", false);
    for n in 0..300 {
        log.say(&format!("step {n}"));
    }
    log.call("", "todo_write", &todo_args(&four()), Some(four()), "ok", false).end();
    log.write(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let tail = get(web.addr, "/s/web-long");
    assert!(tail.body.contains("1 completed · 2 in progress · 1 pending"));
    assert!(tail.body.contains("rel=\"prev\""), "the last page links to earlier ones");
    assert!(!tail.body.contains("step 100<"), "the last page holds the last 400 events only");
    // Events 0..8 hold the first write (seq 5): the page ending there shows
    // the plan as it was then, folded by the host.
    let early = get(web.addr, "/s/web-long?before=8");
    assert!(early.body.contains("1 completed · 1 in progress") && !early.body.contains("2 in progress"), "{}", early.body);
    assert!(!early.body.contains("data-live"), "an earlier page is not live");
    let before_plan = get(web.addr, "/s/web-long?before=4");
    assert!(!before_plan.body.contains("class=\"plan\""), "no plan before the first write");
}

/// A session whose every long text is over 100 000 characters: reasoning
/// (finished, and still streaming), a call's arguments, a tool's result.
/// Returns the seqs: (finished message, last streamed chunk, first event
/// of the call's row, the result).
pub fn long_texts_session(state: &std::path::Path) -> (u64, u64, u64, u64) {
    let reasoning = format!("{}END-OF-REASONING", "thinking hard. ".repeat(10_000));
    assert!(reasoning.chars().count() > 150_000);
    let args = json!({"todos": [{"content": "x".repeat(120_000), "status": "in_progress"}]}).to_string();
    let result = format!("{}END-OF-RESULT", "r".repeat(110_000));
    let mut log = Log::new("web-long-text");
    log.prompt("Think at length.");
    log.think(&reasoning, 4, "Done thinking.", true);
    let message = log.next_seq() - 2;
    let row = log.next_seq() + 1;
    log.call("", "todo_write", &args, None, &result, false);
    let result_seq = log.next_seq() - 2;
    log.think(&format!("{}STREAMED-END", "streaming thoughts ".repeat(6_000)), 3, "", false);
    let chunk = log.next_seq() - 1;
    log.write(state);
    (message, chunk, row, result_seq)
}

#[test]
fn every_cut_says_how_much_and_links_the_whole_text() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let (message, chunk, row, result) = long_texts_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let page = get(web.addr, "/s/web-long-text");
    assert_eq!(page.status, 200);
    let links = [
        format!("/s/web-long-text/text/{message}?part=reasoning"),
        format!("/s/web-long-text/text/{chunk}?part=reasoning"),
        format!("/s/web-long-text/text/{row}?part=arguments&amp;call=call_1"),
        format!("/s/web-long-text/text/{result}"),
    ];
    for link in &links {
        assert!(page.body.contains(&format!("href=\"{link}\"")), "no link {link}");
    }
    assert_eq!(page.body.matches("class=\"cut\"").count(), 4, "four cuts, four notes");
    assert!(page.body.contains("showing the first 100,000 of 150,016 characters"), "the reasoning's note");
    for (link, end, chars) in [(&links[0], "END-OF-REASONING", 150_016), (&links[1], "STREAMED-END", 114_012), (&links[3], "END-OF-RESULT", 110_013)]
    {
        let whole = get(web.addr, link);
        assert_eq!(whole.status, 200, "{link}");
        assert!(whole.body.ends_with(end), "{link}");
        assert_eq!(whole.body.chars().count(), chars, "{link}");
        assert_eq!(whole.header("content-security-policy"), Some("sandbox"));
    }
    let args = get(web.addr, &links[2].replace("&amp;", "&"));
    assert_eq!(args.status, 200);
    let parsed: serde_json::Value = serde_json::from_str(&args.body).expect("the whole arguments");
    assert_eq!(parsed["todos"][0]["content"].as_str().map(str::len), Some(120_000));
    assert_eq!(get(web.addr, &format!("/s/web-long-text/text/{message}?part=nope")).status, 404);
    assert_eq!(get(web.addr, &format!("/s/web-long-text/text/{message}?part=arguments&call=nope")).status, 404);
}

/// Reads SSE lines from `body` until an event named `name` (skipping
/// beats), or `within` passes; its id and data.
fn next_event(body: &mut std::io::BufReader<std::net::TcpStream>, name: &str, within: Duration) -> Option<(String, String)> {
    use std::io::BufRead;
    let start = std::time::Instant::now();
    let (mut id, mut event) = (String::new(), String::new());
    while start.elapsed() < within {
        let mut line = String::new();
        if body.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let line = line.trim_end();
        if let Some(v) = line.strip_prefix("id: ") {
            id = v.to_string();
        } else if let Some(v) = line.strip_prefix("event: ") {
            event = v.to_string();
        } else if let Some(v) = line.strip_prefix("data: ") {
            if event == name {
                return Some((id, v.to_string()));
            }
            id.clear();
        }
    }
    None
}

#[test]
fn the_list_stream_resumes_from_its_event_id_or_sends_a_snapshot() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let state = scratch.path().join(".cordis");
    plan_session(&state);
    let web = Web::start(&scratch, &[], &[]);
    let list = get(web.addr, "/");
    let after = list.body.split("&amp;after=").nth(1).and_then(|r| r.split('"').next()).expect("the list's live address names its state");
    // A session created after the page was built.
    Log::new("web-later").prompt("Later.").end().write(&state);
    std::thread::sleep(Duration::from_millis(800));
    let path = format!("/live?lang=en&after={after}");
    let (_, mut body) = crate::proxy::open_stream(web.addr, &path, Duration::from_secs(5));
    let (id, data) = next_event(&mut body, "rows", Duration::from_secs(5)).expect("the rows the page missed");
    assert!(data.contains("Later.") && !data.contains("Fix the parser"), "only what changed: {data}");
    let (epoch, version) = id.split_once('.').expect("EPOCH.VERSION");
    assert_eq!(Some(epoch), after.split_once('.').map(|p| p.0));
    assert!(version.parse::<u64>().expect("a version") > after.split_once('.').and_then(|p| p.1.parse::<u64>().ok()).expect("a version"));
    // Resuming from the newest id: nothing to send.
    let (_, mut body) = crate::proxy::open_stream(web.addr, &format!("/live?lang=en&after={id}"), Duration::from_secs(3));
    assert_eq!(next_event(&mut body, "rows", Duration::from_secs(2)), None);
    // An id of another run (a restarted server), or none it can read: the
    // whole list.
    for stale in ["1.3", "garbage", &format!("{epoch}.999999")] {
        let (_, mut body) = crate::proxy::open_stream(web.addr, &format!("/live?lang=en&after={stale}"), Duration::from_secs(5));
        let (_, data) = next_event(&mut body, "snapshot", Duration::from_secs(5)).expect("a snapshot");
        assert!(data.contains("Later.") && data.contains("Fix the parser"), "{stale}: {data}");
    }
}

#[test]
fn one_multiplexed_stream_carries_several_pages() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let list = html_segment("/live?lang=en");
    let session = html_segment("/s/web-plan/live?from=0&lang=zh-TW");
    let (head, mut body) = crate::proxy::open_stream(web.addr, &format!("/mux?sub={list}&sub={session}"), Duration::from_secs(5));
    assert!(head.contains("x-accel-buffering: no"), "{head}");
    // The list's rows (sub 0) may come first: the session's items are sub 1.
    let event = loop {
        let (_, data) = next_event(&mut body, "mux", Duration::from_secs(5)).expect("the session's items");
        let event: serde_json::Value = serde_json::from_str(&data).expect("JSON");
        if event["sub"] == 1 {
            break event;
        }
        assert_eq!((&event["sub"], &event["event"]), (&json!(0), &json!("rows")), "{event}");
    };
    assert_eq!(event["event"], "update");
    assert!(event["data"]["plans"].as_str().is_some_and(|p| p.contains("2 進行中")), "{event}");
    assert_eq!(event["id"], event["data"]["last"].to_string());
    for bad in ["", "?sub=%2Fetc%2Fpasswd", "?sub=%2Fs%2Fa%2Fb%2Flive"] {
        assert_eq!(get(web.addr, &format!("/mux{bad}")).status, 400, "{bad}");
    }
}

/// `s` percent-encoded as one query value.
fn html_segment(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { char::from(b).to_string() } else { format!("%{b:02X}") }).collect()
}

#[test]
fn counts_are_grouped_and_singular_where_they_should_be() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let state = scratch.path().join(".cordis");
    let mut log = Log::new("web-many");
    log.prompt("Many steps.");
    while log.next_seq() < 1_235 {
        log.say("step");
    }
    log.end();
    assert_eq!(log.next_seq(), 1_236);
    log.write(&state);
    // One unreadable line.
    let mut bad = Log::new("web-one-bad");
    bad.prompt("One bad line.").end();
    bad.write(&state);
    let path = state.join("sessions/web-one-bad.jsonl");
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.push_str("not json\n");
    std::fs::write(&path, text).expect("write");
    let web = Web::start(&scratch, &[], &[]);
    let many = get(web.addr, "/s/web-many");
    assert!(many.body.contains("1,236 events"), "no grouped count");
    assert!(many.body.contains("events 837–1,236 of 1,236 events"), "no grouped window");
    let zh = request(web.addr, "GET", "/s/web-many?lang=zh-CN", &[]);
    assert!(zh.body.contains("1,236 个事件"));
    let one = get(web.addr, "/s/web-one-bad");
    assert!(one.body.contains("1 line of this log could not be read or breaks its rules"), "{}", one.body);
}
