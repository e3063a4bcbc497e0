//! One contract, every store: the flat files, the harness's store, and
//! PostgreSQL both connected directly and through PgBouncer in transaction
//! mode. Each test below runs against every store (a module per store, made
//! by `contract!`); the PostgreSQL-only parts (connections cut, servers
//! restarted, lease run-outs) run against both ways of connecting.
//!
//! A "host" is a `cordis` process with its own working folder whose
//! composition points at the one shared store.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use cordis_session::store::{Durability, FlatStore, LogWriter, Position, SessionStore, Since};
use cordis_session::{Compression, Event, HarnessStore, Header, PostgresStore};
pub use cordis_tests::dev::Dev;
use cordis_tests::{calls_until_killed, cordis_exe, plugin_dir, repo_root, text, PgBouncer, PgServer, Rng, Scratch};
use serde_json::Value;

const URL_VAR: &str = "CORDIS_TEST_PG_URL";

/// The stores of the contract.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Flat,
    Harness,
    Postgres,
    PgBouncer,
}

/// One shared store and what it runs on.
pub struct Store {
    kind: Kind,
    /// The flat store's state folder, or the harness store's root.
    shared: Scratch,
    server: Option<PgServer>,
    bouncer: Option<PgBouncer>,
    schema: String,
}

impl Store {
    pub fn new(kind: Kind) -> Store {
        Store::with_schema(kind, "agents")
    }

    pub fn with_schema(kind: Kind, schema: &str) -> Store {
        let server = matches!(kind, Kind::Postgres | Kind::PgBouncer).then(PgServer::start);
        let bouncer = (kind == Kind::PgBouncer).then(|| PgBouncer::start(server.as_ref().unwrap()));
        Store { kind, shared: Scratch::new(), server, bouncer, schema: schema.to_string() }
    }

    fn url(&self) -> Option<String> {
        match (&self.bouncer, &self.server) {
            (Some(b), _) => Some(b.url()),
            (None, Some(s)) => Some(s.url()),
            _ => None,
        }
    }

    pub fn server(&self) -> &PgServer {
        self.server.as_ref().expect("a PostgreSQL store")
    }

    /// How long a killed writer may keep its session: at once for files and
    /// for a direct connection (the server ends the killed writer's
    /// process); the lease (2 s here) behind a pooler.
    fn takeover_within(&self) -> Duration {
        match self.kind {
            Kind::PgBouncer => Duration::from_secs(8),
            _ => Duration::from_secs(3),
        }
    }

    pub fn host(&self) -> Host<'_> {
        self.host_with("")
    }

    /// A host whose composition has `extra` entries after the store's.
    pub fn host_with(&self, extra: &str) -> Host<'_> {
        let scratch = Scratch::new();
        let todo = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n";
        let store = match self.kind {
            Kind::Flat => String::new(),
            Kind::Harness => format!(
                "- id: persistence\n  name: '@deepseek-ai/dsh-session-persistence-jsonl'\n  config:\n    root: {}\n    compression: zstd\n",
                self.shared.path().display()
            ),
            Kind::Postgres | Kind::PgBouncer => format!(
                "- id: sessions\n  name: session-postgres\n  config:\n    urlEnv: {URL_VAR}\n    schema: {}\n    leaseSeconds: 2\n",
                self.schema
            ),
        };
        scratch.composition(&format!("{todo}{store}{extra}"));
        Host { store: self, scratch }
    }
}

/// One `cordis` host on the shared store.
pub struct Host<'a> {
    store: &'a Store,
    scratch: Scratch,
}

impl Host<'_> {
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(cordis_exe());
        if self.store.kind == Kind::Flat {
            cmd.arg("--state-dir").arg(self.store.shared.path());
        }
        cmd.args(args)
            .current_dir(self.scratch.path())
            .env("CORDIS_PLUGIN_PATH", plugin_dir())
            .env("XDG_CONFIG_HOME", self.scratch.path().join(".config"))
            .env_remove("RUST_LOG");
        if let Some(url) = self.store.url() {
            cmd.env(URL_VAR, url);
        }
        cmd
    }

    pub fn cordis(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run cordis")
    }

    /// One scripted turn; `Err` with stderr when cordis refused.
    pub fn try_run(&self, session: Option<&str>, prompt: &str) -> Result<String, String> {
        let script = repo_root().join("examples/plan-and-ship.script.yml").display().to_string();
        let mut args = vec!["run", "--script", &script];
        if let Some(id) = session {
            args.extend(["--session", id]);
        }
        args.push(prompt);
        let out = self.cordis(&args);
        let (stdout, stderr) = text(&out);
        if !out.status.success() {
            return Err(format!("{stdout}{stderr}"));
        }
        let line = stdout.lines().find(|l| l.starts_with("session ")).ok_or_else(|| format!("no session line: {stdout}"))?;
        Ok(line.split_whitespace().nth(1).unwrap_or_default().to_string())
    }

    pub fn run(&self, session: Option<&str>, prompt: &str) -> String {
        self.try_run(session, prompt).unwrap_or_else(|e| panic!("cordis run failed on {:?}: {e}", self.store.kind))
    }

    pub fn export(&self, id: &str) -> String {
        let out = self.cordis(&["session", "export", id]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "export {id} on {:?}: {stderr}", self.store.kind);
        stdout
    }

    /// Starts `cordis dev` on `session`, trying again while the session's
    /// last writer (killed) may still hold it, within the store's bound.
    pub fn dev_when_free(&self, session: &str) -> Dev {
        let start = Instant::now();
        loop {
            match self.try_dev(Some(session), &[]) {
                Ok(dev) => return dev,
                Err(e) => assert!(start.elapsed() < self.store.takeover_within(), "{:?}: {e}", self.store.kind),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts `cordis dev` (on `session`) with `extra` options before the
    /// command; waits until it is ready.
    pub fn dev(&self, session: Option<&str>, extra: &[&str]) -> Dev {
        self.try_dev(session, extra).unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_dev(&self, session: Option<&str>, extra: &[&str]) -> Result<Dev, String> {
        let mut args: Vec<&str> = extra.to_vec();
        args.push("dev");
        if let Some(id) = session {
            args.extend(["--session", id]);
        }
        Dev::spawn(self.command(&args)).map_err(|e| format!("{:?}: {e}", self.store.kind))
    }

    /// Starts `cordis session watch ARGS`; its stdout lines arrive on the
    /// receiver.
    pub fn watch(&self, args: &[&str]) -> (Child, Receiver<String>) {
        let mut all = vec!["session", "watch"];
        all.extend(args);
        let mut child = self.command(&all).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn watch");
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let lines = BufReader::new(child.stdout.take().expect("stdout"));
        std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (child, rx)
    }
}

/// Waits for a line holding `needle`; panics after `within`.
pub fn wait_for(rx: &Receiver<String>, needle: &str, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let left = within.checked_sub(start.elapsed()).unwrap_or_else(|| panic!("`{needle}` not shown within {within:?}"));
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return start.elapsed(),
            Ok(_) => {}
            Err(_) => panic!("`{needle}` not shown within {within:?}"),
        }
    }
}

/// The contents of every `todo/write` in an export.
pub fn written_todos(export: &str) -> Vec<String> {
    export
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "todo/write")
        .filter_map(|e| e["data"]["todos"][0]["content"].as_str().map(str::to_string))
        .collect()
}

