//! cordis-abi 1's promise, with real libraries compiled by this run
//! (docs/abi.md): `tests/compat/` holds a frozen copy of cordis-abi as
//! released at 1.0, a plugin built against it and a minimal host built
//! against it, built from their own sources into `target/compat`.
//!
//! - forward: the 1.0 plugin loads in today's host, registers its tool,
//!   event type and projection, and answers a call that appends an event;
//! - backward: today's plugin libraries load in the 1.0 host and answer a
//!   call there;
//! - the 1.0 host refuses a library of another major (0.x) before running
//!   any of its code;
//! - across 1.1 (`host.info`): a plugin that requires it is refused by the
//!   1.0 host, naming it and cordis-abi 1.1, before its `apply` runs; one
//!   that only uses it runs there without it; today's host gives it to
//!   both;
//! - across 1.3 (`tools.dynamic`): `mcp-client`, which requires it, is
//!   refused by the 1.0 host the same way.

use std::path::PathBuf;
use std::process::Command;

use cordis_engine::tools::ToolCall;
use cordis_session::log::Appender;
use cordis_tests::{build_side_workspace, fixture_library, library as lib_path, repo_root, target_dir, text, Scratch};
use serde_json::{json, Value};

/// Builds `tests/compat` (locked to its own Cargo.lock) into
/// `target/compat`; returns its `debug` folder.
fn compat_build() -> PathBuf {
    let target = target_dir().parent().expect("target/<profile> has a parent").join("compat");
    build_side_workspace(&repo_root().join("tests/compat/Cargo.toml"), &target, false, true)
}

/// Runs the 1.0 host on `library`: (exit code, the `abi` line, the rest).
fn host_1_0(library: &std::path::Path, plugin: &str, config: &Value, tool: &str, arguments: &Value) -> (i32, String, String) {
    let out = Command::new(compat_build().join("compat-host-1-0"))
        .arg(library)
        .args([plugin, &config.to_string(), tool, &arguments.to_string()])
        .output()
        .expect("run the 1.0 host");
    let (stdout, stderr) = text(&out);
    let mut lines = stdout.lines();
    let first = lines.next().unwrap_or_default().to_string();
    let rest = lines.collect::<Vec<_>>().join("\n");
    (out.status.code().unwrap_or(-1), first, format!("{rest}{}", if stderr.is_empty() { String::new() } else { format!("\nstderr: {stderr}") }))
}

