//! The pages in headless Chromium: what a reader sees and what a screen
//! reader is told, measured in the page (rendered texts, accessible names,
//! boxes, computed colours), never read off our HTML.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use cordis_tests::{repo_root, text, PgServer, Scratch};
use serde_json::{json, Value};

use crate::http::{hostile_session, long_texts_session, plan_session};
use crate::{four, target_root, Dev, Web, TODO};

/// The Python that has Playwright, installed by `tests/web/setup.sh`.
pub fn python() -> &'static std::path::PathBuf {
    static PYTHON: OnceLock<std::path::PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let dest = target_root().join("web-peers");
        let out = Command::new("bash").arg(repo_root().join("tests/web/setup.sh")).arg(&dest).output().expect("run tests/web/setup.sh");
        assert!(out.status.success(), "tests/web/setup.sh failed:\n{}", text(&out).1);
        dest.join("python/bin/python")
    })
}

/// One browser at a time: the machine has few cores.
static ONE_BROWSER: Mutex<()> = Mutex::new(());

/// A running driver (`tests/web/driver.py`).
pub struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl Browser {
    pub fn start() -> Browser {
        let python = python();
        let turn = ONE_BROWSER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut child = Command::new(python)
            .arg(repo_root().join("tests/web/driver.py"))
            .arg(target_root().join("web-screenshots"))
            // Playwright must use the system's browser and fetch nothing.
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .env("PLAYWRIGHT_BROWSERS_PATH", target_root().join("web-peers/no-browsers"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tests/web/driver.py");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Browser { child, stdin, stdout, _turn: turn }
    }

    pub fn send(&mut self, command: Value) -> Value {
        writeln!(self.stdin, "{command}").expect("write to the driver");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the driver");
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("the driver answered {line:?} ({e}) to {command}"));
        if let Some(e) = answer.get("error") {
            panic!("the browser failed {command}: {e}");
        }
        answer["ok"].clone()
    }

    pub fn open(&mut self, url: &str, width: u32, locale: &str) {
        let status = self.send(json!({"cmd": "open", "url": url, "width": width, "locale": locale}));
        assert_eq!(status, 200, "{url}");
    }

    pub fn texts(&mut self, selector: &str) -> Vec<String> {
        serde_json::from_value(self.send(json!({"cmd": "texts", "selector": selector}))).expect("a list of texts")
    }

    pub fn eval(&mut self, js: &str) -> Value {
        self.send(json!({"cmd": "eval", "js": js}))
    }

    pub fn click(&mut self, selector: &str) {
        self.send(json!({"cmd": "click", "selector": selector}));
    }

    pub fn count_role(&mut self, role: &str, name: &str) -> u64 {
        self.send(json!({"cmd": "count_role", "role": role, "name": name})).as_u64().expect("a count")
    }

    /// Milliseconds until an element matching `selector` shows `text`.
    pub fn wait_text(&mut self, selector: &str, text: &str, timeout_ms: u64) -> f64 {
        self.send(json!({"cmd": "wait_text", "selector": selector, "text": text, "timeout": timeout_ms})).as_f64().expect("a time")
    }

    pub fn screenshot(&mut self, name: &str) {
        self.send(json!({"cmd": "screenshot", "name": name}));
    }

    /// Every visible text below WCAG AA contrast.
    pub fn assert_contrast(&mut self) {
        let report = self.send(json!({"cmd": "contrast"}));
        assert!(report["checked"].as_u64().unwrap_or(0) > 10, "{report}");
        assert_eq!(report["bad"], json!([]), "texts below WCAG AA contrast");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "quit"}));
        let _ = self.stdin.flush();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The row (`.row-head`) whose text holds `needle`, measured.