/// `session show`'s problem lines.
pub fn shown_problems(host: &Host, id: &str) -> Vec<String> {
    let out = host.cordis(&["session", "show", id]);
    assert!(out.status.success(), "{}", text(&out).1);
    text(&out).0.lines().filter(|l| l.trim_start().starts_with("problem:")).map(str::to_string).collect()
}

/// `cordis check --sessions`, as text and as JSON: both succeed (the
/// composition is sound) within 10 s, whatever the store holds.
pub fn checked_sessions(host: &Host) -> (String, Value) {
    let start = Instant::now();
    let out = host.cordis(&["check", "--sessions"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "check --sessions: {stdout}{stderr}");
    let out = host.cordis(&["check", "--sessions", "--json"]);
    assert!(out.status.success(), "check --sessions --json: {}", text(&out).1);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("check --json: {e}: {}", text(&out).0));
    assert!(start.elapsed() < Duration::from_secs(10), "check --sessions took {:?}", start.elapsed());
    (stdout, json["sessions"].clone())
}

/// Asserts that `check --sessions` reports session `id`'s compaction cut
/// short at `seq`, and whether closing will complete it (`landed`) or
/// mark it failed; and that it is the only one.
fn assert_checked_cut_short(kind: Kind, host: &Host, id: &str, seq: u64, landed: bool) {
    let (shown, json) = checked_sessions(host);
    let how = if landed { "so it will be completed" } else { "so it will be closed as failed" };
    let line = shown.lines().find(|l| l.starts_with(&format!("session {id}: "))).unwrap_or_else(|| panic!("{kind:?}: no line for {id}: {shown}"));
    assert!(line.contains(&format!("(compaction/start at seq {seq}) has no compaction/end")) && line.contains(how), "{kind:?}: {line}");
    assert!(shown.contains("; 1 has a compaction cut short"), "{kind:?}: {shown}");
    let cut = json["cutShort"].as_array().unwrap_or_else(|| panic!("{kind:?}: {json}"));
    assert_eq!(cut.len(), 1, "{kind:?}: {json}");
    assert_eq!((cut[0]["id"].as_str(), cut[0]["seq"].as_u64(), cut[0]["landed"].as_bool()), (Some(id), Some(seq), Some(landed)), "{kind:?}: {json}");
    assert_eq!(cut[0]["closing"], if landed { "completed" } else { "failed" }, "{kind:?}: {json}");
}

/// Asserts that `check --sessions` finds no compaction cut short.
fn assert_checked_none(kind: Kind, host: &Host) {
    let (shown, json) = checked_sessions(host);
    assert!(shown.contains("; none has a compaction cut short"), "{kind:?}: {shown}");
    assert_eq!(json["cutShort"], serde_json::json!([]), "{kind:?}: {json}");
    assert!(json["sessions"].as_u64().is_some_and(|n| n > 0), "{kind:?}: {json}");
}

/// The seq of the first `compaction/start` of an export.
fn first_start_seq(export: &str) -> u64 {
    export
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "compaction/start")
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("no compaction/start with a seq: {export}"))
}

// ---------------------------------------------------------------------
// The contract, for every store.

/// Writers killed at random points, alternating between two hosts: every
/// acknowledged call is in the log afterwards, read from the other host,
/// and the log has no structure problem.
pub fn acknowledged_events_survive_kills(kind: Kind) {
    let store = Store::new(kind);
    let hosts = [store.host(), store.host()];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut session: Option<String> = None;
    let mut acknowledged = Vec::new();
    for round in 0..8 {
        let mut dev = match &session {
            Some(id) => hosts[round % 2].dev_when_free(id),
            None => hosts[round % 2].dev(None, &[]),
        };
        session.get_or_insert(dev.session.clone());
        // One call before the kills start: the harness store writes nothing
        // before a session's first event.
        let opened = format!("round {round} opened");
        assert_eq!(dev.todo(&opened)["isError"], false);
        acknowledged.push(opened);
        let delay = Duration::from_micros(20_000 + rng.next_u64() % 120_000);
        acknowledged.extend(calls_until_killed(&mut dev.child, &mut dev.stdin, &mut dev.stdout, delay, &format!("round {round}")));
        let written = written_todos(&hosts[(round + 1) % 2].export(session.as_deref().unwrap_or_default()));
        for content in &acknowledged {
            assert!(written.contains(content), "{kind:?} round {round}: acknowledged {content:?} is missing");
        }
    }
    assert!(acknowledged.len() >= 8, "{kind:?}: only {} calls acknowledged", acknowledged.len());
}