#[test]
fn a_plugin_built_against_abi_1_0_loads_and_runs_in_this_host() {
    let library = compat_build().join("libcompat_plugin_1_0.so");
    let scratch = Scratch::new();
    std::fs::copy(&library, scratch.path().join("libcompat.so")).unwrap();
    let host = scratch.boot("- id: compat\n  name: ./libcompat.so/compat-plugin-1-0\n  config:\n    prefix: '> '\n", true);
    let session = host.services.sessions.create(None).unwrap();
    session.append_value("turn/start", &json!({"turn": 1}), Appender::Host).unwrap();
    let result = host.services.tools.execute(&ToolCall { id: "c1", name: "tally", arguments: r#"{"text": "one two three"}"# }, Some(&*session));
    assert!(!result.is_error, "{}", result.text);
    assert_eq!(result.text, "> 3 words");
    let appended: Vec<(String, Value)> = session.with_events(|events| events.iter().map(|e| (e.kind.clone(), e.data_value())).collect());
    assert!(appended.contains(&("tally/count".to_string(), json!({"words": 3}))), "{appended:?}");
    assert_eq!(session.state("tally").as_deref(), Some("3"), "its projection folds the appended event");

    // `cordis plugins` reports the library's ABI version.
    let out = scratch.cordis(&["plugins", "--plugin-dir", &scratch.path().display().to_string()]);
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("libcompat.so (--plugin-dir, cordis-abi 1.0)"), "{stdout}\n{stderr}");
}

/// The 1.0 plugin's whole surface in today's host, with values that differ
/// in every argument: capabilities asked by name and version, a service
/// provided and consumed (the consumer listed first), a turn-end hook, the
/// owned type's validator on replay and its projection's fold.
#[test]
fn every_entry_point_of_a_1_0_plugin_works_in_this_host() {
    let library = compat_build().join("libcompat_plugin_1_0.so");
    let scratch = Scratch::new();
    std::fs::copy(&library, scratch.path().join("libcompat.so")).unwrap();
    scratch.composition(
        "- id: consumer\n  name: ./libcompat.so/compat-consumer-1-0\n- id: compat\n  name: ./libcompat.so/compat-plugin-1-0\n  config:\n    prefix: '> '\n",
    );
    std::fs::write(
        scratch.path().join("tally.script.yml"),
        "model: compat\nprompt: count\nsteps:\n  - text: counting\n    calls:\n      - name: tally\n        arguments: '{\"text\": \"one two three\"}'\n      - name: joined\n        arguments: '{\"text\": \"west east\"}'\n  - text: done\n",
    )
    .unwrap();
    // Plugin log lines at info level show with RUST_LOG=info.
    let out = scratch.command(&["run", "--script", "tally.script.yml"]).env("RUST_LOG", "info").output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("> 3 words"), "{stdout}");
    assert!(stdout.contains("west|east"), "the service got its method and arguments in order: {stdout}");
    // Capabilities by name and version: today's host answers host.info@1,
    // and a name it does not offer is absent, not an error.
    assert!(stderr.contains(r#"host.info@1: "cordis"; compat.nope@7: none"#), "{stderr}");

    let session = stdout.split_whitespace().nth(1).unwrap().to_string();
    let export = text(&scratch.cordis(&["session", "export", &session])).0;
    let events: Vec<Value> = export.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect();
    let counts: Vec<u64> = events.iter().filter(|e| e["type"] == "tally/count").map(|e| e["data"]["words"].as_u64().unwrap()).collect();
    let last_step = events.iter().filter(|e| e["type"] == "step/start").filter_map(|e| e["data"]["step"].as_u64()).next_back().unwrap();
    // The hook got the turn and the step apart: 100 × turn + step.
    assert_eq!(counts, [3, 100 + last_step], "{events:?}");
    // Replayed, every event passes the validator, and the projection folds
    // both (it refuses any other event type).
    let show = text(&scratch.cordis(&["session", "show", &session])).0;
    assert!(show.contains(&format!("tallied: {} words", 3 + 100 + last_step)), "{show}");
}

/// Today's plugin API in the 1.0 host: the probe fixture answers each
/// entry point of the frozen core with what it was given.
#[test]
fn every_1_0_entry_point_of_a_plugin_built_today_works_in_a_1_0_host() {
    let out =
        Command::new(compat_build().join("compat-host-1-0")).arg("--probe").arg(fixture_library("fixture-probe", &target_dir())).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["inject"], json!(["tools", "agent"]));
    assert_eq!(report["logs"], json!(["Info: host.info: none; compat.nope@7: none"]), "no capability in a 1.0 host");
    assert_eq!(report["declExtension"], false);
    let tool = &report["tool"];
    assert_eq!((tool["name"].as_str(), tool["description"].as_str()), (Some("probe"), Some("Answers with the left and right it was given.")));
    assert_eq!(tool["parameters"]["required"], json!(["left", "right"]));
    assert_eq!(tool["outputSchema"]["required"], json!(["left", "right", "call", "seq"]));
    assert_eq!(tool["presentCall"], json!({"kind": "probe", "title": "L1 then R2"}));
    for (path, seq) in [("execute", 0), ("executeTokens", 1)] {
        assert_eq!(tool[path]["text"], "left=L1 right=R2 call=call_7", "{path}");
        assert_eq!(tool[path]["value"], json!({"left": "L1", "right": "R2", "call": "call_7", "seq": seq}), "{path}");
    }
    assert_eq!(tool["extension"], false);
    assert_eq!(report["validator"]["good"], true);
    assert!(report["validator"]["bad"].as_str().unwrap().contains(r#"got {"left":1}"#), "{report}");
    let projection = &report["projection"];
    assert_eq!((projection["key"].as_str(), projection["version"].as_u64()), (Some("probe"), Some(3)));
    assert_eq!(projection["types"], json!(["probe/seen"]));
    assert_eq!(projection["state"], json!(["probe/seen:first>second", "probe/seen:third>fourth"]));
    assert_eq!(projection["render"], "probe/seen:first>second\nprobe/seen:third>fourth");
    assert_eq!(projection["summary"], "2 seen");
    assert_eq!(projection["wrongType"]["error"], "probe folds probe/seen only, was given `other/type`");
    assert_eq!(projection["compactionContext"], json!({"content": [{"type": "text", "text": "last seen: probe/seen:third>fourth"}]}));
    assert_eq!(projection["unknownExtension"], false);
    assert_eq!(report["service"], json!({"name": "probe-echo", "answer": {"method": "join", "args": {"x": 1}}}));
    assert_eq!(report["hook"], json!({"turn1": true, "turn2": false, "extension": false}));
    let events: Vec<&Value> = report["events"].as_array().unwrap().iter().map(|e| &e["data"]).collect();
    assert_eq!(events[2..], [&json!({"left": "turn 1", "right": "done 1"}), &json!({"left": "turn 2", "right": "done 2"})]);
}

#[test]
fn plugins_built_against_this_abi_load_and_run_in_a_1_0_host() {
    let config = json!({"allowParallelInProgress": true});
    let call = json!({"todos": [{"content": "ship", "status": "in_progress"}]});
    let (code, abi, rest) = host_1_0(&lib_path("tool-todo"), "tool-todo", &config, "todo_write", &call);
    assert_eq!(code, 0, "{abi}\n{rest}");
    assert_eq!(abi, format!("abi {}", cordis_abi::ABI_VERSION), "the library reports the ABI it was built against");
    let outcome: Value = serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{e}: {rest}"));
    assert_eq!(outcome["isError"], false, "{outcome}");
    assert_eq!(outcome["events"], json!([{"type": "todo/write", "data": {"todos": [{"content": "ship", "status": "in_progress"}]}}]));
    // Its refusals still work there too: a second in-progress item under
    // the single policy is refused by the plugin, not by the host.
    let single = json!({"allowParallelInProgress": false});
    let two = json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]});
    let (code, _, rest) = host_1_0(&lib_path("tool-todo"), "tool-todo", &single, "todo_write", &two);
    assert_eq!(code, 0, "{rest}");
    let outcome: Value = serde_json::from_str(&rest).unwrap();
    assert_eq!(outcome["isError"], true, "{outcome}");
    assert_eq!(outcome["events"], json!([]));
}

