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
use cordis_tests::{build_side_workspace, library as lib_path, repo_root, target_dir, text, Scratch};
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
    let host = scratch.boot("- id: compat\n  name: ./libcompat.so\n  config:\n    prefix: '> '\n", true);
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
fn a_plugin_requiring_a_later_capability_is_refused_by_a_1_0_host_naming_it() {
    let (code, abi, rest) = host_1_0(&lib_path("fixture-host-info"), "needs-host-info", &json!({}), "host", &json!({}));
    assert_eq!(abi, format!("abi 1.{}", cordis_abi::ABI_VERSION.minor), "{rest}");
    assert_eq!(code, 3, "refused before apply: {rest}");
    assert!(rest.contains("requires host capability `host.info` version 1, which cordis-abi 1.1 brings"), "{rest}");
    assert!(!rest.contains("apply failed"), "its apply never ran: {rest}");
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
    assert_eq!(value["atApply"]["capabilities"], json!(["host.info@1", "tools.dynamic@1"]));
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