/// A second writer is refused while the first lives, naming it; once the
/// first is killed the session is free within the store's bound.
pub fn one_writer_then_takeover_after_a_kill(kind: Kind) {
    let store = Store::new(kind);
    let (a, b) = (store.host(), store.host());
    let mut dev = a.dev(None, &[]);
    assert_eq!(dev.todo("held by a")["isError"], false);
    let id = dev.session.clone();
    let refused = b.try_run(Some(&id), "mine now").expect_err("a second writer is refused");
    assert!(
        refused.contains("is being written by") || refused.contains("is open in another process"),
        "{kind:?}: the refusal names the holder: {refused}"
    );
    if matches!(kind, Kind::Postgres | Kind::PgBouncer) {
        assert!(refused.contains(&format!("pid {}", dev.child.id())), "{kind:?}: {refused}");
    }
    dev.kill();
    let start = Instant::now();
    loop {
        match b.try_run(Some(&id), "mine now") {
            Ok(_) => break,
            Err(e) => assert!(start.elapsed() < store.takeover_within(), "{kind:?}: a killed writer still holds the session: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("{kind:?}: taken over {:?} after the kill", start.elapsed());
    let export = b.export(&id);
    assert!(written_todos(&export).contains(&"held by a".to_string()));
    assert!(shown_problems(&b, &id).is_empty(), "{kind:?}: {:?}", shown_problems(&b, &id));
}

/// `--durability turn` makes the same promise everywhere: every
/// acknowledged event is visible to readers at once and survives a kill of
/// the process.
pub fn turn_durability_loses_nothing_on_a_kill(kind: Kind) {
    let store = Store::new(kind);
    let (a, reader) = (store.host(), store.host());
    let mut dev = a.dev(None, &["--durability", "turn"]);
    let contents: Vec<String> = (0..20).map(|i| format!("turn call {i}")).collect();
    for c in &contents {
        assert_eq!(dev.todo(c)["isError"], false);
    }
    let id = dev.session.clone();
    let seen = written_todos(&reader.export(&id));
    assert_eq!(seen, contents, "{kind:?}: acknowledged events are visible to another reader before the turn ends");
    let _ = Command::new("kill").args(["-KILL", &dev.child.id().to_string()]).status();
    let _ = dev.child.wait();
    assert_eq!(written_todos(&reader.export(&id)), contents, "{kind:?}: a kill lost acknowledged events");
}

/// `session watch ID` and `session watch --all` show appends made by other
/// processes, sessions started after the watch began included.
pub fn watch_follows_one_and_every_session(kind: Kind) {
    let store = Store::new(kind);
    let (writer, watcher) = (store.host(), store.host());
    let mut dev = writer.dev(None, &[]);
    assert_eq!(dev.todo("first")["isError"], false);
    let (mut one, one_rx) = watcher.watch(&[&dev.session]);
    let (mut all, all_rx) = watcher.watch(&["--all"]);
    wait_for(&one_rx, "first", Duration::from_secs(10));
    wait_for(&all_rx, "first", Duration::from_secs(10));
    for i in 0..3 {
        let content = format!("written elsewhere {i}");
        assert_eq!(dev.todo(&content)["isError"], false);
        let took = wait_for(&one_rx, &content, Duration::from_secs(3));
        wait_for(&all_rx, &content, Duration::from_secs(3));
        eprintln!("{kind:?}: watch showed it after {took:?}");
    }
    // A session started after the watch began.
    let mut other = store.host().dev(None, &[]);
    assert_eq!(other.todo("in a new session")["isError"], false);
    wait_for(&all_rx, &format!("session {}", other.session), Duration::from_secs(5));
    for child in [&mut one, &mut all] {
        let _ = child.kill();
        let _ = child.wait();
    }
    dev.kill();
    other.kill();
}

/// The compaction entry of the compaction contract: compact at half the
/// window, keep a tenth.
const COMPACTION: &str = "- id: compaction\n  name: '@deepseek-ai/dsh-compaction-basic'\n  config:\n    thresholdRatio: 0.5\n    retainRatio: 0.1\n    maxTokens: 512\n    compactionRetries: 1\n";

/// The compaction events of an export, as (type, data).
fn compaction_events(export: &str) -> Vec<(String, Value)> {
    export
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("compaction/")))
        .map(|e| (e["type"].as_str().unwrap_or_default().to_string(), e["data"].clone()))
        .collect()
}

/// Whether every `compaction/start` of an export has its `compaction/end`.
fn every_start_ended(export: &str) -> bool {
    let events = compaction_events(export);
    let starts: Vec<&Value> = events.iter().filter(|(t, _)| t == "compaction/start").map(|(_, d)| &d["compactionId"]).collect();
    starts.iter().all(|id| events.iter().any(|(t, d)| t == "compaction/end" && &&d["compactionId"] == id))
}

/// A compaction cut short at each of its steps is closed when the session
/// is next opened, `session show` reports it until then, and compaction
/// works again. The first cut is a real one: `cordis run` is killed with
/// SIGKILL while its summary request hangs at a mock provider. The others
/// (after the summary, after the replacing message, after the carried
/// plan) are the log of a whole compaction cut after that event, imported
/// into the store as a session of its own.
pub fn a_compaction_cut_short_is_closed_when_next_opened(kind: Kind) {
    use cordis_tests::sse_server::{Reply, SseServer};
    let started = Instant::now();
    let store = Store::new(kind);
    let server = SseServer::start(vec![Reply::Silent(Duration::from_secs(60))]);
    let model = format!(
        "- id: model\n  name: llm-openai\n  config:\n    baseUrl: {}\n    model: deepseek-v4-flash\n    apiKeyEnv: CORDIS_TEST_KEY\n    contextWindow: 2400\n",
        server.base_url
    );
    let scripted = store.host_with(COMPACTION);
    let live = store.host_with(&format!("{COMPACTION}{model}"));
    let long = scripted.scratch.path().join("long.script.yml");
    std::fs::write(&long, crate::compaction::long_script(10, 100_000, &[])).expect("write the script");
    let summary = scripted.scratch.path().join("summary.script.yml");
    let one = serde_json::to_string(crate::compaction::SUMMARY).expect("a JSON string");
    std::fs::write(&summary, format!("summaries: [{one}, {one}]\n")).expect("write the script");
    let summary = summary.display().to_string();
    let out = scripted.cordis(&["run", "--script", &long.display().to_string(), "do the long job"]);
    assert!(out.status.success(), "{kind:?}: {}", text(&out).1);
    let id =
        text(&out).0.lines().find_map(|l| l.strip_prefix("session ")).and_then(|l| l.split_whitespace().next()).expect("a session line").to_string();

    // The real cut: killed while the summary request is pending.
    let mut child = live
        .command(&["run", "--session", &id, "carry on"])
        .env("CORDIS_TEST_KEY", "sk-test")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cordis run");
    let requests = server.wait_for_requests(1);
    let body = &requests[0].body;
    assert!(
        body["messages"].as_array().and_then(|m| m.last()).is_some_and(|m| m["content"].as_str().unwrap_or_default().contains("checkpoint")),
        "{kind:?}: the first request asks for a summary: {body}"
    );
    let _ = Command::new("kill").args(["-KILL", &child.id().to_string()]).status();
    let _ = child.wait();
    let export = scripted.export(&id);
    let events = compaction_events(&export);
    assert_eq!(events.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), ["compaction/start"], "{kind:?}: the kill left a start alone");
    let problems = shown_problems(&scripted, &id);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("has no compaction/end") && p.contains("cut short") && p.contains("closed as failed with the history as it was")),
        "{kind:?}: session show reports it and how it will be closed: {problems:?}"
    );
    let listed = text(&scripted.cordis(&["session", "ls"])).0;
    let row = listed.lines().find(|l| l.starts_with(&id)).unwrap_or_default();
    assert!(row.contains("(compaction cut short at seq "), "{kind:?}: session ls flags it: {listed}");
    assert!(listed.contains("1 session has a compaction with no compaction/end"), "{kind:?}: {listed}");
    assert_checked_cut_short(kind, &scripted, &id, first_start_seq(&export), false);

    // The next writer closes it before anything else: a dev console, which
    // writes a plan (the killed turn's start cleared the last one) and is
    // killed in turn; then compaction works again.
    let mut dev = scripted.dev_when_free(&id);
    assert_eq!(dev.todo("left open")["isError"], false);
    let said = dev.kill().join("\n");
    assert!(said.contains("was cut short before its summary replaced anything"), "{kind:?}: {said}");
    let start = Instant::now();
    let out = loop {
        let out = scripted.cordis(&["session", "compact", &id, "--script", &summary]);
        if out.status.success() || start.elapsed() > store.takeover_within() {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{kind:?}: compaction works again: {stdout}{stderr}");
    assert!(stdout.contains("compacted") && stdout.contains("carried over: tool-todo"), "{kind:?}: {stdout}");
    let whole = scripted.export(&id);
    let events = compaction_events(&whole);
    let kinds: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(kinds, ["compaction/start", "compaction/end", "compaction/start", "compaction/summary", "compaction/end"], "{kind:?}");
    assert_eq!(events[1].1["error"]["kind"], "cut-short", "{kind:?}: {}", events[1].1);
    assert!(events[4].1.get("error").is_none(), "{kind:?}");
    assert!(shown_problems(&scripted, &id).is_empty(), "{kind:?}: {:?}", shown_problems(&scripted, &id));
    let listed = text(&scripted.cordis(&["session", "ls"])).0;
    assert!(!listed.contains("compaction cut short"), "{kind:?}: {listed}");
    assert_checked_none(kind, &scripted);

    // The whole compaction, cut after each of its later events.
    let lines: Vec<&str> = whole.lines().collect();
    let second = events[2].1["compactionId"].clone();
    let of_second = |l: &str| -> Option<Value> {
        let e: Value = serde_json::from_str(l).ok()?;
        (e["data"]["compactionId"] == second || e["data"]["source"]["compactionId"] == second).then_some(e)
    };
    let steps: Vec<usize> = lines.iter().enumerate().skip(1).filter(|(_, l)| of_second(l).is_some()).map(|(i, _)| i).collect();
    // start, summary, the replacing message, the plan, end.
    assert_eq!(steps.len(), 5, "{kind:?}: {steps:?}");
    for (n, &cut) in steps[1..4].iter().enumerate() {
        let landed = n >= 1;
        let file = scripted.scratch.path().join(format!("cut-{n}.jsonl"));
        let mut text_of = lines[..=cut].join("\n");
        text_of.push('\n');
        // A header of its own, so that the import gets a fresh id.
        let mut header: Value = serde_json::from_str(lines[0]).expect("a header");
        header["id"] = Value::String(format!("s-cut{n}{}", &id[2..10]));
        let text_of = text_of.replacen(lines[0], &header.to_string(), 1);
        std::fs::write(&file, text_of).expect("write the cut log");
        let out = scripted.cordis(&["session", "import", &file.display().to_string()]);
        assert!(out.status.success(), "{kind:?} cut {n}: {}", text(&out).1);
        let cut_id = header["id"].as_str().unwrap_or_default().to_string();
        let problems = shown_problems(&scripted, &cut_id);
        let how = if landed { "so it will be completed" } else { "so it will be closed as failed" };
        assert!(problems.iter().any(|p| p.contains("has no compaction/end") && p.contains(how)), "{kind:?} cut {n}: {problems:?}");
        let out = scripted.cordis(&["session", "compact", &cut_id, "--script", &summary]);
        let (stdout, stderr) = text(&out);
        // Whatever else it says, it does not refuse for the old start.
        let said = format!("{stdout}{stderr}");
        assert!(!said.contains("already under way") && !said.contains("compacting the session already"), "{kind:?} cut {n}: {said}");
        assert!(out.status.success() || said.contains("not smaller than what it replaces"), "{kind:?} cut {n}: {said}");
        let expected = if landed { "after its summary replaced the history; it was completed" } else { "before its summary replaced anything" };
        assert!(stderr.contains(expected), "{kind:?} cut {n}: {stderr}");
        let after = scripted.export(&cut_id);
        assert!(every_start_ended(&after), "{kind:?} cut {n}: {after}");
        let ends: Vec<Value> =
            compaction_events(&after).into_iter().filter(|(t, d)| t == "compaction/end" && d["compactionId"] == second).map(|(_, d)| d).collect();
        assert_eq!(ends.len(), 1, "{kind:?} cut {n}");
        assert_eq!(ends[0].get("error").is_none(), landed, "{kind:?} cut {n}: {}", ends[0]);
        // The plan is carried once for a compaction that landed, never for
        // one that did not.
        let plans = after
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["type"] == "user/message" && e["data"]["source"]["plugin"] == "tool-todo" && e["data"]["source"]["compactionId"] == second)
            .count();
        assert_eq!(plans, usize::from(landed), "{kind:?} cut {n}");
        assert!(shown_problems(&scripted, &cut_id).is_empty(), "{kind:?} cut {n}: {:?}", shown_problems(&scripted, &cut_id));
    }
    eprintln!("{kind:?}: a compaction cut short at each step was closed and compaction worked again, in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(120), "{kind:?}: took {:?}", started.elapsed());
}

/// A real SIGKILL of `cordis session compact` at each step of a compaction
/// (after `compaction/start`, before the summary is requested; after
/// `compaction/summary`; after the replacing message; after the carried
/// plan; see `CORDIS_DEBUG_KILL_IN_COMPACTION`): the log holds exactly the
/// events up to that step, `session show` and `session ls` report it, and
/// the next `session compact` closes it (completing it when its summary
/// had replaced the history) and compacts again.
pub fn a_compaction_killed_at_each_step_is_closed_by_the_next_writer(kind: Kind) {
    let started = Instant::now();
    let store = Store::new(kind);
    let host = store.host_with(COMPACTION);
    let long = host.scratch.path().join("long.script.yml");
    std::fs::write(&long, crate::compaction::long_script(10, 100_000, &[])).expect("write the script");
    let summary = host.scratch.path().join("summary.script.yml");
    let one = serde_json::to_string(crate::compaction::SUMMARY).expect("a JSON string");
    std::fs::write(&summary, format!("summaries: [{one}]\n")).expect("write the script");
    let summary = summary.display().to_string();
    let steps: [(&str, &[&str], bool); 4] = [
        ("start", &["compaction/start"], false),
        ("summary", &["compaction/start", "compaction/summary"], false),
        ("replaced", &["compaction/start", "compaction/summary", "user/message"], true),
        ("carried", &["compaction/start", "compaction/summary", "user/message", "user/message"], true),
    ];
    for (step, left, landed) in steps {
        let step_started = Instant::now();
        let out = host.cordis(&["run", "--script", &long.display().to_string(), "do the long job"]);
        assert!(out.status.success(), "{kind:?} {step}: {}", text(&out).1);
        let id = text(&out)
            .0
            .lines()
            .find_map(|l| l.strip_prefix("session "))
            .and_then(|l| l.split_whitespace().next())
            .expect("a session line")
            .to_string();

        let out = host
            .command(&["session", "compact", &id, "--script", &summary])
            .env("CORDIS_DEBUG_KILL_IN_COMPACTION", step)
            .output()
            .expect("run cordis");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "{kind:?} {step}: killed by SIGKILL: {:?} {}", out.status, text(&out).1);
        let export = host.export(&id);
        let tail: Vec<Value> =
            export.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).skip_while(|e| e["type"] != "compaction/start").collect();
        let kinds: Vec<&str> = tail.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(kinds, left, "{kind:?} {step}: the log ends at the step");
        let how = if landed { "so it will be completed" } else { "so it will be closed as failed" };
        let problems = shown_problems(&host, &id);
        assert!(problems.iter().any(|p| p.contains("has no compaction/end") && p.contains(how)), "{kind:?} {step}: {problems:?}");
        let listed = text(&host.cordis(&["session", "ls"])).0;
        assert!(listed.lines().any(|l| l.starts_with(&id) && l.contains("(compaction cut short at seq ")), "{kind:?} {step}: {listed}");
        assert_checked_cut_short(kind, &host, &id, tail[0]["seq"].as_u64().expect("a seq"), landed);

        // The next writer closes it, then compacts (or says why not).
        let retry = Instant::now();
        let out = loop {
            let out = host.cordis(&["session", "compact", &id, "--script", &summary]);
            let said = text(&out).1;
            if out.status.success() || said.contains("not smaller than what it replaces") || retry.elapsed() > store.takeover_within() {
                break out;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let (stdout, stderr) = text(&out);
        let said = format!("{stdout}{stderr}");
        assert!(!said.contains("already under way"), "{kind:?} {step}: {said}");
        let expected = if landed { "after its summary replaced the history; it was completed" } else { "before its summary replaced anything" };
        assert!(stderr.contains(expected), "{kind:?} {step}: {said}");
        let after = host.export(&id);
        assert!(every_start_ended(&after), "{kind:?} {step}: {after}");
        let events = compaction_events(&after);
        let first = events[0].1["compactionId"].clone();
        let ends: Vec<&Value> = events.iter().filter(|(t, d)| t == "compaction/end" && d["compactionId"] == first).map(|(_, d)| d).collect();
        assert_eq!(ends.len(), 1, "{kind:?} {step}");
        assert_eq!(ends[0].get("error").is_none(), landed, "{kind:?} {step}: {}", ends[0]);
        let plans = after
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["type"] == "user/message" && e["data"]["source"]["plugin"] == "tool-todo" && e["data"]["source"]["compactionId"] == first)
            .count();
        assert_eq!(plans, usize::from(landed), "{kind:?} {step}: the plan is carried once when it landed, never otherwise");
        if !landed {
            assert!(out.status.success() && stdout.contains("compacted"), "{kind:?} {step}: compaction works again: {said}");
        }
        assert!(shown_problems(&host, &id).is_empty(), "{kind:?} {step}: {:?}", shown_problems(&host, &id));
        assert_checked_none(kind, &host);
        eprintln!("{kind:?}: killed after {step}, closed and compacted again in {:?}", step_started.elapsed());
        assert!(step_started.elapsed() < Duration::from_secs(30), "{kind:?} {step}: took {:?}", step_started.elapsed());
    }
    assert!(started.elapsed() < Duration::from_secs(120), "{kind:?}: took {:?}", started.elapsed());
}

