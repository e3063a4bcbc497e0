//! `mcp-client` under misbehaving servers: `tests/mcp/servers/faulty.py`, a
//! raw JSON-RPC server (standard library only) whose faults are chosen on
//! its command line, started through `sh -c` with a marker in its argv so
//! that its processes can be found in the process table. Every test bounds
//! the time the fault may cost.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use cordis_tests::dev::Dev;
use cordis_tests::{repo_root, Scratch};

use super::dev_status;

/// A marker unique to this test run and `what`.
fn marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("cordis-fault-{}-{nanos}-{what}", std::process::id())
}

fn faulty() -> PathBuf {
    repo_root().join("tests/mcp/servers/faulty.py")
}

/// A row starting the fake server through `sh -c` (a shell that ignores
/// SIGTERM, SIGINT and SIGHUP and stays the server's parent), `flags` on
/// its command line, `extra` config lines (indented under `config`).
fn row(id: &str, marker: &str, flags: &str, extra: &str) -> String {
    format!(
        "- id: {id}\n  name: mcp-client\n  config:\n    serverName: {id}\n    transport: stdio\n    command: sh\n    args: ['-c', 'trap \"\" TERM INT HUP; python3 {} --marker {marker} {flags}; true']\n{extra}",
        faulty().display()
    )
}