const ROW: &str = "(needle) => {
  const row = [...document.querySelectorAll('.row-head')].find(r => r.innerText.includes(needle));
  if (!row) return null;
  const box = e => { if (!e) return null; const b = e.getBoundingClientRect(); return {left: b.left, right: b.right, width: b.width}; };
  const summary = row.querySelector('.summary'), suffix = row.querySelector('.suffix');
  return {
    row: box(row), summary: box(summary), suffix: box(suffix),
    summaryText: summary.innerText, suffixText: suffix ? suffix.querySelector('[aria-hidden=true]').innerText : null,
    separate: !!suffix && !summary.contains(suffix) && !suffix.contains(summary),
    ellipsized: summary.scrollWidth > summary.clientWidth,
    suffixClipped: suffix ? suffix.scrollWidth > suffix.clientWidth + 0.5 : null,
    viewport: window.innerWidth, pageWidth: document.documentElement.scrollWidth,
  };
}";

fn row(browser: &mut Browser, needle: &str) -> Value {
    browser.send(json!({"cmd": "eval", "js": ROW, "arg": needle}))
}

#[test]
fn the_parallel_plan_reads_right_in_the_browser() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    b.open(&web.url("/s/web-plan"), 1024, "en-US");
    // The strip: its header counts every status, and it is a disclosure.
    assert_eq!(b.texts(".plan-counts"), vec!["1 completed · 2 in progress · 1 pending"]);
    assert_eq!(b.eval("document.querySelector('.plan-head').getAttribute('aria-expanded')"), "false");
    assert_eq!(b.eval("document.querySelector('.plan-items').hidden"), true);
    b.click(".plan-head");
    assert_eq!(b.eval("document.querySelector('.plan-head').getAttribute('aria-expanded')"), "true");
    assert_eq!(b.texts(".plan-items .pi-text"), vec!["read the code", "ship it", "watch the background build", "write the fix"]);
    for (name, n) in [("in progress", 2), ("completed", 1), ("pending", 1)] {
        let found = b
            .eval(&format!("[...document.querySelectorAll('.plan-items [role=img]')].filter(e => e.getAttribute('aria-label') === '{name}').length"));
        assert_eq!(found, n, "glyphs named {name}");
    }
    // The row of the four-item plan: summary and suffix apart, the suffix
    // named for a screen reader.
    let four_row = row(&mut b, "read the code");
    assert_eq!(four_row["summaryText"], "1/4 completed · read the code");
    assert_eq!(four_row["suffixText"], "+1");
    assert_eq!(four_row["separate"], true);
    assert_eq!(b.count_role("button", "1/4 completed · read the code and 1 more in progress"), 1);
    assert_eq!(b.count_role("img", "succeeded"), 2);
    // The error row: the failure line, no suffix, though its arguments name
    // two active items.
    let error_row = row(&mut b, "Error:");
    assert_eq!(error_row["summaryText"], "Error: invalid arguments: $.extra is not an allowed key (allowed: todos)");
    assert_eq!(error_row["suffix"], Value::Null);
    assert_eq!(b.count_role("img", "failed"), 1);
    // The keyboard reaches the strip and opens and closes it.
    b.send(json!({"cmd": "goto", "url": web.url("/s/web-plan")}));
    let mut reached = false;
    for _ in 0..10 {
        b.send(json!({"cmd": "press", "key": "Tab"}));
        if b.eval("document.activeElement.classList.contains('plan-head')") == true {
            reached = true;
            break;
        }
    }
    assert!(reached, "Tab never reaches the plan strip");
    b.send(json!({"cmd": "press", "key": "Enter"}));
    assert_eq!(b.eval("document.querySelector('.plan-items').hidden"), false);
    b.send(json!({"cmd": "press", "key": " "}));
    assert_eq!(b.eval("document.querySelector('.plan-items').hidden"), true);
    b.click(".plan-head");
    b.assert_contrast();
    b.screenshot("session-en");
    b.open(&web.url("/"), 1024, "en-US");
    assert_eq!(b.texts(".c-plan"), vec!["1 completed · 2 in progress · 1 pending"]);
    b.assert_contrast();
    b.screenshot("list-en");
}