/// `cordis check --sessions` on a store it cannot read (the flat store's
/// `sessions` a file, the harness root a file, the database stopped) says
/// so and still exits 0 when the composition is sound, within 15 s (the
/// pooler waits for its server up to `query_wait_timeout`, 5 s); a
/// healthy empty store is reported as such, and a plain `check` does not
/// read the store at all.
pub fn check_sessions_says_when_the_store_cannot_be_read(kind: Kind) {
    let store = Store::new(kind);
    let host = store.host();
    let (shown, json) = checked_sessions(&host);
    match kind {
        Kind::Flat => {
            assert!(shown.contains("sessions: none kept yet (no folder "), "{kind:?}: {shown}");
            assert!(!store.shared.path().join("sessions").exists(), "{kind:?}: check creates nothing");
        }
        _ => {
            assert!(shown.contains("sessions: 0 sessions in ") && shown.contains("; none has a compaction cut short"), "{kind:?}: {shown}");
            assert_eq!(json["sessions"], 0, "{kind:?}: {json}");
        }
    }
    match kind {
        Kind::Flat => std::fs::write(store.shared.path().join("sessions"), "not a folder").expect("write a file"),
        Kind::Harness => {
            let file = host.scratch.path().join("root-file");
            std::fs::write(&file, "not a folder").expect("write a file");
            host.scratch.composition(&format!(
                "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n- id: persistence\n  name: '@deepseek-ai/dsh-session-persistence-jsonl'\n  config:\n    root: {}\n",
                file.display()
            ));
        }
        Kind::Postgres | Kind::PgBouncer => store.server().stop(),
    }
    let start = Instant::now();
    let out = host.cordis(&["check"]);
    assert!(out.status.success() && !text(&out).0.contains("sessions:"), "{kind:?}: a plain check reads no session: {}", text(&out).0);
    let plain = start.elapsed();
    let start = Instant::now();
    let (shown, json) = checked_sessions(&host);
    let with_sessions = start.elapsed();
    let line = shown.lines().find(|l| l.starts_with("sessions: not read")).unwrap_or_else(|| panic!("{kind:?}: {shown}"));
    let error = json["error"].as_str().unwrap_or_else(|| panic!("{kind:?}: {json}"));
    let why = match kind {
        Kind::Flat | Kind::Harness => "is not a directory",
        Kind::Postgres | Kind::PgBouncer => "postgres",
    };
    assert!(line.to_lowercase().contains(why) || error.to_lowercase().contains(why), "{kind:?}: {line} / {error}");
    eprintln!("{kind:?}: check --sessions (text, then JSON) on an unreadable store: {line}, in {with_sessions:?} (a plain check: {plain:?})");
    assert!(with_sessions < Duration::from_secs(15), "{kind:?}: took {with_sessions:?}");
}