#[test]
fn a_1_0_host_refuses_a_library_of_another_major_before_running_it() {
    let (code, line, rest) = host_1_0(&lib_path("fixture-old-version"), "old-version", &json!({}), "none", &json!({}));
    assert_eq!(code, 2, "{line}\n{rest}");
    assert!(line.starts_with("refused:") && line.contains("0.1.0") && line.contains("1.0.0"), "{line}");
}

#[test]
fn both_hosts_refuse_a_library_reporting_another_major_on_its_own_word() {
    // The 1.x root module and layout, so abi_stable lets it through; its
    // `abi` entry says 2.0.
    let library = fixture_library("fixture-major-two", &target_dir());
    let (code, abi, rest) = host_1_0(&library, "none", &json!({}), "none", &json!({}));
    assert_eq!((code, abi.as_str()), (2, "abi 2.0"), "{rest}");
    assert!(rest.starts_with("refused: it was built against cordis-abi 2.0, and this host speaks cordis-abi 1.0"), "{rest}");

    let scratch = Scratch::new();
    std::fs::copy(&library, scratch.path().join("libtwo.so")).unwrap();
    scratch.composition("- id: two\n  name: ./libtwo.so\n");
    let out = scratch.cordis(&["check"]);
    let stdout = text(&out).0;
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("it was built against cordis-abi 2.0, and this host speaks cordis-abi 1."), "{stdout}");
}

#[test]
fn a_plugin_requiring_a_later_capability_is_refused_by_a_1_0_host_naming_it() {
    let (code, abi, rest) = host_1_0(&lib_path("fixture-host-info"), "needs-host-info", &json!({}), "host", &json!({}));
    assert_eq!(abi, format!("abi 1.{}", cordis_abi::ABI_VERSION.minor), "{rest}");
    assert_eq!(code, 3, "refused before apply: {rest}");
    assert!(rest.contains("requires host capability `host.info` version 1, which cordis-abi 1.1 brings"), "{rest}");
    assert!(!rest.contains("apply failed"), "its apply never ran: {rest}");
}