#[test]
fn the_suffix_stays_visible_at_320_pixels() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    b.open(&web.url("/s/web-plan"), 320, "en-US");
    let long = row(&mut b, "implement the");
    assert!(
        long["summaryText"].as_str().is_some_and(|s| s.starts_with("1/4 completed · implement the xxx") && s.ends_with("x fixture sample")),
        "{long}"
    );
    assert_eq!(long["suffixText"], "+2");
    assert_eq!(long["separate"], true);
    assert_eq!(long["ellipsized"], true, "the 200-character name is cut: {long}");
    assert_eq!(long["suffixClipped"], false, "{long}");
    let (suffix, summary, row_box) = (&long["suffix"], &long["summary"], &long["row"]);
    let f = |v: &Value| v.as_f64().expect("a number");
    assert!(f(&suffix["width"]) > 8.0, "{long}");
    assert!(f(&suffix["left"]) >= f(&summary["right"]) - 0.5, "the suffix sits after the summary: {long}");
    assert!(f(&suffix["right"]) <= f(&row_box["right"]) + 0.5, "the suffix is inside its row: {long}");
    assert!(f(&suffix["right"]) <= f(&long["viewport"]), "the suffix is inside the viewport: {long}");
    assert!(f(&long["pageWidth"]) <= 320.0, "the page does not scroll sideways: {long}");
    assert_eq!(b.count_role("button", "and 2 more in progress"), 1);
    b.screenshot("session-320px");
}

#[test]
fn the_zh_cn_labels() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    b.open(&web.url("/s/web-plan"), 1024, "zh-CN");
    assert_eq!(b.eval("document.documentElement.lang"), "zh-CN");
    assert_eq!(b.texts(".plan-counts"), vec!["1 已完成 · 2 进行中 · 1 待处理"]);
    assert_eq!(row(&mut b, "read the code")["summaryText"], "1/4 已完成 · read the code");
    assert_eq!(b.count_role("button", "另有 1 项进行中"), 1);
    assert_eq!(b.count_role("button", "另有 2 项进行中"), 1);
    assert_eq!(b.count_role("img", "成功"), 2);
    assert_eq!(b.texts(".plan-label"), vec!["计划"]);
    assert!(b.texts(".tool-name").iter().all(|t| t == "更新待办列表"), "{:?}", b.texts(".tool-name"));
    assert!(b.texts("#head")[0].contains("个事件"), "{:?}", b.texts("#head"));
    b.assert_contrast();
    b.screenshot("session-zh-CN");
    // The switch: English, remembered for the next page.
    b.click("nav.langs a[lang=en]");
    b.wait_text(".plan-counts", "1 completed · 2 in progress · 1 pending", 10_000);
    b.send(json!({"cmd": "goto", "url": web.url("/")}));
    assert_eq!(b.texts("h1"), vec!["Sessions"]);
}