impl Store {
    /// The store itself, opened in this process as a host opens it.
    fn open(&self) -> Box<dyn SessionStore> {
        match self.kind {
            Kind::Flat => Box::new(FlatStore::open(self.shared.path()).unwrap()),
            Kind::Harness => Box::new(HarnessStore::new(self.shared.path(), Compression::Zstd, true).unwrap()),
            Kind::Postgres | Kind::PgBouncer => Box::new(PostgresStore::connect(&self.url().unwrap(), &self.schema, Duration::from_secs(2)).unwrap()),
        }
    }
}

/// An event of type `kind` with `data` at `seq` (a surface event's
/// `surfaceOp` is `append`).
fn event(seq: u64, kind: &str, data: Value, surface: bool) -> Event {
    let mut line = serde_json::json!({"seq": seq, "time": 1_790_000_000_000u64 + seq, "type": kind, "data": data});
    if surface {
        line["surfaceOp"] = "append".into();
    }
    let log = format!("{{\"type\":\"session\",\"version\":0,\"id\":\"x\"}}\n{line}\n");
    cordis_session::store::parse_log(log.as_bytes(), std::path::Path::new("x")).unwrap().events.remove(0)
}

/// Appends one closed turn of `notes + 3` events (a prompt, then `notes`
/// session notes) from `seq` on; returns the next seq.
fn append_turn(writer: &mut dyn LogWriter, seq: u64, turn: u64, notes: u64) -> u64 {
    let mut events: Vec<Event> = vec![
        event(seq, "turn/start", serde_json::json!({"turn": turn}), false),
        event(seq + 1, "user/message", serde_json::json!({"role": "user", "content": [{"type": "text", "text": format!("turn {turn}")}]}), true),
    ];
    for n in 0..notes {
        events.push(event(seq + 2 + n, "session/note", serde_json::json!({"n": n}), false));
    }
    events.push(event(seq + 2 + notes, "turn/end", serde_json::json!({"turn": turn, "reason": {"kind": "completed"}}), false));
    for e in &events {
        writer.append(e).unwrap();
    }
    writer.end_turn().unwrap();
    seq + 3 + notes
}