#[test]
fn a_1_0_host_refuses_todo_read_which_requires_session_read_before_apply() {
    let (code, _, rest) = host_1_0(&lib_path("todo-read"), "todo-read", &json!({}), "todo_read", &json!({}));
    assert_eq!(code, 3, "refused before apply: {rest}");
    assert!(rest.contains("requires host capability `session.read` version 1, which cordis-abi 1.4 brings"), "{rest}");
}

#[test]
fn a_plugin_using_a_later_capability_runs_in_a_1_0_host_without_it() {
    let (code, _, rest) = host_1_0(&lib_path("fixture-host-info"), "likes-host-info", &json!({}), "host", &json!({}));
    assert_eq!(code, 0, "{rest}");
    let outcome: Value = serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{e}: {rest}"));
    assert_eq!(outcome["isError"], false, "{outcome}");
    assert_eq!(outcome["text"], "a host without host.info (cordis-abi 1.0)");
    assert_eq!(outcome["value"], json!({"atApply": null, "atCall": null}));
}

#[test]
fn plugins_using_a_1_1_capability_get_it_from_this_host() {
    let scratch = Scratch::new();
    std::fs::copy(lib_path("fixture-host-info"), scratch.path().join("libhostinfo.so")).unwrap();
    let host = scratch.boot("- id: needs\n  name: ./libhostinfo.so/needs-host-info\n", true);
    let result = host.services.tools.execute(&ToolCall { id: "c1", name: "host", arguments: "{}" }, None);
    assert!(!result.is_error, "{}", result.text);
    let minor = cordis_abi::ABI_VERSION.minor;
    assert_eq!(result.text, format!("cordis {} (cordis-abi 1.{minor})", env!("CARGO_PKG_VERSION")));
    let value: Value = result.value.as_ref().map(|v| v.to_value().unwrap()).unwrap_or(Value::Null);
    assert_eq!(value["atApply"]["capabilities"], json!(["host.info@1", "tools.dynamic@1", "session.read@1"]));
    assert_eq!(value["atApply"], value["atCall"]);

    let out = scratch.cordis(&["plugins", "--plugin-dir", &scratch.path().display().to_string()]);
    let (stdout, stderr) = text(&out);
    let built = format!("libhostinfo.so (--plugin-dir, cordis-abi 1.{})", cordis_abi::ABI_VERSION.minor);
    assert!(stdout.contains(&built), "{stdout}\n{stderr}");
    assert!(stdout.contains("host capabilities: requires host.info@1 (cordis-abi 1.1); uses none"), "{stdout}");
    assert!(stdout.contains("host capabilities: requires none; uses host.info@1"), "{stdout}");
}

#[test]
fn this_host_refuses_a_plugin_requiring_a_capability_it_lacks_before_apply() {
    let scratch = Scratch::new();
    std::fs::copy(lib_path("fixture-host-info"), scratch.path().join("libhostinfo.so")).unwrap();
    scratch.composition("- id: future\n  name: ./libhostinfo.so/needs-the-future\n");
    let out = scratch.cordis(&["check"]);
    let (stdout, stderr) = text(&out);
    let all = format!("{stdout}{stderr}");
    assert!(
        all.contains(&format!(
            "plugin needs-the-future requires host capability `time.travel` version 1, which cordis-abi 1.99 brings; this host speaks cordis-abi {}",
            cordis_abi::ABI_VERSION
        )),
        "{all}"
    );
    assert!(!all.contains("apply of needs-the-future ran"), "{all}");
    assert!(all.contains("cordis.yml:2"), "the refusal names the file and line: {all}");
}

#[test]
fn a_1_0_host_refuses_mcp_client_which_requires_tools_dynamic_before_apply() {
    let config = json!({"serverName": "x", "transport": "stdio", "command": "/nonexistent/server"});
    let (code, abi, rest) = host_1_0(&lib_path("mcp-client"), "mcp-client", &config, "none", &json!({}));
    assert_eq!(abi, format!("abi 1.{}", cordis_abi::ABI_VERSION.minor), "{rest}");
    assert_eq!(code, 3, "refused before apply: {rest}");
    assert!(rest.contains("requires host capability `tools.dynamic` version 1, which cordis-abi 1.3 brings"), "{rest}");
}