#[test]
fn traditional_chinese_readers_get_traditional_with_the_switch() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    plan_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    // Over HTTP: every Traditional tag, and `?lang=zh-TW` over a Simplified
    // browser.
    for accept in ["zh-TW", "zh-HK", "zh-Hant", "zh-Hant-HK,zh;q=0.9", "zh-TW,zh;q=0.9,en-US;q=0.8,en;q=0.7"] {
        let page = crate::http::request(web.addr, "GET", "/s/web-plan", &[("Accept-Language", accept)]);
        assert!(page.body.contains("<html lang=\"zh-TW\">"), "{accept}: {}", &page.body[..200]);
        assert!(page.body.contains("1 已完成 · 2 進行中 · 1 待處理") && !page.body.contains("进行中"), "{accept}");
    }
    let chosen = crate::http::request(web.addr, "GET", "/?lang=zh-TW", &[("Accept-Language", "zh-CN")]);
    assert!(chosen.body.contains("<html lang=\"zh-TW\">") && chosen.body.contains("工作階段"), "{}", chosen.body);
    // In the browser: the labels, the tool's title, and the switch.
    let mut b = Browser::start();
    b.open(&web.url("/s/web-plan"), 1024, "zh-TW");
    assert_eq!(b.eval("document.documentElement.lang"), "zh-TW");
    assert_eq!(b.texts(".plan-counts"), vec!["1 已完成 · 2 進行中 · 1 待處理"]);
    assert_eq!(b.texts(".plan-label"), vec!["計畫"]);
    assert_eq!(b.count_role("button", "另有 2 項進行中"), 1);
    assert!(b.texts(".tool-name").iter().all(|t| t == "更新待辦清單"), "{:?}", b.texts(".tool-name"));
    assert_eq!(b.texts("nav.langs a"), vec!["English", "简体中文", "繁體中文"]);
    assert_eq!(b.eval("document.querySelector('nav.langs a[aria-current=true]').lang"), "zh-TW");
    b.assert_contrast();
    b.screenshot("session-zh-TW");
    b.click("nav.langs a[lang=en]");
    b.wait_text(".plan-counts", "1 completed · 2 in progress · 1 pending", 10_000);
    b.click("nav.langs a[lang=zh-TW]");
    b.wait_text(".plan-counts", "1 已完成 · 2 進行中 · 1 待處理", 10_000);
}

#[test]
fn nine_tabs_and_a_tenth_navigation_all_load_and_go_live() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let state = scratch.path().join(".cordis");
    for n in 0..8 {
        crate::Log::new(&format!("web-tab-{n}")).prompt(&format!("Tab {n} of many.")).say("Here.").end().write(&state);
    }
    let mut dev = Dev::start(&scratch, &[]);
    dev.write(&json!([{"content": "first task", "status": "in_progress"}]));
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    // Tab 0: the list; tabs 1-7: a session each; tab 8: the session being
    // written. Browsers allow six connections per host over HTTP/1.1: with
    // a stream per page, the seventh tab would never load.
    b.open(&web.url("/"), 1024, "en-US");
    b.wait_text("#live-status", "Live", 10_000);
    let mut urls: Vec<String> = (0..7).map(|n| web.url(&format!("/s/web-tab-{n}"))).collect();
    urls.push(web.url(&format!("/s/{}", dev.id)));
    for (n, url) in urls.iter().enumerate() {
        let start = std::time::Instant::now();
        let tab = b.send(json!({"cmd": "tab_new", "url": url, "timeout": 10_000}));
        assert_eq!(tab, n as u64 + 1);
        b.wait_text("#live-status", "Live", 10_000);
        eprintln!("tab {}: loaded and live after {:?}", n + 1, start.elapsed());
    }
    assert_eq!(b.send(json!({"cmd": "tabs"})), 9);
    // The tenth navigation: the list tab goes to the last stored session.
    b.send(json!({"cmd": "tab", "index": 0}));
    b.send(json!({"cmd": "goto", "url": web.url("/s/web-tab-7")}));
    assert_eq!(b.texts("h1"), vec!["Tab 7 of many."]);
    b.wait_text("#live-status", "Live", 10_000);
    // Every tab is live: an append reaches the tab showing its session, and
    // a tab opened before it.
    dev.write(&four());
    b.send(json!({"cmd": "tab", "index": 8}));
    b.wait_text(".plan-counts", "1 completed · 2 in progress · 1 pending", 10_000);
    for n in 0..9 {
        b.send(json!({"cmd": "tab", "index": n}));
        b.wait_text("#live-status", "Live", 5_000);
    }
    // The server holds at most the browser's six connections: one stream
    // for every tab, and what page loads keep open.
    let port = web.addr.port();
    let out = std::process::Command::new("ss").args(["-Htn", "state", "established", &format!("( sport = :{port} )")]).output().expect("run ss");
    let connections = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!((1..=6).contains(&connections), "{connections} connections to the server");
}