/// What a test compares of a read event: seq, type, data and line.
fn outline(events: &[Event], lines: &[usize]) -> Vec<(u64, String, String, usize)> {
    events.iter().zip(lines).map(|(e, &l)| (e.seq, e.kind.clone(), e.data.get().to_string(), l)).collect()
}

/// `read_since` reads what was appended since the position it is given,
/// and only that: after every batch of appends, the events read so far
/// (a whole first read, then each incremental one) are exactly what a
/// whole read lists now, with the same lines; a read with nothing appended
/// is empty; and a log changed otherwise than by appends is read whole.
pub fn incremental_reads_follow_appends(kind: Kind) {
    let started = Instant::now();
    let store = Store::new(kind);
    let s = store.open();
    let id = "incremental";
    let header = Header::new(id, Some("/srv/work".into()));
    let mut writer = s.create(&header, Durability::None).unwrap();
    let mut rng = Rng(0x5eed_0042 ^ kind as u64);
    let (mut seq, mut turn) = (append_turn(&mut *writer, 0, 1, 2), 1);
    let (since, mut at) = s.read_since(id, &Position::start()).unwrap();
    let Since::Whole(first) = since else { panic!("{kind:?}: the first read is not whole") };
    let mut seen = outline(&first.events, &first.lines);
    assert_eq!(seen.len(), 5, "{kind:?}");
    for round in 0..20 {
        if round % 4 == 0 {
            let (since, next) = s.read_since(id, &at).unwrap();
            let Since::Appended(nothing) = since else { panic!("{kind:?}: round {round}: a read with nothing appended was whole") };
            assert!(nothing.is_empty(), "{kind:?}: round {round}: {nothing:?}");
            at = next;
        }
        for _ in 0..=rng.next_u64() % 3 {
            turn += 1;
            seq = append_turn(&mut *writer, seq, turn, rng.next_u64() % 6);
        }
        let (since, next) = s.read_since(id, &at).unwrap();
        let Since::Appended(appended) = since else { panic!("{kind:?}: round {round}: the appends were read with the whole log") };
        assert!(!appended.events.is_empty() && appended.problems.is_empty(), "{kind:?}: round {round}: {:?}", appended.problems);
        seen.extend(outline(&appended.events, &appended.lines));
        at = next;
        let whole = s.read(id).unwrap();
        assert_eq!(seen, outline(&whole.events, &whole.lines), "{kind:?}: round {round}: the reads so far differ from a whole read");
        assert_eq!((at.events(), at.last_seq()), (whole.events.len(), Some(seq - 1)), "{kind:?}: round {round}");
    }
    {
        // A turn in progress: each event is read as it lands, and the view
        // keeps the turn open, as written. A whole read (to replay or go
        // on) closes a turn left open: the harness's store with its closer
        // events, which the turn's next events replace; the others as
        // they are.
        let prompt = serde_json::json!({"role": "user", "content": [{"type": "text", "text": "open"}]});
        for (kind_of, data, surface) in [("turn/start", serde_json::json!({"turn": turn + 1}), false), ("user/message", prompt, true)] {
            writer.append(&event(seq, kind_of, data, surface)).unwrap();
            writer.end_turn().unwrap();
            seq += 1;
            let (since, next) = s.read_since(id, &at).unwrap();
            let Since::Appended(appended) = since else { panic!("{kind:?}: a read with a turn open was whole") };
            assert_eq!(appended.events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), vec![kind_of], "{kind:?}: the event of the open turn");
            assert!(appended.problems.is_empty(), "{kind:?}: {:?}", appended.problems);
            seen.extend(outline(&appended.events, &appended.lines));
            at = next;
            let whole = s.read(id).unwrap();
            assert_eq!(seen[..], outline(&whole.events, &whole.lines)[..seen.len()], "{kind:?}: the open turn's view");
            if kind == Kind::Harness {
                assert_eq!(whole.events.last().map(|e| e.kind.as_str()), Some("turn/end"), "harness: a whole read closes the open turn");
            }
        }
        writer.append(&event(seq, "turn/end", serde_json::json!({"turn": turn + 1, "reason": {"kind": "completed"}}), false)).unwrap();
        writer.end_turn().unwrap();
        seq += 1;
        seq = append_turn(&mut *writer, seq, turn + 2, 1);
        let (since, next) = s.read_since(id, &at).unwrap();
        let Since::Appended(appended) = since else { panic!("{kind:?}: the turn's end was read with the whole log") };
        seen.extend(outline(&appended.events, &appended.lines));
        let whole = s.read(id).unwrap();
        assert_eq!(seen, outline(&whole.events, &whole.lines), "{kind:?}: after the open turn");
        assert_eq!((next.events(), next.last_seq()), (whole.events.len(), Some(seq - 1)), "{kind:?}");
        at = next;
    }
    drop(writer);

    // A line that cannot be read (written behind the store's back): its
    // problem is read once, as a whole read reports it, and not again.
    // The harness's rules end the readable log at such a line, which a
    // later append could change: its store reads that log whole.
    let bad = match kind {
        Kind::Flat => {
            use std::io::Write;
            let path = s.log_file(id).unwrap();
            std::fs::OpenOptions::new().append(true).open(path).unwrap().write_all(b"not json\n").unwrap();
            true
        }
        Kind::Postgres | Kind::PgBouncer => {
            let mut client = ::postgres::Client::connect(&store.server().url(), ::postgres::NoTls).unwrap();
            let sql = format!("INSERT INTO {}.events (session_id, seq, time, type, line) VALUES ($1, $2, 0, 'x', 'not json')", store.schema);
            client.execute(&sql, &[&id, &(seq as i64)]).unwrap();
            true
        }
        Kind::Harness => false,
    };
    if bad {
        let (since, next) = s.read_since(id, &at).unwrap();
        let Since::Appended(appended) = since else { panic!("{kind:?}: a bad line was read with the whole log") };
        let whole = s.read(id).unwrap();
        assert!(appended.events.is_empty(), "{kind:?}: {:?}", appended.events);
        assert_eq!(appended.problems.len(), 1, "{kind:?}: {:?}", appended.problems);
        assert!(whole.problems.contains(&appended.problems[0]), "{kind:?}: {:?} is not among {:?}", appended.problems, whole.problems);
        let (since, next) = s.read_since(id, &next).unwrap();
        let Since::Appended(again) = since else { panic!("{kind:?}: read whole after a bad line") };
        assert!(again.is_empty(), "{kind:?}: the bad line was read again: {again:?}");
        at = next;
    }

    // The log rewritten shorter (its first turn kept): read whole.
    match kind {
        Kind::Flat => {
            let path = s.log_file(id).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            let kept: String = text.split_inclusive('\n').take(6).collect();
            std::fs::write(&path, kept).unwrap();
        }
        Kind::Harness => {
            let path = s.log_file(id).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let frames = cordis_session::store::harness::frames::split(&bytes).unwrap();
            std::fs::write(&path, &bytes[..frames.complete[5].end]).unwrap();
        }
        Kind::Postgres | Kind::PgBouncer => {
            let mut client = ::postgres::Client::connect(&store.server().url(), ::postgres::NoTls).unwrap();
            client.execute(&format!("DELETE FROM {}.sessions WHERE id = $1", store.schema), &[&id]).unwrap();
            let log = first.events[..5].to_vec();
            s.write_whole(&first.header, &log).unwrap();
        }
    }
    let (since, at) = s.read_since(id, &at).unwrap();
    let Since::Whole(rewritten) = since else { panic!("{kind:?}: a log rewritten shorter was not read whole") };
    assert_eq!(outline(&rewritten.events, &rewritten.lines), seen[..5].to_vec(), "{kind:?}");
    assert_eq!(at.events(), 5, "{kind:?}");
    assert!(started.elapsed() < Duration::from_secs(30), "{kind:?}: took {:?}", started.elapsed());
}