/// The processes whose command line holds `marker` (zombies have none).
fn processes(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// Waits until `done` holds, at most `limit`; the time it took.
fn within(limit: Duration, what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what} after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

fn dev(scratch: &Scratch) -> Dev {
    Dev::start(scratch.path(), &[("XDG_CONFIG_HOME", &scratch.path().join(".config").display().to_string())])
}

fn connected(dev: &mut Dev, id: &str) {
    dev.wait_until("the server did not connect", |dev| dev_status(dev, id).1.contains("connected, 6 tools"));
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status().expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

#[test]
fn a_server_and_its_helper_end_with_the_host_on_sigint_sigterm_and_sigkill() {
    for name in ["INT", "TERM", "KILL"] {
        let scratch = Scratch::new();
        let marker = marker(name);
        scratch.composition(&row("stub", &marker, "--helper --stubborn", ""));
        let mut dev = dev(&scratch);
        connected(&mut dev, "stub");
        // The shell, the server and its helper.
        within(Duration::from_secs(10), "the server's three processes did not start", || processes(&marker).len() == 3);
        signal(dev.child.id(), name);
        within(Duration::from_secs(5), "the host did not end", || dev.child.try_wait().ok().flatten().is_some());
        let took =
            within(Duration::from_secs(5), &format!("processes of the server outlived SIG{name} of the host"), || processes(&marker).is_empty());
        eprintln!("SIG{name}: the server's processes were gone {took:?} after the host ended");
    }
}

#[test]
fn twenty_reloads_leave_only_the_current_server_running() {
    let scratch = Scratch::new();
    let base = marker("reload");
    let generation = |n: u32| row("gen", &format!("{base}-g{n}-"), "--helper --stubborn", "");
    scratch.composition(&generation(0));
    let mut dev = dev(&scratch);
    connected(&mut dev, "gen");
    for n in 1..=20u32 {
        let started = Instant::now();
        scratch.composition(&generation(n));
        dev.expect_reloads(u64::from(n));
        connected(&mut dev, "gen");
        // The disposal waited for the previous server's group: nothing of
        // it is left once the reload is done.
        assert!(processes(&format!("{base}-g{}-", n - 1)).is_empty(), "reload {n} left the previous server running");
        assert!(started.elapsed() < Duration::from_secs(10), "reload {n} took {:?}", started.elapsed());
        eprintln!("reload {n}: {:?}", started.elapsed());
    }
    within(Duration::from_secs(5), "the current server's processes are not the only ones", || {
        processes(&base).len() == 3 && processes(&format!("{base}-g20-")).len() == 3
    });
    drop(dev);
    within(Duration::from_secs(5), "processes outlived the host", || processes(&base).is_empty());
}

#[test]
fn an_oversized_or_undecodable_answer_fails_its_call_at_once_and_is_logged() {
    let scratch = Scratch::new();
    scratch.composition(&row("f", &marker("drop"), "", "    maxMessageBytes: 100000\n    toolCallTimeoutMs: 30000\n"));
    let mut dev = dev(&scratch);
    connected(&mut dev, "f");

    let start = Instant::now();
    let big = dev.call("mcp__f__big", r#"{"bytes": 200000}"#);
    let took = start.elapsed();
    let text = big["text"].as_str().unwrap_or_default();
    assert!(big["isError"] == true && text.contains("is over the limit of 100000 bytes (maxMessageBytes)"), "{big}");
    assert!(took < Duration::from_secs(3), "the oversized answer failed its call after {took:?}");

    let start = Instant::now();
    let cp949 = dev.call("mcp__f__cp949", "{}");
    let took = start.elapsed();
    let text = cp949["text"].as_str().unwrap_or_default();
    assert!(cp949["isError"] == true && text.contains("is not UTF-8 from offset") && text.contains("0xC7 0xD1"), "{cp949}");
    assert!(took < Duration::from_secs(3), "the undecodable answer failed its call after {took:?}");
    eprintln!("the undecodable answer failed its call after {took:?}");

    // An answer under the limit still passes, and the connection stays.
    assert_eq!(dev.call("mcp__f__big", r#"{"bytes": 1000}"#)["text"].as_str().map(str::len), Some(1000));
    assert_eq!(dev.call("mcp__f__echo", r#"{"text": "still here"}"#)["text"], "still here");
    let notice = dev.expect_notice("mcp-client(f): dropped a message from the server: a line of");
    assert!(notice.contains("maxMessageBytes") && notice.contains("the tools/call request it answered fails now"), "{notice}");
    dev.expect_notice("is not UTF-8 from offset");
}

#[test]
fn a_chatty_stderr_is_labelled_cut_and_rate_limited_and_never_stalls_the_host() {
    let scratch = Scratch::new();
    scratch.composition(&row("f", &marker("chatty"), "--stderr-flood", ""));
    let started = Instant::now();
    let mut dev = dev(&scratch);
    connected(&mut dev, "f");
    for n in 0..10 {
        let call = Instant::now();
        assert_eq!(dev.call("mcp__f__echo", &format!(r#"{{"text": "{n}"}}"#))["text"], n.to_string());
        assert!(call.elapsed() < Duration::from_secs(1), "a call took {:?} while the server floods its stderr", call.elapsed());
    }
    std::thread::sleep(Duration::from_secs(2));
    let elapsed = started.elapsed().as_secs_f64();
    let lines: Vec<String> = dev.stderr().into_iter().filter(|l| l.contains("mcp-client(f) stderr: ")).collect();
    let shown = lines.iter().filter(|l| l.contains("chatter")).count();
    // A burst of 100, then 20 a second.
    assert!(shown > 0 && shown as f64 <= 100.0 + 20.0 * elapsed + 1.0, "{shown} lines shown in {elapsed:.1} s");
    for line in &lines {
        assert!(line.len() < 2048 + 200, "a line of {} bytes was shown", line.len());
    }
    assert!(lines.iter().any(|l| l.contains("[… 13952 more bytes cut]")), "long lines are cut, saying how much: {:?}", lines.first());
    assert!(lines.iter().any(|l| l.contains("lines dropped (over 20 lines/s")), "the dropped lines are counted");
}

#[test]
fn a_storm_of_list_changed_costs_at_most_a_few_lists_a_second() {
    let scratch = Scratch::new();
    let log = scratch.path().join("faulty.log");
    scratch.composition(&row("f", &marker("storm"), &format!("--list-storm --log {}", log.display()), ""));
    let mut dev = dev(&scratch);
    connected(&mut dev, "f");
    let lists = || std::fs::read_to_string(&log).unwrap_or_default().lines().filter(|l| *l == "list").count();
    let (before, start) = (lists(), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(dev.call("mcp__f__echo", r#"{"text": "calm"}"#)["text"], "calm");
    let (count, elapsed) = (lists() - before, start.elapsed().as_secs_f64());
    assert!(count >= 2, "the list is still followed: {count} lists");
    assert!(count as f64 <= 4.0 * elapsed + 2.0, "{count} lists in {elapsed:.1} s");
    eprintln!("{count} lists in {elapsed:.1} s of a list_changed storm");
}

#[test]
fn a_server_inherits_only_allow_listed_variables_and_a_missing_one_is_an_error() {
    let scratch = Scratch::new();
    let log = scratch.path().join("faulty.log");
    let flags = format!("--log {} --env HOME --env PATH --env DATABASE_URL --env GREETING --env CORDIS_PASSED_ON", log.display());
    let extra = "    inheritEnv: [CORDIS_PASSED_ON]\n    env:\n      GREETING: hello\n";
    scratch.composition(&row("f", &marker("env"), &flags, extra));
    let out = super::cordis(&scratch, &["check"], &[("DATABASE_URL", "postgres://app:pw@db/app")]);
    let (stdout, stderr) = cordis_tests::text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(
        all.contains("mcp-client(f): `inheritEnv` names CORDIS_PASSED_ON, which is not set in cordis's environment"),
        "the error names the server and the variable:\n{all}"
    );
    assert!(!log.exists(), "the server was not started");

    let out = super::cordis(&scratch, &["check"], &[("DATABASE_URL", "postgres://app:pw@db/app"), ("CORDIS_PASSED_ON", "visible")]);
    let (stdout, stderr) = cordis_tests::text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(seen.contains("env DATABASE_URL=unset\n"), "{seen}");
    assert!(seen.contains("env GREETING=hello\n") && seen.contains("env CORDIS_PASSED_ON=visible\n"), "{seen}");
    assert!(!seen.contains("env HOME=unset") && !seen.contains("env PATH=unset"), "{seen}");
}

#[test]
fn an_env_or_header_expression_reading_an_unset_variable_is_an_error_naming_it() {
    let scratch = Scratch::new();
    let log = scratch.path().join("faulty.log");
    let flags = format!("--log {} --env GREETING --env GH_TOKEN", log.display());
    let extra = "    env:\n      GREETING: hello\n      GH_TOKEN: !!js process.env.CORDIS_TEST_GH_TOKEN\n";
    let http = "- id: remote\n  name: mcp-client\n  config:\n    serverName: remote\n    transport: streamable-http\n    url: http://127.0.0.1:9/mcp\n    headers:\n      Authorization: !!js process.env['CORDIS_TEST_REMOTE_TOKEN']\n";
    scratch.composition(&format!("{}{http}", row("gh", &marker("unset"), &flags, extra)));
    let started = Instant::now();
    let out = super::cordis(&scratch, &["check"], &[]);
    let elapsed = started.elapsed();
    let (stdout, stderr) = cordis_tests::text(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(
        all.contains(
            "cordis.yml:10: entry gh: config.env.GH_TOKEN is `!!js process.env.CORDIS_TEST_GH_TOKEN`, which is undefined \
             (CORDIS_TEST_GH_TOKEN is not set in cordis's environment); plugin mcp-client needs a value there"
        ),
        "the error names the line, the entry, the key and the variable:\n{all}"
    );
    assert!(
        all.contains("entry remote: config.headers.Authorization is `!!js process.env['CORDIS_TEST_REMOTE_TOKEN']`, which is undefined (CORDIS_TEST_REMOTE_TOKEN is not set"),
        "{all}"
    );
    assert!(!log.exists(), "the server was not started");
    assert!(elapsed < Duration::from_secs(10), "check took {elapsed:?}");

    let out = super::cordis(&scratch, &["check", "--json"], &[("CORDIS_TEST_GH_TOKEN", "ghp_secret")]);
    let (stdout, stderr) = cordis_tests::text(&out);
    assert!(stdout.contains("CORDIS_TEST_REMOTE_TOKEN is not set"), "{stdout}\n{stderr}");
    assert!(!stdout.contains("GH_TOKEN is `"), "set now, the server's entry loads:\n{stdout}");
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(seen.contains("env GREETING=hello\n") && seen.contains("env GH_TOKEN=ghp_secret\n"), "{seen}");
}

/// Waits until the fake server's log has a line starting with `line`.
fn logged(log: &std::path::Path, line: &str) {
    within(Duration::from_secs(20), &format!("the server did not log {line:?}"), || {
        std::fs::read_to_string(log).unwrap_or_default().lines().any(|l| l.starts_with(line))
    });
}

#[test]
fn ctrl_c_of_cordis_run_cancels_a_hung_call_and_exits_within_seconds() {
    let scratch = Scratch::new();
    let log = scratch.path().join("faulty.log");
    let marker = marker("ctrl-c");
    scratch.composition(&row("f", &marker, &format!("--stubborn --helper --log {}", log.display()), ""));
    let script = scratch.path().join("turn.script.yml");
    std::fs::write(
        &script,
        "model: faults\nprompt: hang\nsteps:\n  - text: Hanging.\n    calls:\n      - name: mcp__f__hang\n        arguments: '{}'\n  - text: Done.\n",
    )
    .unwrap();
    let mut run = Command::new(cordis_tests::cordis_exe())
        .args(["run", "--script", &script.display().to_string()])
        .current_dir(scratch.path())
        .env("CORDIS_PLUGIN_PATH", cordis_tests::plugin_dir())
        .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start cordis run");
    logged(&log, "call hang");
    signal(run.id(), "INT");
    let took = within(Duration::from_secs(5), "cordis run did not exit after Ctrl-C", || run.try_wait().ok().flatten().is_some());
    eprintln!("cordis run exited {took:?} after Ctrl-C during a hung call");
    let out = run.wait_with_output().unwrap();
    let (stdout, stderr) = cordis_tests::text(&out);
    logged(&log, "cancelled ");
    within(Duration::from_secs(5), "the server outlived cordis run", || processes(&marker).is_empty());
    let id = super::session_id(&stdout);
    let results = super::results(&super::events(&scratch.path().join(".cordis"), &id));
    let hang = super::result_of(&results, "mcp__f__hang");
    assert!(hang.1 && hang.2.contains("the call to hang was cancelled (interrupted (Ctrl-C))"), "{hang:?}\n{stderr}");
}

#[test]
fn a_reload_under_dev_cancels_a_hung_call_and_finishes_within_seconds() {
    use std::io::{BufRead, Write};
    let scratch = Scratch::new();
    let log = scratch.path().join("faulty.log");
    let marker = marker("reload-hang");
    let row = |timeout: u64| row("f", &marker, &format!("--stubborn --log {}", log.display()), &format!("    toolCallTimeoutMs: {timeout}\n"));
    scratch.composition(&row(60_000));
    let mut dev = dev(&scratch);
    connected(&mut dev, "f");
    writeln!(dev.stdin, "call mcp__f__hang {{}}").unwrap();
    dev.stdin.flush().unwrap();
    logged(&log, "call hang");
    let start = Instant::now();
    scratch.composition(&row(59_000));
    let mut answer = String::new();
    dev.stdout.read_line(&mut answer).unwrap();
    let took = start.elapsed();
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert!(
        answer["isError"] == true && answer["text"].as_str().unwrap_or_default().contains("was cancelled (its entry is being reloaded)"),
        "{answer}"
    );
    dev.expect_reloads(1);
    let reloaded = start.elapsed();
    assert!(took < Duration::from_secs(5), "the hung call held the reload for {took:?}");
    eprintln!(
        "the hung call was answered {took:?} after the change; the reload was done within {reloaded:?} (700 ms of it the driver's quiet period)"
    );
    logged(&log, "cancelled ");
    connected(&mut dev, "f");
}

#[test]
fn cordis_mcp_cancels_a_hung_call_when_its_client_leaves_and_exits_within_seconds() {
    use std::io::Write;
    let scratch = Scratch::new();
    let log = scratch.path().join("faulty.log");
    let marker = marker("mcp-left");
    scratch.composition(&row("f", &marker, &format!("--stubborn --log {}", log.display()), ""));
    let args = crate::server_args(&scratch, &[]);
    let mut server = Command::new(&args[0])
        .args(&args[1..])
        .current_dir(scratch.path())
        .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start cordis mcp");
    let mut stdin = server.stdin.take().unwrap();
    for message in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"leaver","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__f__hang","arguments":{}}}"#,
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    logged(&log, "call hang");
    let start = Instant::now();
    drop(stdin);
    let took = within(Duration::from_secs(5), "cordis mcp did not exit after its client left", || server.try_wait().ok().flatten().is_some());
    eprintln!("cordis mcp exited {took:?} after its client left during a hung call");
    assert!(start.elapsed() < Duration::from_secs(5));
    logged(&log, "cancelled ");
    within(Duration::from_secs(5), "the server outlived cordis mcp", || processes(&marker).is_empty());
}

#[test]
fn a_huge_result_reaches_the_model_cut_and_the_log_keeps_it_whole() {
    use cordis_tests::sse_server::{End, Reply, SseServer};
    use serde_json::{json, Value};
    let scratch = Scratch::new();
    let call = json!({"tool_calls": [{"index": 0, "id": "call_00_big", "type": "function",
                                        "function": {"name": "mcp__f__big", "arguments": "{\"bytes\": 2000000}"}}]});
    let first = Reply::Stream {
        events: vec![
            super::chunk(json!({"role": "assistant", "content": null}), Value::Null),
            super::chunk(call, Value::Null),
            super::chunk(json!({}), json!("tool_calls")),
        ],
        end: End::Done,
    };
    let second = Reply::Stream {
        events: vec![super::chunk(json!({"role": "assistant", "content": "Read it."}), Value::Null), super::chunk(json!({}), json!("stop"))],
        end: End::Done,
    };
    let model = SseServer::start(vec![first, second]);
    let rows = row("f", &marker("huge"), "", "");
    scratch.composition(&format!(
        "{rows}- id: model\n  name: llm-openai\n  config:\n    baseUrl: {}\n    model: deepseek-v4-flash\n    provider: deepseek-official\n    contextWindow: 131072\n",
        model.base_url
    ));
    let started = Instant::now();
    let out = super::cordis(&scratch, &["run", "Dump it"], &[]);
    let (stdout, stderr) = cordis_tests::text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "the turn took {:?}", started.elapsed());
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let body = requests[1].body.to_string();
    assert!(body.len() < 131_072 + 20_000, "the second request carried {} bytes", body.len());
    assert!(
        body.contains(
            "[cordis cut this result: 131072 of its 2000000 bytes are shown, 1868928 bytes were cut; the session log keeps the whole result]"
        ),
        "the model is told what was cut"
    );
    let results = super::results(&super::events(&scratch.path().join(".cordis"), &super::session_id(&stdout)));
    let big = super::result_of(&results, "mcp__f__big");
    assert_eq!(big.2.len(), 2_000_000, "the log keeps the whole result");
}

#[test]
fn structured_content_is_kept_in_the_log_and_in_its_export() {
    let scratch = Scratch::new();
    scratch.composition(&row("f", &marker("structured"), "", ""));
    let script = scratch.path().join("turn.script.yml");
    std::fs::write(
        &script,
        "model: faults\nprompt: structured\nsteps:\n  - text: Asking.\n    calls:\n      - name: mcp__f__structured\n        arguments: '{\"n\": 21}'\n  - text: Done.\n",
    )
    .unwrap();
    let out = super::cordis(&scratch, &["run", "--script", &script.display().to_string()], &[]);
    let (stdout, stderr) = cordis_tests::text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let id = super::session_id(&stdout);
    let events = super::events(&scratch.path().join(".cordis"), &id);
    let (_, result) = events.iter().find(|(kind, _)| kind == "tool/result").expect("a tool/result event");
    let part = &result["message"]["content"][0];
    assert_eq!(part["structuredContent"], serde_json::json!({"n": 21, "double": 42}), "{result}");
    assert_eq!(part["content"][0]["text"], "n is 21");
    // Read back from the stored log (the session replayed), not from memory.
    let export = super::cordis(&scratch, &["session", "export", &id], &[]);
    let (exported, stderr) = cordis_tests::text(&export);
    assert!(export.status.success(), "{stderr}");
    assert!(
        exported.contains(r#""structuredContent":{"double":42,"n":21}"#) || exported.contains(r#""structuredContent":{"n":21,"double":42}"#),
        "{exported}"
    );
}

/// A fake HTTP server of `tests/mcp/servers/`, killed on drop.
struct Refusing {
    child: std::process::Child,
    url: String,
}

impl Refusing {
    fn start(log: &std::path::Path, extra: &[&str]) -> Refusing {
        Refusing::script("http_refusing.py", log, extra)
    }

    fn script(name: &str, log: &std::path::Path, extra: &[&str]) -> Refusing {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .arg(repo_root().join("tests/mcp/servers").join(name))
            .arg(log)
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start http_refusing.py");
        let mut url = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut url).unwrap();
        Refusing { child, url: url.trim().to_string() }
    }
}

impl Drop for Refusing {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn http_401_and_403_are_one_auth_error_naming_the_header_and_not_retried() {
    for (extra, status) in [
        (&[][..], r#"HTTP 401, WWW-Authenticate: Bearer realm="tools", error="invalid_token""#),
        (&["--forbid"][..], r#"HTTP 403, WWW-Authenticate: Bearer error="insufficient_scope""#),
    ] {
        let scratch = Scratch::new();
        let log = scratch.path().join("requests.log");
        let server = Refusing::start(&log, extra);
        scratch.composition(&format!(
            "- id: remote\n  name: mcp-client\n  config:\n    serverName: remote\n    transport: streamable-http\n    url: {}\n    headers:\n      Authorization: Bearer not-the-token\n    reconnect:\n      initialDelayMs: 100\n",
            server.url
        ));
        let mut dev = dev(&scratch);
        dev.wait_until("the refusal is not in status", |dev| dev_status(dev, "remote").0 == "error");
        let (_, text) = dev_status(&mut dev, "remote");
        assert!(text.contains(&format!("the server refused the credentials ({status}")), "{text}");
        assert!(text.contains("the `Authorization` header was sent and refused; not retrying until the entry's config changes"), "{text}");
        assert!(!text.contains("not-the-token"), "the header's value is never shown: {text}");
        let requests = || std::fs::read_to_string(&log).unwrap_or_default().lines().count();
        let before = requests();
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(requests(), before, "no retry loop ({before} requests, then more)");
        assert!(before <= 3, "{before} requests for one attempt");
    }
}

#[test]
fn a_lost_http_session_fails_the_call_at_once_and_a_new_session_serves_the_next() {
    let scratch = Scratch::new();
    let log = scratch.path().join("sessions.log");
    let server = Refusing::script("http_forgetful.py", &log, &[]);
    scratch.composition(&format!(
        "- id: remote\n  name: mcp-client\n  config:\n    serverName: remote\n    transport: streamable-http\n    url: {}\n    reconnect:\n      initialDelayMs: 100\n",
        server.url
    ));
    let mut dev = dev(&scratch);
    dev.wait_until("the server did not connect", |dev| dev_status(dev, "remote").1 == "mcp-client(remote): connected, 5 tools");
    assert_eq!(dev.call("mcp__remote__forget", "{}")["text"], "forgotten");
    let start = Instant::now();
    let lost = dev.call("mcp__remote__echo", r#"{"text": "lost"}"#);
    let took = start.elapsed();
    let text = lost["text"].as_str().unwrap_or_default();
    assert!(
        lost["isError"] == true
            && text.contains("the server refused a request without naming it: Bad Request: No valid session ID provided (code -32600)"),
        "{lost}"
    );
    assert!(took < Duration::from_secs(3), "the call failed after {took:?}");
    let sessions = || std::fs::read_to_string(&log).unwrap_or_default().lines().filter(|l| *l == "initialize").count();
    within(Duration::from_secs(10), "no new session was initialised", || sessions() == 2);
    dev.wait_until("not connected again", |dev| dev_status(dev, "remote").1 == "mcp-client(remote): connected, 5 tools");
    assert!(
        dev.stderr().iter().any(|l| l.contains("the server no longer knows this MCP session: it refused a request without naming it")),
        "the reconnect says why: {:?}",
        dev.stderr()
    );
    assert_eq!(dev.call("mcp__remote__echo", r#"{"text": "back"}"#)["text"], "back");
    assert_eq!(sessions(), 2, "one new session");
    eprintln!("the call under a lost session failed after {took:?}");

    // A refusal that names no request while the session is still known
    // (an id of null): the call fails at once, the session answers the
    // ping, and it is kept.
    let start = Instant::now();
    let refused = dev.call("mcp__remote__refuse", "{}");
    let took = start.elapsed();
    let text = refused["text"].as_str().unwrap_or_default();
    assert!(refused["isError"] == true && text.contains("Bad Request: refused for no reason given (code -32000)"), "{refused}");
    assert!(took < Duration::from_secs(3), "the refused call failed after {took:?}");
    let notice = dev.expect_notice("the session still answers a ping, so it is kept");
    assert!(notice.starts_with("mcp-client(remote): the server refused a request without naming it"), "{notice}");
    assert_eq!(dev.call("mcp__remote__echo", r#"{"text": "still"}"#)["text"], "still");
    assert_eq!(sessions(), 2, "the session was kept");
}

#[test]
fn an_undecodable_sse_event_is_logged_under_the_server_name_and_the_answer_still_arrives() {
    let scratch = Scratch::new();
    let log = scratch.path().join("sessions.log");
    let server = Refusing::script("http_forgetful.py", &log, &[]);
    scratch.composition(&format!(
        "- id: remote\n  name: mcp-client\n  config:\n    serverName: remote\n    transport: streamable-http\n    url: {}\n",
        server.url
    ));
    let mut dev = dev(&scratch);
    dev.wait_until("the server did not connect", |dev| dev_status(dev, "remote").1 == "mcp-client(remote): connected, 5 tools");
    let start = Instant::now();
    let answer = dev.call("mcp__remote__garbled", r#"{"text": "through"}"#);
    let took = start.elapsed();
    assert_eq!(answer["text"], "through", "{answer}");
    let notice = dev.expect_notice("failed to deserialize server message");
    assert!(notice.starts_with("mcp-client(remote): rmcp dropped or refused something"), "{notice}");
    assert!(took < Duration::from_secs(3), "the call took {took:?}");
}

#[test]
fn a_reload_under_dev_cancels_a_hung_http_call_and_finishes_within_seconds() {
    use std::io::{BufRead, Write};
    let scratch = Scratch::new();
    let log = scratch.path().join("requests.log");
    let server = Refusing::script("http_forgetful.py", &log, &[]);
    let row = |timeout: u64| {
        format!(
            "- id: remote\n  name: mcp-client\n  config:\n    serverName: remote\n    transport: streamable-http\n    url: {}\n    toolCallTimeoutMs: {timeout}\n",
            server.url
        )
    };
    scratch.composition(&row(60_000));
    let mut dev = dev(&scratch);
    dev.wait_until("the server did not connect", |dev| dev_status(dev, "remote").1 == "mcp-client(remote): connected, 5 tools");
    writeln!(dev.stdin, "call mcp__remote__hang {{}}").unwrap();
    dev.stdin.flush().unwrap();
    logged(&log, "call hang");
    let start = Instant::now();
    scratch.composition(&row(59_000));
    let mut answer = String::new();
    dev.stdout.read_line(&mut answer).unwrap();
    let took = start.elapsed();
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert!(
        answer["isError"] == true && answer["text"].as_str().unwrap_or_default().contains("was cancelled (its entry is being reloaded)"),
        "{answer}"
    );
    assert!(took < Duration::from_secs(5), "the hung call held the reload for {took:?}");
    dev.expect_reloads(1);
    logged(&log, "cancelled ");
    dev.wait_until("not connected again", |dev| dev_status(dev, "remote").1 == "mcp-client(remote): connected, 5 tools");
    eprintln!("the hung HTTP call was answered {took:?} after the change");
}

#[test]
fn status_check_and_config_hide_header_and_env_values_unless_asked() {
    let scratch = Scratch::new();
    let stdio = row("local", &marker("secrets"), "", "    env:\n      DB_PASSWORD: !!js process.env.DB_PASSWORD\n");
    scratch.composition(&format!(
        "{stdio}- id: remote\n  name: mcp-client\n  config:\n    serverName: remote\n    transport: streamable-http\n    url: http://127.0.0.1:9/mcp\n    headers:\n      Authorization: !!js '`Bearer ${{process.env.TOOLS_TOKEN}}`'\n    reconnect:\n      initialDelayMs: 20000\n"
    ));
    let secrets = [("DB_PASSWORD", "pw-SECRET-1"), ("TOOLS_TOKEN", "tok-SECRET-2")];
    let config_home = scratch.path().join(".config").display().to_string();
    let mut env: Vec<(&str, &str)> = secrets.to_vec();
    env.push(("XDG_CONFIG_HOME", &config_home));
    let mut dev = Dev::start(scratch.path(), &env);
    connected(&mut dev, "local");
    let status = dev.send("status");
    assert!(!status.to_string().contains("SECRET"), "{status}");
    let entry = |status: &serde_json::Value, id: &str| status["entries"].as_array().unwrap().iter().find(|e| e["id"] == id).cloned().unwrap();
    assert_eq!(entry(&status, "local")["config"]["env"]["DB_PASSWORD"], "(hidden)", "{status}");
    assert_eq!(entry(&status, "remote")["config"]["headers"]["Authorization"], "(hidden)", "{status}");
    assert_eq!(entry(&status, "remote")["config"]["url"], "http://127.0.0.1:9/mcp", "only secrets are hidden");
    let shown = dev.send("status --show-values");
    assert_eq!(entry(&shown, "local")["config"]["env"]["DB_PASSWORD"], "pw-SECRET-1");
    assert_eq!(entry(&shown, "remote")["config"]["headers"]["Authorization"], "Bearer tok-SECRET-2");
    drop(dev);

    for args in [&["check", "--json"][..], &["config"][..]] {
        let out = super::cordis(&scratch, args, &secrets);
        let (stdout, stderr) = cordis_tests::text(&out);
        assert!(!stdout.contains("SECRET") && !stderr.contains("SECRET"), "{args:?}:\n{stdout}\n{stderr}");
    }
    let out = super::cordis(&scratch, &["config", "--show-values"], &secrets);
    let (stdout, _) = cordis_tests::text(&out);
    assert!(stdout.contains("pw-SECRET-1") && stdout.contains("tok-SECRET-2"), "{stdout}");
}