#[test]
fn the_list_keeps_each_plan_on_one_line_at_1280_pixels() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let state = scratch.path().join(".cordis");
    let plan = four();
    crate::Log::new("web-wide")
        .prompt(&"a long first prompt that fills the title column ".repeat(5))
        .call("", "todo_write", &crate::todo_args(&plan), Some(plan.clone()), "ok", false)
        .end()
        .write(&state);
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    b.open(&web.url("/"), 1280, "en-US");
    let lines = b.eval(
        "(() => { const c = document.querySelector('.c-plan'); const r = document.createRange(); r.selectNodeContents(c);          return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; })()",
    );
    assert_eq!(lines, 1, "the plan column wraps at 1280 px");
    let title = b.texts(".c-title a")[0].clone();
    assert!(title.ends_with('…') && title.chars().count() == 201, "{title}");
    b.screenshot("list-1280px");
    // In Traditional Chinese too, each status badge keeps to one line.
    b.open(&web.url("/?lang=zh-TW"), 1280, "zh-TW");
    let lines = b.eval(
        "(() => Math.max(...[...document.querySelectorAll('.status')].map(s => { const r = document.createRange(); r.selectNodeContents(s);          return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; })))()",
    );
    assert_eq!(lines, 1, "a status badge wraps at 1280 px in zh-TW");
}

#[test]
fn a_page_left_open_keeps_a_bounded_number_of_items() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let state = scratch.path().join(".cordis");
    let mut log = crate::Log::new("web-growing");
    log.prompt("Grow.");
    while log.next_seq() < 500 {
        log.say("early");
    }
    log.write(&state);
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    b.open(&web.url("/s/web-growing"), 1024, "en-US");
    b.wait_text("#live-status", "Live", 10_000);
    let first = "Number(/^i(\\d+)/.exec(document.querySelector('#items').firstElementChild.id)[1])";
    assert_eq!(b.eval(first), 102, "the page opens on the last 400 events");
    // 900 more events arrive while the page is open.
    while log.next_seq() < 1_400 {
        log.say("late");
    }
    log.say("the last step").write(&state);
    b.wait_text("#items", "the last step", 10_000);
    let total = log.next_seq();
    let oldest = b.eval(first).as_u64().expect("a seq");
    assert!(oldest >= total - 800, "the page still holds event {oldest} of {total}");
    let items = b.eval("document.querySelectorAll('#items > li').length").as_u64().expect("a count");
    assert!(items <= 800, "{items} items on the page");
    let earlier = b.eval("document.querySelector('#pager a[rel=prev]').getAttribute('href')");
    assert_eq!(earlier, format!("/s/web-growing?before={}", total - 800), "the earlier link moves up with the page");
}

#[test]
fn long_reasoning_says_what_was_cut_and_links_the_rest() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    long_texts_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    b.open(&web.url("/s/web-long-text"), 1024, "en-US");
    b.click(".reasoning .fold");
    let note = b.texts(".reasoning .cut");
    assert_eq!(note.len(), 2, "{note:?}");
    assert!(note[0].contains("showing the first 100,000 of 150,016 characters") && note[0].contains("the whole text"), "{note:?}");
    let href = b.eval("document.querySelector('.reasoning .cut a').href");
    let href = href.as_str().expect("a link").to_string();
    b.send(json!({"cmd": "goto", "url": href}));
    let whole = b.eval("document.body.innerText");
    let whole = whole.as_str().expect("the text");
    assert_eq!(whole.chars().count(), 150_016);
    assert!(whole.ends_with("END-OF-REASONING"));
}