macro_rules! contract {
    ($($module:ident => $kind:expr),* $(,)?) => {$(
        mod $module {
            use super::*;

            #[test]
            fn acknowledged_events_survive_kills() {
                super::acknowledged_events_survive_kills($kind);
            }

            #[test]
            fn one_writer_then_takeover_after_a_kill() {
                super::one_writer_then_takeover_after_a_kill($kind);
            }

            #[test]
            fn turn_durability_loses_nothing_on_a_kill() {
                super::turn_durability_loses_nothing_on_a_kill($kind);
            }

            #[test]
            fn watch_follows_one_and_every_session() {
                super::watch_follows_one_and_every_session($kind);
            }

            #[test]
            fn incremental_reads_follow_appends() {
                super::incremental_reads_follow_appends($kind);
            }

            #[test]
            fn a_compaction_cut_short_is_closed_when_next_opened() {
                super::a_compaction_cut_short_is_closed_when_next_opened($kind);
            }

            #[test]
            fn check_sessions_says_when_the_store_cannot_be_read() {
                super::check_sessions_says_when_the_store_cannot_be_read($kind);
            }

            #[test]
            fn a_compaction_killed_at_each_step_is_closed_by_the_next_writer() {
                super::a_compaction_killed_at_each_step_is_closed_by_the_next_writer($kind);
            }
        }
    )*};
}

contract! {
    flat => Kind::Flat,
    harness => Kind::Harness,
    postgres => Kind::Postgres,
    pgbouncer => Kind::PgBouncer,
}

// ---------------------------------------------------------------------
// Servers: connections cut, restarts, lease run-outs (PostgreSQL, both
// ways of connecting).

/// A writer whose connection is cut while another host takes the session
/// and appends: its next call is refused (never acknowledged), the other
/// host's row is never taken for its own, and the log stays whole.
fn uncertain_commits_are_settled_by_identity(kind: Kind) {
    let store = Store::new(kind);
    let (a, b) = (store.host(), store.host());
    let mut dev = a.dev(None, &[]);
    assert_eq!(dev.todo("before the cut")["isError"], false);
    let id = dev.session.clone();
    // Directly connected, host A's server connections are cut; behind the
    // pooler, A is frozen past its lease (the pooler would hand it new
    // server connections), then thawed.
    let pid = dev.child.id().to_string();
    if kind == Kind::PgBouncer {
        let _ = Command::new("kill").args(["-STOP", &pid]).status();
    } else {
        let cut = store
            .server()
            .sql(&format!("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'cordis@% pid {pid}'"));
        assert_ne!(cut, vec!["0".to_string()], "{kind:?}: host A had connections");
    }
    let start = Instant::now();
    loop {
        match b.try_run(Some(&id), "taken while A was cut off") {
            Ok(_) => break,
            Err(e) => assert!(start.elapsed() < store.takeover_within(), "{kind:?}: B could not take the session: {e}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if kind == Kind::PgBouncer {
        let _ = Command::new("kill").args(["-CONT", &pid]).status();
    }
    let answer = dev.todo("after the cut");
    assert!(answer["error"].is_string(), "{kind:?}: an append that another writer's rows overtook is not acknowledged: {answer}");
    let said = answer.to_string();
    assert!(said.contains("no longer this process's to write") || said.contains("another writer"), "{kind:?}: {said}");
    dev.kill();
    let export = b.export(&id);
    assert!(!written_todos(&export).contains(&"after the cut".to_string()), "{kind:?}: the refused call is not in the log");
    assert!(shown_problems(&b, &id).is_empty(), "{kind:?}: {:?}", shown_problems(&b, &id));
    // --strict continues it.
    let script = repo_root().join("examples/plan-and-ship.script.yml").display().to_string();
    let out = b.cordis(&["--strict", "run", "--script", &script, "--session", &id, "and on"]);
    assert!(out.status.success(), "{kind:?}: {}", text(&out).1);
}

/// A writer carries on after the server restarts; a watch resumes after a
/// restart and after its listening connection is killed, and shows a write
/// made right after; once the server is gone for good, the watch says so
/// and exits 1.
fn restarts_lose_nothing_and_watches_resume(kind: Kind) {
    let store = Store::new(kind);
    let (a, watcher) = (store.host(), store.host());
    let mut dev = a.dev(None, &[]);
    let id = dev.session.clone();
    assert_eq!(dev.todo("before the restart")["isError"], false);
    let (mut one, one_rx) = watcher.watch(&[&dev.session, "--resume-within", "5"]);
    let (mut all, all_rx) = watcher.watch(&["--all", "--resume-within", "5"]);
    wait_for(&one_rx, "before the restart", Duration::from_secs(10));
    wait_for(&all_rx, "before the restart", Duration::from_secs(10));

    store.server().restart();
    let answer = dev.todo("right after the restart");
    assert_eq!(answer["isError"], false, "{kind:?}: {answer}");
    wait_for(&one_rx, "right after the restart", Duration::from_secs(10));
    wait_for(&all_rx, "right after the restart", Duration::from_secs(10));

    if kind == Kind::Postgres {
        let pid = one.id();
        store.server().sql(&format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'cordis@% pid {pid}'"));
        assert_eq!(dev.todo("after the listener was cut")["isError"], false);
        wait_for(&one_rx, "after the listener was cut", Duration::from_secs(10));
    }
    dev.kill();
    let written = written_todos(&a.export(&id));
    assert!(written.contains(&"right after the restart".to_string()));

    store.server().stop();
    for (child, name) in [(&mut one, "watch ID"), (&mut all, "watch --all")] {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for watch") {
                break status;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "{kind:?}: {name} did not give up");
            std::thread::sleep(Duration::from_millis(100));
        };
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut err);
        assert_eq!(status.code(), Some(1), "{kind:?}: {name}: {err}");
        assert!(err.contains("cannot follow"), "{kind:?}: {name} says why: {err}");
    }
}

mod servers {
    use super::*;

    #[test]
    fn uncertain_commits_are_settled_by_identity_postgres() {
        uncertain_commits_are_settled_by_identity(Kind::Postgres);
    }

    #[test]
    fn uncertain_commits_are_settled_by_identity_pgbouncer() {
        uncertain_commits_are_settled_by_identity(Kind::PgBouncer);
    }

    #[test]
    fn restarts_lose_nothing_and_watches_resume_postgres() {
        restarts_lose_nothing_and_watches_resume(Kind::Postgres);
    }

    #[test]
    fn restarts_lose_nothing_and_watches_resume_pgbouncer() {
        restarts_lose_nothing_and_watches_resume(Kind::PgBouncer);
    }

    /// Through transaction pooling: three hosts write three sessions at
    /// once; nothing trips over another client's statements, and no
    /// session is left empty.
    #[test]
    fn hosts_write_at_once_through_transaction_pooling() {
        let store = Store::new(Kind::PgBouncer);
        let hosts: Vec<Host> = (0..3).map(|_| store.host()).collect();
        let ids: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = hosts
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    s.spawn(move || {
                        let id = h.run(None, &format!("host {i} turn 1"));
                        h.run(Some(&id), &format!("host {i} turn 2"));
                        h.run(Some(&id), &format!("host {i} turn 3"));
                        id
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a host thread")).collect()
        });
        for (i, id) in ids.iter().enumerate() {
            let export = hosts[(i + 1) % 3].export(id);
            assert_eq!(export.lines().filter(|l| l.contains("\"type\":\"turn/end\"")).count(), 3, "{id}");
        }
        let empty =
            store.server().sql("SELECT count(*) FROM agents.sessions s WHERE NOT EXISTS (SELECT 1 FROM agents.events e WHERE e.session_id = s.id)");
        assert_eq!(empty, vec!["0".to_string()]);
        let log = store.bouncer.as_ref().map(PgBouncer::log).unwrap_or_default();
        assert!(!log.contains("prepared statement"), "{log}");
    }

    /// A schema name as long as PostgreSQL allows (63 bytes) works: its
    /// notification channel is derived to fit.
    #[test]
    fn the_longest_schema_name_works() {
        let schema = "a".repeat(63);
        let store = Store::with_schema(Kind::Postgres, &schema);
        let (a, watcher) = (store.host(), store.host());
        let mut dev = a.dev(None, &[]);
        assert_eq!(dev.todo("in a long schema")["isError"], false);
        let (mut watch, rx) = watcher.watch(&[&dev.session]);
        wait_for(&rx, "in a long schema", Duration::from_secs(10));
        let took = {
            assert_eq!(dev.todo("notified")["isError"], false);
            wait_for(&rx, "notified", Duration::from_secs(2))
        };
        assert!(took < Duration::from_millis(900), "notified, not polled: {took:?}");
        let _ = watch.kill();
        let _ = watch.wait();
        dev.kill();
        let empty = store
            .server()
            .sql(&format!("SELECT count(*) FROM {schema}.sessions s WHERE NOT EXISTS (SELECT 1 FROM {schema}.events e WHERE e.session_id = s.id)"));
        assert_eq!(empty, vec!["0".to_string()]);
    }
}