#[test]
fn hostile_text_stays_text_in_the_browser() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    hostile_session(&scratch.path().join(".cordis"));
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    b.open(&web.url("/s/web-hostile"), 1024, "en-US");
    b.click(".row-head");
    b.click(".plan-head");
    assert_eq!(b.eval("typeof window.__pwned"), "undefined");
    assert_eq!(b.eval("document.querySelectorAll('script').length"), 1);
    assert_eq!(b.eval("document.querySelectorAll('img, b, iframe, [onerror]').length"), 0);
    assert_eq!(b.eval("[...document.querySelectorAll('a')].filter(a => !a.href.startsWith(location.origin)).length"), 0);
    let user = b.texts(".item.user .text").join("\n");
    assert!(user.contains("<script>window.__pwned=1</script>") && user.contains("javascript:alert(1)"), "{user}");
    // The override is named, not obeyed: the text after it reads as written.
    assert!(user.contains("abcU+202Efed") && user.contains("U+2066x"), "{user}");
    let result = b.texts(".row-body .text").join("\n");
    assert!(result.contains("<a href=\"javascript:window.__pwned=4\">click</a><b>bold</b>"), "{result}");
    assert_eq!(b.texts(".pi-text"), vec!["<script>window.__pwned=6</script>"]);
    // The 1 MiB message: cut, with the whole text one link away.
    let cut = b.texts(".cut").join("\n");
    assert!(cut.contains("showing the first 100,000 of 1,048,576 characters"), "{cut}");
    assert_eq!(b.eval("typeof window.__pwned"), "undefined");
    b.screenshot("session-hostile");
}

/// Opens the live page of `dev`'s session, appends from `dev`, and waits
/// for the new plan; returns the milliseconds it took to show.
fn live_update(b: &mut Browser, web: &Web, dev: &mut Dev, name: &str) -> f64 {
    dev.write(&json!([{"content": "first task", "status": "in_progress"}]));
    b.open(&web.url(&format!("/s/{}", dev.id)), 1024, "en-US");
    assert_eq!(b.texts(".plan-counts"), vec!["1 in progress"]);
    b.wait_text("#live-status", "Live", 10_000);
    dev.write(&four());
    let took = b.wait_text(".plan-counts", "1 completed · 2 in progress · 1 pending", 15_000);
    // The change is announced to screen readers, once.
    assert_eq!(b.eval("document.getElementById('plan-said').getAttribute('aria-live')"), "polite");
    b.wait_text("#plan-said", "Plan 1 completed · 2 in progress · 1 pending", 2_000);
    b.wait_text(".row-head", "1/4 completed · read the code", 5_000);
    assert_eq!(b.eval("document.querySelectorAll('.row-head').length"), 2);
    b.screenshot(name);
    took
}

#[test]
fn a_live_update_arrives_from_another_process() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    let mut dev = Dev::start(&scratch, &[]);
    let web = Web::start(&scratch, &[], &[]);
    let mut b = Browser::start();
    let took = live_update(&mut b, &web, &mut dev, "live-flat");
    eprintln!("flat store: the append showed after {took:.0} ms");
    // The list: a session started elsewhere appears, live.
    b.open(&web.url("/"), 1024, "en-US");
    b.wait_text("#live-status", "Live", 10_000);
    assert_eq!(b.eval("document.querySelectorAll('#rows tr').length"), 1);
    let mut other = Dev::start(&scratch, &[]);
    other.write(&json!([{"content": "a", "status": "completed"}, {"content": "b", "status": "completed"}, {"content": "c", "status": "completed"}]));
    b.wait_text("#rows", "3 completed", 15_000);
    assert_eq!(b.eval("document.querySelectorAll('#rows tr').length"), 2);
    b.screenshot("live-list");
}

#[test]
fn a_live_update_arrives_from_another_host_on_postgresql() {
    let server = PgServer::start();
    let composition = format!("{TODO}- id: sessions\n  name: session-postgres\n  config:\n    urlEnv: CORDIS_TEST_PG_URL\n    schema: web\n");
    let (here, there) = (Scratch::new(), Scratch::new());
    here.composition(&composition);
    there.composition(&composition);
    let url = server.url();
    let env = [("CORDIS_TEST_PG_URL", url.as_str())];
    let mut dev = Dev::start(&there, &env);
    let web = Web::start(&here, &[], &env);
    let mut b = Browser::start();
    let took = live_update(&mut b, &web, &mut dev, "live-postgres");
    eprintln!("PostgreSQL: the append showed after {took:.0} ms");
}
