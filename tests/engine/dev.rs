//! `cordis dev`: hot reload of plugin libraries and of the composition,
//! driven through the dev console (stdin/stdout) of the real binary.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cordis_tests::dev::Dev;
use cordis_tests::{library, text, Scratch};
use serde_json::{json, Value};

fn setup(scratch: &Scratch, todo_parallel: bool) -> PathBuf {
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let lib = plugins.join("libversioned.so");
    std::fs::copy(library("fixture-versioned-a"), &lib).unwrap();
    std::fs::copy(library("tool-todo"), plugins.join("libtool_todo.so")).unwrap();
    scratch.composition(&format!(
        "- id: v\n  name: ./plugins/libversioned.so\n- id: todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: {todo_parallel}\n"
    ));
    lib
}

fn build_bytes(version: char) -> Vec<u8> {
    std::fs::read(library(&format!("fixture-versioned-{}", version.to_ascii_lowercase()))).unwrap()
}

fn write_in_chunks(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(path).unwrap();
    for chunk in bytes.chunks(bytes.len() / 5 + 1) {
        f.write_all(chunk).unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn delete_and_recreate(path: &Path, bytes: &[u8]) {
    std::fs::remove_file(path).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(path, bytes).unwrap();
}

fn atomic_rename(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn library_swaps_reload_once_and_answer_the_new_build() {
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.version(), "A");
    let todo_fiber = dev.fiber("todo");
    let plan_args = r#"{"todos": [{"content": "swap builds", "status": "in_progress"}]}"#;
    assert_eq!(dev.call("todo_write", plan_args)["isError"], false);
    let rss_before = dev.rss_kib();

    type Writer = (&'static str, fn(&Path, &[u8]));
    let writers: [Writer; 3] = [("chunks", write_in_chunks), ("delete and recreate", delete_and_recreate), ("atomic rename", atomic_rename)];
    let mut reloads = 0;
    for (how, write) in writers {
        for target in ['B', 'A', 'B'] {
            write(&lib, &build_bytes(target));
            reloads += 1;
            dev.expect_reloads(reloads);
            assert_eq!(dev.version(), target.to_string(), "after {how} to {target}");
        }
        // Back to A for the next writer.
        atomic_rename(&lib, &build_bytes('A'));
        reloads += 1;
        dev.expect_reloads(reloads);
        assert_eq!(dev.version(), "A");
    }
    // Unchanged content does nothing.
    atomic_rename(&lib, &build_bytes('A'));
    std::thread::sleep(Duration::from_millis(900));
    assert_eq!(dev.reloads(), reloads);
    // The host holds each library's current file open (so a rename over it
    // does not free its blocks while the reload waits) and, once changes
    // are quiet, no replaced one: no build is kept on disk.
    let mut open = dev.open_files_under(&scratch.path().join("plugins"));
    open.sort();
    let expected: Vec<String> = ["libtool_todo.so", "libversioned.so"]
        .iter()
        .map(|f| scratch.path().join("plugins").join(f).canonicalize().unwrap().display().to_string())
        .collect();
    assert_eq!(open, expected, "open files under plugins/ once changes are quiet");

    // The session, its plan and the other plugin are untouched.
    assert_eq!(dev.fiber("todo"), todo_fiber);
    assert_eq!(dev.send("plan")["todos"], json!([{"content": "swap builds", "status": "in_progress"}]));
    let extra = dev.send("plan todos");
    assert!(extra["error"].as_str().is_some_and(|e| e.contains("`plan` takes no arguments, and got `todos`")), "{extra}");
    let rss_after = dev.rss_kib();
    eprintln!(
        "memory: {} KiB resident before, {} KiB after {reloads} reloads: {} KiB per reload",
        rss_before,
        rss_after,
        rss_after.saturating_sub(rss_before) / reloads
    );
}

#[test]
fn a_fifo_or_a_folder_where_the_library_was_blocks_nothing() {
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.version(), "A");
    // Opening a FIFO for reading waits for a writer, unless told not to:
    // the host must neither hang its watcher nor load it.
    std::fs::remove_file(&lib).unwrap();
    let made = Command::new("mkfifo").arg(&lib).status().expect("run mkfifo");
    assert!(made.success());
    let line = dev.expect_notice("not a regular file");
    assert!(line.contains("keeps serving"), "{line}");
    assert_eq!(dev.version(), "A");
    // The removed build is let go of once changes are quiet, though no
    // new one has come yet.
    std::thread::sleep(Duration::from_millis(600));
    let open = dev.open_files_under(&scratch.path().join("plugins"));
    assert!(!open.iter().any(|f| f.contains("libversioned.so")), "{open:?}");
    atomic_rename(&lib, &build_bytes('B'));
    dev.expect_reloads(1);
    assert_eq!(dev.version(), "B");
    // A folder in its place, then a build again.
    std::fs::remove_file(&lib).unwrap();
    std::fs::create_dir(&lib).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(dev.version(), "B");
    std::fs::remove_dir(&lib).unwrap();
    atomic_rename(&lib, &build_bytes('A'));
    dev.expect_reloads(2);
    assert_eq!(dev.version(), "A");
}

#[test]
fn each_refused_build_is_its_own_and_a_good_one_after_them_loads() {
    // Builds that `dlopen` maps before the loader refuses them (an
    // incompatible ABI, no root module) stay mapped under their private
    // copy's name: a later copy must never be handed that image.
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.version(), "A");
    let cases = [
        ("fixture-old-abi", "incompatible plugin ABI"),
        ("fixture-not-plugin", "not a cordis plugin library"),
        ("fixture-old-version", "cordis-abi 0.1"),
        ("fixture-not-plugin", "not a cordis plugin library"),
    ];
    for (n, (fixture, notice)) in cases.iter().enumerate() {
        atomic_rename(&lib, &std::fs::read(library(fixture)).unwrap());
        let start = Instant::now();
        let line = loop {
            let refusals: Vec<String> = dev.stderr().into_iter().filter(|l| l.contains("keeps serving")).collect();
            if refusals.len() > n {
                break refusals[n].clone();
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no notice for {fixture}; stderr: {:?}", dev.stderr());
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(line.contains(notice), "{fixture}: {line}");
        assert_eq!(dev.version(), "A");
        std::thread::sleep(Duration::from_millis(300));
    }
    atomic_rename(&lib, &build_bytes('B'));
    dev.expect_reloads(1);
    assert_eq!(dev.version(), "B");
}

#[test]
fn broken_builds_leave_the_previous_version_serving() {
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let b = build_bytes('B');
    let mut dev = Dev::start(scratch.path(), &[("CORDIS_FIXTURE_FAIL", "B")]);
    assert_eq!(dev.version(), "A");
    let other_plugin = std::fs::read(library("fixture-decoy")).unwrap();
    let cases: [(&str, Vec<u8>, &str); 5] = [
        ("truncated", b[..b.len() / 2].to_vec(), "past the end"),
        ("zero bytes", Vec::new(), "the file is empty"),
        ("text", b"not a library\n".to_vec(), "ELF magic"),
        ("another plugin", other_plugin, "was not loaded"),
        ("apply fails", b.clone(), "build B refuses to apply"),
    ];
    for (what, bytes, notice) in cases {
        atomic_rename(&lib, &bytes);
        let line = dev.expect_notice(notice);
        assert!(line.contains("keeps serving"), "{what}: {line}");
        assert_eq!(dev.version(), "A", "{what}");
        assert_eq!(dev.reloads(), 0, "{what}");
    }
    // One message per change, not one per look at the unchanged file.
    std::thread::sleep(Duration::from_millis(800));
    let refusals = dev.stderr().iter().filter(|l| l.contains("keeps serving")).count();
    assert_eq!(refusals, 5, "{:?}", dev.stderr());
    drop(dev);

    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[("CORDIS_FIXTURE_PANIC", "B")]);
    atomic_rename(&lib, &b);
    let line = dev.expect_notice("panicked in apply");
    assert!(line.contains("plugin versioned panicked in apply: build B panics"), "{line}");
    assert_eq!(dev.version(), "A");
    assert_eq!(dev.reloads(), 0);
}

#[test]
fn calls_in_flight_finish_on_their_version_and_log_once() {
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    // A slow call is running when the new build lands: wait until its
    // tool/call is in the log, then replace the library.
    writeln!(dev.stdin, r#"call slow_version {{"ms": 1500}}"#).unwrap();
    dev.stdin.flush().unwrap();
    let log_path = scratch.path().join(".cordis/sessions").join(format!("{}.jsonl", dev.session));
    let start = Instant::now();
    while !std::fs::read_to_string(&log_path).unwrap_or_default().contains(r#""name":"slow_version""#) {
        assert!(start.elapsed() < Duration::from_secs(30), "the slow call never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    atomic_rename(&lib, &build_bytes('B'));
    let mut answer = String::new();
    dev.stdout.read_line(&mut answer).unwrap();
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["text"], "A", "the call finishes on the version that started it");
    dev.expect_reloads(1);
    assert_eq!(dev.version(), "B");

    // todo_write calls while tool-todo itself is reloaded: each successful
    // call appends exactly one todo/write.
    let todo_lib = scratch.path().join("plugins/libtool_todo.so");
    let mut bytes = std::fs::read(&todo_lib).unwrap();
    let mut ok = 0;
    for i in 0..40 {
        if i == 10 || i == 25 {
            if i == 25 {
                // One reload per change: the first must have landed before
                // the second change is made.
                let start = Instant::now();
                while dev.reloads() < 2 {
                    assert!(start.elapsed() < Duration::from_secs(30), "no reload of tool-todo; stderr: {:?}", dev.stderr());
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            bytes.extend_from_slice(b"trailing bytes make a new build");
            atomic_rename(&todo_lib, &bytes);
        }
        let args = format!(r#"{{"todos": [{{"content": "step {i}", "status": "in_progress"}}]}}"#);
        let result = dev.call("todo_write", &args);
        assert_eq!(result["isError"], false, "{result}");
        ok += 1;
        std::thread::sleep(Duration::from_millis(40));
    }
    dev.expect_reloads(3);
    let log = std::fs::read_to_string(&log_path).unwrap();
    let count = |kind: &str| log.lines().filter(|l| l.contains(&format!("\"type\":\"{kind}\""))).count();
    assert_eq!(count("versioned/work"), 1);
    assert_eq!(count("todo/write"), ok);
    assert_eq!(count("tool/result"), ok + 2);
}

#[test]
fn composition_edits_restart_only_the_touched_entry() {
    let scratch = Scratch::new();
    setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    let two_active = r#"{"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}"#;
    assert_eq!(dev.call("todo_write", two_active)["isError"], false);
    let plan = dev.send("plan")["todos"].clone();
    let v_fiber = dev.fiber("v");
    let todo_fiber = dev.fiber("todo");
    let composition = |parallel: &str, extra: &str| {
        format!("- id: v\n  name: ./plugins/libversioned.so\n- id: todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: {parallel}\n{extra}")
    };

    // true → false: the description and the accepted input change together.
    scratch.composition(&composition("false", ""));
    dev.expect_reloads(1);
    assert!(dev.expect_notice("composition reloaded").ends_with("composition reloaded: changed todo"), "{:?}", dev.stderr());
    assert_eq!(dev.fiber("v"), v_fiber, "the untouched entry keeps its fiber");
    assert_ne!(dev.fiber("todo"), todo_fiber);
    let tools = dev.send("tools");
    let description = tools.as_array().unwrap().iter().find(|t| t["name"] == "todo_write").unwrap()["description"].clone();
    assert!(description.as_str().unwrap().contains("at most one todo `in_progress`"), "{description}");
    let refused = dev.call("todo_write", two_active);
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(dev.send("plan")["todos"], plan, "the plan logged under the old policy survives");

    // false → true.
    scratch.composition(&composition("true", ""));
    dev.expect_reloads(2);
    assert_eq!(dev.call("todo_write", two_active)["isError"], false);

    // An invalid value changes nothing and says why, with the line.
    let todo_fiber = dev.fiber("todo");
    scratch.composition(&composition("maybe", ""));
    let notice = dev.expect_notice("must be a boolean");
    assert!(notice.contains("cordis.yml:6: entry todo: $.allowParallelInProgress"), "{notice}");
    assert_eq!(dev.reloads(), 2);
    assert_eq!(dev.fiber("todo"), todo_fiber);

    // Add an entry, then remove it.
    scratch.composition(&composition("true", "- id: echo\n  name: fixture-faulty/echo\n"));
    dev.expect_reloads(3);
    assert!(dev.stderr().iter().any(|l| l.ends_with("composition reloaded: added echo")), "{:?}", dev.stderr());
    assert_eq!(dev.call("echo", r#"{"text": "hi"}"#)["text"], "hi");
    assert_eq!(dev.fiber("todo"), todo_fiber);
    scratch.composition(&composition("true", ""));
    dev.expect_reloads(4);
    assert!(dev.stderr().iter().any(|l| l.ends_with("composition reloaded: removed echo")), "{:?}", dev.stderr());
    assert_eq!(dev.call("echo", r#"{"text": "hi"}"#)["isError"], true);

    // Deleting the composition (an editor saving by delete and create, or
    // by mistake) says so and changes nothing; putting it back reloads
    // only what differs.
    std::fs::remove_file(scratch.path().join("cordis.yml")).unwrap();
    let notice = dev.expect_notice("cannot read the composition");
    assert!(notice.contains("the running version is kept"), "{notice}");
    assert_eq!(dev.reloads(), 4);
    assert_eq!(dev.version(), "A");
    scratch.composition(&composition("true", "- id: echo\n  name: fixture-faulty/echo\n"));
    dev.expect_reloads(5);
    assert_eq!(dev.call("echo", r#"{"text": "hi"}"#)["text"], "hi");
    assert_eq!(dev.fiber("v"), v_fiber);
    assert_eq!(dev.version(), "A");
}

#[test]
fn included_file_edits_reload_and_a_bad_edit_keeps_the_last_good_tree() {
    let scratch = Scratch::new();
    setup(&scratch, true);
    let base = |parallel: &str| format!("- id: todo\n  name: ../plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: {parallel}\n");
    std::fs::create_dir_all(scratch.path().join("parts")).unwrap();
    std::fs::write(scratch.path().join("parts/base.yml"), base("true")).unwrap();
    scratch.composition("- id: v\n  name: ./plugins/libversioned.so\n- id: inc\n  name: cordis:include\n  config:\n    path: parts/base.yml\n");
    let mut dev = Dev::start(scratch.path(), &[]);
    let two_active = r#"{"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}"#;
    assert_eq!(dev.call("todo_write", two_active)["isError"], false);
    let v_fiber = dev.fiber("v");

    std::fs::write(scratch.path().join("parts/base.yml"), base("false")).unwrap();
    dev.expect_reloads(1);
    assert_eq!(dev.call("todo_write", two_active)["isError"], true, "the included file's new config is live");
    assert_eq!(dev.fiber("v"), v_fiber, "entries outside the include keep their fiber");

    let todo_fiber = dev.fiber("inc/todo");
    std::fs::write(scratch.path().join("parts/base.yml"), "- id: todo\n  name: [unclosed\n").unwrap();
    let notice = dev.expect_notice("the composition was not reloaded");
    assert!(notice.contains("parts/base.yml"), "{notice}");
    assert_eq!(dev.reloads(), 1);
    assert_eq!(dev.fiber("inc/todo"), todo_fiber, "the last good tree keeps running");
    assert_eq!(dev.call("todo_write", two_active)["isError"], true);
}

#[test]
fn a_provider_reload_restarts_its_consumers_and_none_reaches_the_old_one() {
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let provider = plugins.join("libfixture_counter.so");
    std::fs::copy(library("fixture-counter"), &provider).unwrap();
    let composition = |label: &str, with_provider: bool| {
        let mut text = String::from("- id: user\n  name: fixture-counter-user\n  config: {tool: next}\n");
        if with_provider {
            text.push_str(&format!("- id: counter\n  name: ./plugins/libfixture_counter.so\n  config: {{label: {label}}}\n"));
        }
        text
    };
    scratch.composition(&composition("a", true));
    let mut dev = Dev::start(scratch.path(), &[]);
    let first: Value = serde_json::from_str(dev.call("next", "{}")["text"].as_str().unwrap()).unwrap();
    assert_eq!(first["count"], 1);
    let user_fiber = dev.fiber("user");

    // A new build of the provider: the consumer is stopped first and started
    // again against the new instance.
    let mut bytes = std::fs::read(library("fixture-counter")).unwrap();
    bytes.extend_from_slice(&[0u8; 64]);
    atomic_rename(&provider, &bytes);
    dev.expect_reloads(1);
    assert_ne!(dev.fiber("user"), user_fiber, "the consumer was restarted");
    for n in 1..=3 {
        let reply = dev.call("next", "{}");
        assert_eq!(reply["isError"], false, "{reply}");
        let v: Value = serde_json::from_str(reply["text"].as_str().unwrap()).unwrap();
        assert_ne!(v["instance"], first["instance"], "no call reaches the old provider");
        assert_eq!(v["count"], n);
    }

    // Reconfiguring the provider restarts the consumer too.
    scratch.composition(&composition("b", true));
    dev.expect_reloads(2);
    let v: Value = serde_json::from_str(dev.call("next", "{}")["text"].as_str().unwrap()).unwrap();
    assert_eq!(v["label"], "b");

    // Without a provider the consumer waits; it starts when one comes back.
    scratch.composition(&composition("b", false));
    dev.expect_reloads(3);
    assert_eq!(dev.call("next", "{}")["isError"], true);
    scratch.composition(&composition("c", true));
    dev.expect_reloads(4);
    let v: Value = serde_json::from_str(dev.call("next", "{}")["text"].as_str().unwrap()).unwrap();
    assert_eq!(v["label"], "c");
}

/// Issue 11, kind 6: when `cordis dev` is the first command in a folder,
/// every folder it creates (`.cordis/`, `.cordis/hmr/`, `.cordis/sessions/`)
/// is private (0700); its session file is 0600. A second start keeps them so.
#[test]
fn dev_as_the_first_command_creates_private_state_folders() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    setup(&scratch, true);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for _ in 0..2 {
        let mut dev = Dev::start(scratch.path(), &[]);
        assert_eq!(dev.call("todo_write", r#"{"todos": [{"content": "a", "status": "pending"}]}"#)["isError"], false);
        let state = scratch.path().join(".cordis");
        assert!(!state.join("hmr").exists(), "libraries run from sealed in-memory copies: no copies on disk");
        for dir in [state.clone(), state.join("sessions")] {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        assert_eq!(mode(&state.join("sessions").join(format!("{}.jsonl", dev.session))), 0o600);
        drop(dev);
    }
}

/// A consumer whose config reads `ctx.counter` sees the provider as it is
/// after each change, waits while the provider is gone, and starts again
/// when it comes back.
#[test]
fn consumer_expressions_follow_the_provider_across_changes() {
    let scratch = Scratch::new();
    let composition = |label: Option<&str>| {
        let mut text = String::from("- id: user\n  name: fixture-counter-user\n  config:\n    tool: next\n    seen: !!js ctx.counter.label\n");
        if let Some(label) = label {
            text.push_str(&format!("- id: counter\n  name: fixture-counter\n  config: {{label: {label}}}\n"));
        }
        text
    };
    let seen = |dev: &mut Dev| -> Value {
        let reply = dev.call("next", r#"{"seen": true}"#);
        serde_json::from_str::<Value>(reply["text"].as_str().unwrap_or("null")).unwrap_or(Value::Null)["seen"].clone()
    };
    scratch.composition(&composition(Some("a")));
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(seen(&mut dev), "a");
    scratch.composition(&composition(Some("b")));
    dev.expect_reloads(1);
    assert_eq!(seen(&mut dev), "b", "re-evaluated against the new provider, not the old one");
    scratch.composition(&composition(None));
    dev.expect_reloads(2);
    let status = dev.send("status");
    assert_eq!(status["waiting"], serde_json::json!(["user"]), "{status}");
    assert!(status["entries"].as_array().unwrap().iter().all(|e| e["id"] != "user"), "{status}");
    assert_eq!(dev.call("next", "{}")["isError"], true);
    scratch.composition(&composition(Some("c")));
    dev.expect_reloads(3);
    assert_eq!(seen(&mut dev), "c");
    assert_eq!(dev.send("status")["waiting"], serde_json::json!([]));
}

/// Issue 11, kind 5: renaming an unrelated library over a watched one gives
/// one notice, naming the user's file (never a private copy), and leaves no
/// copy behind.
#[test]
fn an_unrelated_library_renamed_over_a_watched_one_gives_one_notice() {
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    atomic_rename(&lib, &std::fs::read(library("fixture-decoy")).unwrap());
    let notice = dev.expect_notice("was not loaded");
    assert!(notice.contains(&lib.display().to_string()), "{notice}");
    std::thread::sleep(Duration::from_millis(1500));
    let notices: Vec<String> = dev.stderr().into_iter().filter(|l| l.starts_with("cordis dev:") && !l.contains("watching")).collect();
    assert_eq!(notices.len(), 1, "one notice per change: {notices:?}");
    assert!(!notices[0].contains("/proc/") && !notices[0].contains(".cordis"), "{notices:?}");
    assert!(!scratch.path().join(".cordis/hmr").exists());
    assert_eq!(dev.version(), "A", "the previous version keeps serving");
}

/// Issue 14: no reload limit, and resident memory bounded. 300 library
/// reloads in one `cordis dev` process (the same pid throughout: restarts
/// in place re-execute it) with calls between them, under a memory budget
/// small enough that the host restarts itself in place many times: every
/// reload answers with the new build, no call is lost or logged twice, the
/// plan survives, and resident memory after the last reload is within the
/// budget of what it was before the first.
#[test]
fn three_hundred_reloads_stay_within_the_memory_budget() {
    const RELOADS: u64 = 300;
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let (a, b) = (build_bytes('A'), build_bytes('B'));
    // Room for about six replaced builds of the fixture between restarts.
    let size_mib = (a.len().max(b.len()) as u64).div_ceil(1024 * 1024);
    let budget_mib = (6 * size_mib).max(32);
    let mut dev = Dev::start_with(scratch.path(), &[], &["--memory-budget", &budget_mib.to_string()]);
    let pid = dev.child.id();
    assert_eq!(dev.version(), "A");
    let first = r#"{"todos": [{"content": "step 0", "status": "in_progress"}]}"#;
    assert_eq!(dev.call("todo_write", first)["isError"], false);
    let rss_before = dev.rss_kib();
    let start = Instant::now();
    for i in 1..=RELOADS {
        let (bytes, version) = if i % 2 == 1 { (&b, "B") } else { (&a, "A") };
        atomic_rename(&lib, bytes);
        let waited = Instant::now();
        while dev.reloads() < i {
            assert!(waited.elapsed() < Duration::from_secs(30), "reload {i} did not answer; stderr: {:?}", dev.stderr());
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(dev.reloads(), i, "one reload per change");
        assert_eq!(dev.version(), version, "reload {i} serves the new build");
        let args = format!(r#"{{"todos": [{{"content": "step {i}", "status": "in_progress"}}]}}"#);
        let result = dev.call("todo_write", &args);
        assert_eq!(result["isError"], false, "call after reload {i}: {result}");
    }
    let elapsed = start.elapsed();
    let rss_after = dev.rss_kib();
    let status = dev.send("status");
    let restarts = status["restarts"].as_u64().unwrap();
    eprintln!(
        "{RELOADS} reloads of a {size_mib} MiB library in {:.1} s with {restarts} restarts in place; VmRSS {rss_before} KiB before, {rss_after} KiB after (budget {budget_mib} MiB)",
        elapsed.as_secs_f64()
    );
    assert!(restarts >= RELOADS / 10, "the budget makes the host restart in place: {status}");
    assert_eq!(dev.child.id(), pid);
    assert!(dev.child.try_wait().unwrap().is_none(), "still the same running process");
    assert!(
        rss_after <= rss_before + budget_mib * 1024,
        "VmRSS {rss_after} KiB after {RELOADS} reloads, {rss_before} KiB before: more than the {budget_mib} MiB budget above it"
    );
    // Every call is in the log once, in order; the plan is the last list.
    assert_eq!(dev.send("plan")["todos"], json!([{"content": format!("step {RELOADS}"), "status": "in_progress"}]));
    let log_path = scratch.path().join(".cordis/sessions").join(format!("{}.jsonl", dev.session));
    let log = std::fs::read_to_string(&log_path).unwrap();
    let steps: Vec<u64> = log
        .lines()
        .filter(|l| l.contains(r#""type":"todo/write""#))
        .map(|l| {
            let event: Value = serde_json::from_str(l).unwrap();
            let content = event["data"]["todos"][0]["content"].as_str().unwrap().to_string();
            content.strip_prefix("step ").unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(steps, (0..=RELOADS).collect::<Vec<_>>(), "each call logged exactly once, in order");
    let count = |kind: &str| log.lines().filter(|l| l.contains(&format!("\"type\":\"{kind}\""))).count() as u64;
    // One tool/result per call: 2 before the loop, 2 per reload.
    assert_eq!(count("tool/result"), 2 + 2 * RELOADS);
    assert_eq!(count("turn/start"), 1, "the turn stays open across restarts");
    let notices = dev.stderr();
    assert_eq!(notices.iter().filter(|l| l.contains("restarting in place")).count() as u64, restarts, "one line per restart");
    assert!(!notices.iter().any(|l| l.contains("keeps serving")), "{notices:?}");
    assert_eq!(notices.iter().filter(|l| l.contains("cordis dev: watching")).count(), 1, "a restart prints nothing else: {notices:?}");
}

#[test]
fn a_library_that_lands_after_dev_started_loads_then() {
    // One entry names a library not built yet, in a folder that does not
    // exist yet either; another names a file that is not a plugin library.
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let versioned = plugins.join("libversioned.so");
    std::fs::copy(library("fixture-not-plugin"), &versioned).unwrap();
    // A failed entry refuses the start; a missing one does not.
    let both =
        "- id: v\n  name: ./plugins/libversioned.so\n- id: todo\n  name: ./out/lib/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n";
    scratch.composition(both);
    let refused = scratch.cordis(&["dev"]);
    assert_eq!(refused.status.code(), Some(1), "{:?}", text(&refused));
    assert!(text(&refused).1.contains("1 failed, 1 missing; failed: v; a failed entry refuses the start"), "{:?}", text(&refused));
    scratch.composition("- id: todo\n  name: ./out/lib/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n");
    let mut dev = Dev::start(scratch.path(), &[]);
    assert!(dev.running().is_empty());
    // status says which entries are not running, and why.
    let not_running = |dev: &mut Dev| -> Vec<(String, String)> {
        let status = dev.send("status");
        status["notRunning"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["id"].as_str().unwrap().to_string(), e["reason"].as_str().unwrap().to_string()))
            .collect()
    };
    let down = not_running(&mut dev);
    assert_eq!(down.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["todo"], "{down:?}");
    assert!(down[0].1.contains("libtool_todo.so"), "{down:?}");
    let wait_for = |dev: &mut Dev, id: &str| dev.wait_until(&format!("{id} never loaded"), |dev| dev.running().iter().any(|r| r == id));
    // The build lands: the folders appear, then the file is written in place.
    let out = scratch.path().join("out").join("lib");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::copy(library("tool-todo"), out.join("libtool_todo.so")).unwrap();
    wait_for(&mut dev, "todo");
    assert!(dev.expect_notice("appeared").contains("libtool_todo.so"));
    let reply = dev.call("todo_write", r#"{"todos":[{"content":"ship it","status":"in_progress"}]}"#);
    assert_eq!(reply["isError"], false, "{reply}");
    assert_eq!(dev.running(), ["todo"]);
    // An entry whose file is not a plugin library, added while running.
    scratch.composition(both);
    dev.expect_notice("not a cordis plugin library");
    let down = not_running(&mut dev);
    assert_eq!(down.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["v"], "{down:?}");
    assert!(down[0].1.contains("not a cordis plugin library"), "{down:?}");
    // The same bytes touched, and copied over again: not tried again, not
    // told again.
    let told = |dev: &Dev| dev.stderr().iter().filter(|l| l.contains("not a cordis plugin library") || l.contains("appeared")).count();
    let before = told(&dev);
    std::fs::File::options().append(true).open(&versioned).unwrap().set_modified(std::time::SystemTime::now()).unwrap();
    let same = std::fs::read(&versioned).unwrap();
    atomic_rename(&versioned, &same);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(told(&dev), before, "the same bytes were retried: {:?}", dev.stderr());
    // A good build over the one that failed to load is tried again.
    atomic_rename(&versioned, &build_bytes('A'));
    wait_for(&mut dev, "v");
    assert_eq!(dev.version(), "A");
    assert_eq!(dev.call("todo_write", r#"{"todos":[]}"#)["isError"], false);
    assert_eq!(not_running(&mut dev), []);
}

#[test]
fn builds_copied_over_the_library_in_quick_succession_never_crash_the_host() {
    // Each `cp` truncates the file and writes it again in place: a copy
    // taken while the next write had started mixed two builds, passed the
    // checks, and crashed `cordis dev` when loaded (found by a trial).
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.version(), "A");
    for _ in 0..15 {
        std::fs::copy(library("fixture-versioned-b"), &lib).unwrap();
        std::fs::copy(library("fixture-versioned-a"), &lib).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(dev.child.try_wait().unwrap().is_none(), "cordis dev died; stderr: {:?}", dev.stderr());
    assert_eq!(dev.version(), "A", "the last build written serves; stderr: {:?}", dev.stderr());
    // And a build after that still loads.
    atomic_rename(&lib, &build_bytes('B'));
    dev.wait_until("B never served", |dev| dev.version() == "B");
}

#[test]
fn a_deleted_build_folder_is_watched_again_when_it_comes_back() {
    // `cargo clean` or `rm -rf target` deletes the folder a library is
    // watched in; the next build makes it anew. The new folder must be
    // watched, or that build and every later one go unseen (found by a
    // trial: only a restart of cordis dev recovered).
    let scratch = Scratch::new();
    let out = scratch.path().join("target").join("debug");
    std::fs::create_dir_all(&out).unwrap();
    let lib = out.join("libversioned.so");
    std::fs::copy(library("fixture-versioned-a"), &lib).unwrap();
    scratch.composition("- id: v\n  name: ./target/debug/libversioned.so\n");
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.version(), "A");
    for (round, version) in [(1, 'B'), (2, 'A')] {
        std::fs::remove_dir_all(scratch.path().join("target")).unwrap();
        // The running build keeps serving while its folder is gone.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(dev.version(), if round == 1 { "A" } else { "B" });
        // The folders come back one at a time, the library written last.
        std::fs::create_dir(scratch.path().join("target")).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        std::fs::create_dir(&out).unwrap();
        std::fs::write(&lib, build_bytes(version)).unwrap();
        dev.wait_until(&format!("round {round}: build {version} never served"), |dev| dev.version() == version.to_string());
        assert_eq!(dev.reloads(), round);
    }
    // The same build landing again in a fresh folder is no reload.
    std::fs::remove_dir_all(scratch.path().join("target")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(&lib, build_bytes('A')).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!((dev.version(), dev.reloads()), ("A".to_string(), 2));
    // And an in-place build in the new folder is seen as any other.
    atomic_rename(&lib, &build_bytes('B'));
    dev.wait_until("build B after the folder came back never served", |dev| dev.version() == "B");
    assert!(dev.child.try_wait().unwrap().is_none(), "stderr: {:?}", dev.stderr());
}

#[test]
fn an_entry_that_is_not_running_is_in_status_and_its_problem_is_told_once() {
    let scratch = Scratch::new();
    setup(&scratch, true);
    let rows =
        |bad: &str, extra: &str| format!("- id: v\n  name: ./plugins/libversioned.so\n- id: bad\n  name: ./plugins/libtool_todo.so\n{bad}{extra}");
    scratch.composition("- id: v\n  name: ./plugins/libversioned.so\n");
    let mut dev = Dev::start(scratch.path(), &[]);
    scratch.composition(&rows("", ""));
    dev.expect_notice("allowParallelInProgress is required");
    let not_running = |dev: &mut Dev| dev.send("status")["notRunning"].clone();
    let down = not_running(&mut dev);
    assert_eq!(down[0]["id"], "bad", "{down}");
    assert!(down[0]["reason"].as_str().unwrap().contains("allowParallelInProgress is required"), "{down}");
    // An edit elsewhere in the file does not tell the same problem again.
    scratch.composition(&rows("", "- id: todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n"));
    dev.expect_notice("composition reloaded: added todo");
    let told = |dev: &Dev| dev.stderr().iter().filter(|l| l.starts_with("cordis dev:") && l.contains("entry bad")).cloned().collect::<Vec<_>>();
    assert_eq!(told(&dev).len(), 1, "{:?}", dev.stderr());
    // A new problem is told, saying the entry is not running.
    scratch.composition(&rows("  config:\n    allowParallelInProgress: 3\n", ""));
    let notice = dev.expect_notice("must be a boolean");
    assert!(notice.ends_with("(the entry is not running)"), "{notice}");
    dev.expect_notice("composition reloaded: removed todo");
    assert_eq!(told(&dev).len(), 2, "{:?}", dev.stderr());
    assert!(not_running(&mut dev)[0]["reason"].as_str().unwrap().contains("must be a boolean"));
    // Fixed: it runs, and is no longer listed.
    scratch.composition(&rows("  config:\n    allowParallelInProgress: false\n", ""));
    dev.wait_until("bad never ran", |dev| dev.running().iter().any(|r| r == "bad"));
    assert_eq!(not_running(&mut dev), json!([]));
    // A running entry's row broken, put back, then broken the same way
    // again: told both times, each saying the running version is kept.
    let broken = rows("  config:\n    allowParallelInProgress: maybe\n", "");
    let fixed = "- id: bad\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: false\n";
    let kept = |dev: &Dev| dev.stderr().iter().filter(|l| l.contains("got the string") && l.ends_with("(the running version is kept)")).count();
    scratch.composition(&broken);
    dev.wait_until("the broken row was not told", |dev| kept(dev) == 1);
    scratch.composition(fixed);
    dev.expect_notice("composition reloaded: removed v");
    scratch.composition(&broken);
    dev.wait_until("the row broken again was not told", |dev| kept(dev) == 2);
    assert!(dev.running().iter().any(|r| r == "bad"));
}

#[test]
fn a_config_change_and_a_schema_change_reload_in_either_order() {
    // Build B takes a `label` that build A refuses. A developer adds the
    // key to the composition and rebuilds: whichever lands first is
    // refused by the version running, and the second must bring both in.
    let labelled = "- id: v\n  name: ./plugins/libversioned.so\n  config:\n    label: x\n- id: todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n";
    let config = |dev: &mut Dev| dev.entry("v").unwrap()["config"].clone();

    // The composition first, then the build.
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    scratch.composition(labelled);
    assert!(dev.expect_notice("entry v:").contains("the running version is kept"));
    assert_eq!((dev.version(), config(&mut dev)), ("A".to_string(), json!({})));
    atomic_rename(&lib, &build_bytes('B'));
    dev.wait_until("build B never served", |dev| dev.version() == "B");
    assert_eq!(config(&mut dev), json!({"label": "x"}));
    assert_eq!(dev.send("status")["notRunning"], json!([]));

    // The build first (it refuses the row A runs with), then the composition.
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[("CORDIS_FIXTURE_NEEDS_LABEL", "B")]);
    atomic_rename(&lib, &build_bytes('B'));
    dev.expect_notice("build B needs a label");
    assert_eq!(dev.version(), "A");
    scratch.composition(labelled);
    dev.wait_until("build B never served", |dev| dev.version() == "B");
    assert_eq!(config(&mut dev), json!({"label": "x"}));
    assert_eq!(dev.reloads(), 1, "{:?}", dev.stderr());
    // Build A's verdict on the new row did not stand: it is not told.
    assert!(!dev.stderr().iter().any(|l| l.contains("is not an allowed key")), "{:?}", dev.stderr());
}

#[test]
fn a_build_written_slowly_in_chunks_is_loaded_once_without_a_notice_per_pause() {
    // Pauses longer than the debounce (150 ms) but shorter than the grace
    // a file cut short is given (1 s): each pause used to print a
    // "truncated, or still being written?" notice.
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    let bytes = build_bytes('B');
    let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&lib).unwrap();
    for chunk in bytes.chunks(bytes.len() / 4 + 1) {
        f.write_all(chunk).unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(400));
    }
    drop(f);
    dev.wait_until("build B never served", |dev| dev.version() == "B");
    let notices: Vec<String> = dev.stderr().into_iter().filter(|l| l.starts_with("cordis dev:") && !l.contains("watching")).collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("reloaded"), "{notices:?}");
    // A file left cut short is still told, once it has stopped changing.
    std::fs::write(&lib, &bytes[..bytes.len() / 2]).unwrap();
    assert!(dev.expect_notice("past the end").contains("the previous version keeps serving"));
    assert_eq!(dev.version(), "B");
}

#[test]
fn a_symlinked_library_follows_its_link_when_it_is_made_or_re_pointed() {
    // plugins/libversioned.so is a symlink into a build folder, as a
    // developer links a build where the composition looks.
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    let (debug, release) = (scratch.path().join("target/debug"), scratch.path().join("target/release"));
    for dir in [&plugins, &debug, &release] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(debug.join("libversioned.so"), build_bytes('A')).unwrap();
    std::fs::write(release.join("libversioned.so"), build_bytes('B')).unwrap();
    let link = plugins.join("libversioned.so");
    scratch.composition("- id: v\n  name: ./plugins/libversioned.so\n");
    // The link made after cordis dev started: the entry loads.
    let mut dev = Dev::start(scratch.path(), &[]);
    assert!(dev.running().is_empty());
    std::os::unix::fs::symlink("../target/debug/libversioned.so", &link).unwrap();
    dev.wait_until("v never loaded through the new link", |dev| dev.running() == ["v"]);
    assert_eq!(dev.version(), "A");
    // A build landing where the link points is a reload, as for any file.
    atomic_rename(&debug.join("libversioned.so"), &build_bytes('B'));
    dev.wait_until("the build behind the link never served", |dev| dev.version() == "B");
    atomic_rename(&debug.join("libversioned.so"), &build_bytes('A'));
    dev.wait_until("build A behind the link never served", |dev| dev.version() == "A");
    // The link re-pointed at the release build (replaced by a rename, as
    // `ln -sfn` does): the entry runs that file now.
    let tmp = plugins.join("libversioned.so.new");
    std::os::unix::fs::symlink("../target/release/libversioned.so", &tmp).unwrap();
    std::fs::rename(&tmp, &link).unwrap();
    dev.wait_until("the re-pointed link was not followed", |dev| dev.version() == "B");
    let status = dev.send("status");
    let library = status["entries"][0]["library"].as_str().unwrap().to_string();
    assert!(library.ends_with("target/release/libversioned.so"), "{status}");
    // And builds landing in the release folder now reach it.
    atomic_rename(&release.join("libversioned.so"), &build_bytes('A'));
    dev.wait_until("the release build never served", |dev| dev.version() == "A");
    assert!(dev.expect_notice("composition reloaded: changed v").contains("changed v"));
}

#[test]
fn links_that_point_nowhere_yet_removed_links_and_linked_folders_are_followed() {
    let scratch = Scratch::new();
    let root = scratch.path();
    let plugins = root.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::create_dir_all(root.join("dbg")).unwrap();
    std::fs::write(root.join("dbg/libversioned.so"), build_bytes('A')).unwrap();
    let link = plugins.join("libversioned.so");
    let repoint = |link: &Path, to: &str| {
        let tmp = link.with_extension("new");
        std::os::unix::fs::symlink(to, &tmp).unwrap();
        std::fs::rename(&tmp, link).unwrap();
    };
    // w, another plugin, is named through a linked folder `build`.
    for dir in ["dbg", "new"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::copy(library("tool-todo"), root.join(dir).join("libtool_todo.so")).unwrap();
    }
    scratch.composition(
        "- id: v\n  name: ./plugins/libversioned.so\n- id: w\n  name: ./build/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n",
    );
    let mut dev = Dev::start(root, &[]);
    let library_of = |dev: &mut Dev, id: &str| dev.entry(id).map(|e| e["library"].as_str().unwrap().to_string());
    // A link made before what it points to exists: the entry loads when
    // the file lands there.
    std::os::unix::fs::symlink("../new/libversioned.so", &link).unwrap();
    dev.expect_notice("which is not there yet");
    std::fs::create_dir_all(root.join("new")).unwrap();
    std::fs::write(root.join("new/libversioned.so"), build_bytes('B')).unwrap();
    dev.wait_until("v never loaded through the link", |dev| library_of(dev, "v").is_some_and(|l| l.ends_with("new/libversioned.so")));
    // A running link re-pointed where nothing is yet: the running version
    // is kept, and the entry moves when the file lands.
    repoint(&link, "../rel/libversioned.so");
    assert!(dev.expect_notice("rel/libversioned.so").contains("the running version is kept"), "{:?}", dev.stderr());
    std::fs::create_dir_all(root.join("rel")).unwrap();
    std::fs::write(root.join("rel/libversioned.so"), build_bytes('A')).unwrap();
    dev.wait_until("v never moved to rel", |dev| library_of(dev, "v").is_some_and(|l| l.ends_with("rel/libversioned.so")));
    // The link removed, then made again later, pointing elsewhere.
    std::fs::remove_file(&link).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert!(library_of(&mut dev, "v").is_some_and(|l| l.ends_with("rel/libversioned.so")));
    std::os::unix::fs::symlink("../dbg/libversioned.so", &link).unwrap();
    dev.wait_until("v never followed the link made again", |dev| library_of(dev, "v").is_some_and(|l| l.ends_with("dbg/libversioned.so")));
    // A linked folder re-pointed.
    std::os::unix::fs::symlink("dbg", root.join("build")).unwrap();
    dev.wait_until("w never loaded through the linked folder", |dev| library_of(dev, "w").is_some_and(|l| l.ends_with("dbg/libtool_todo.so")));
    repoint(&root.join("build"), "new");
    dev.wait_until("w never followed its re-pointed folder", |dev| library_of(dev, "w").is_some_and(|l| l.ends_with("new/libtool_todo.so")));
    assert!(dev.child.try_wait().unwrap().is_none());
}

#[test]
fn an_entry_renamed_to_a_library_not_built_yet_moves_when_it_lands() {
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.version(), "A");
    scratch.composition(
        "- id: v\n  name: ./plugins/libnext.so\n- id: todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n",
    );
    assert!(dev.expect_notice("libnext.so").contains("the running version is kept"));
    assert_eq!(dev.version(), "A");
    // status shows the change held back on the running entry.
    let v = dev.entry("v").unwrap();
    assert!(v["heldBack"].as_str().is_some_and(|w| w.contains("libnext.so")), "{v}");
    std::fs::write(lib.with_file_name("libnext.so"), build_bytes('B')).unwrap();
    dev.wait_until("v never moved to libnext.so", |dev| dev.version() == "B");
}

#[test]
fn an_entry_enabled_again_after_a_rebuild_runs_the_new_build() {
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.version(), "A");
    let todo = "- id: todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n";
    scratch.composition(&format!("- id: v\n  name: ./plugins/libversioned.so\n  disabled: true\n{todo}"));
    dev.expect_notice("composition reloaded: disabled v");
    std::fs::copy(library("fixture-versioned-b"), &lib).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // Enabled again with a key only build B takes: B starts with it.
    scratch.composition(&format!("- id: v\n  name: ./plugins/libversioned.so\n  config:\n    label: z\n{todo}"));
    dev.wait_until("v never ran again", |dev| dev.running().iter().any(|r| r == "v"));
    assert_eq!(dev.version(), "B", "{:?}", dev.stderr());
    dev.expect_notice("composition reloaded: enabled v");
    assert_eq!(dev.reloads(), 2);
}

#[test]
fn an_entry_whose_apply_fails_is_left_out_and_the_rest_of_the_edit_applies() {
    let scratch = Scratch::new();
    setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    // v2 runs the same plugin as v, whose event type v owns: its `apply`
    // fails. The same save changes todo's config.
    let edit = "- id: v\n  name: ./plugins/libversioned.so\n- id: todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: false\n- id: v2\n  name: ./plugins/libversioned.so\n";
    scratch.composition(edit);
    let notice = dev.expect_notice("entry v2");
    assert!(notice.contains("already owned") && notice.ends_with("(the entry is not running)"), "{notice}");
    dev.expect_notice("composition reloaded: changed todo");
    let status = dev.send("status");
    assert_eq!(status["notRunning"][0]["id"], "v2", "{status}");
    assert_eq!(dev.entry("todo").unwrap()["config"]["allowParallelInProgress"], false);
    // A later save that leaves v2 as it was does not tell it again.
    scratch.composition(&format!("{edit}# a comment\n"));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(dev.stderr().iter().filter(|l| l.contains("entry v2")).count(), 1, "{:?}", dev.stderr());
}

#[test]
fn a_provider_whose_apply_fails_in_an_edit_leaves_its_consumers_applied_once() {
    // The consumer's row and its provider's change in one edit, and the
    // provider's apply fails: the edit goes on without the provider, which
    // keeps its version; the consumer's new row is applied once, and
    // nothing is left waiting.
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(library("fixture-counter"), plugins.join("libfixture_counter.so")).unwrap();
    let composition = |tool: &str, fail: bool| {
        format!("- id: a-user\n  name: fixture-counter-user\n  config: {{tool: {tool}}}\n- id: counter\n  name: ./plugins/libfixture_counter.so\n  config: {{label: a, fail: {fail}}}\n")
    };
    scratch.composition(&composition("next", false));
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.call("next", "{}")["isError"], false);
    scratch.composition(&composition("next2", true));
    assert!(dev.expect_notice("told to fail").ends_with("(the running version is kept)"));
    dev.expect_notice("composition reloaded: changed a-user");
    std::thread::sleep(Duration::from_millis(300));
    let counter = dev.entry("counter").unwrap();
    assert_eq!(counter["config"]["fail"], false, "the provider keeps its version: {counter}");
    let tools = dev.send("tools");
    let names: Vec<String> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names.iter().filter(|n| n.starts_with("next")).collect::<Vec<_>>(), ["next2"], "{tools}");
    let reply = dev.call("next2", "{}");
    assert_eq!(reply["isError"], false, "{reply}");
    assert_eq!(dev.send("status")["waiting"], json!([]));
    assert!(!dev.stderr().iter().any(|l| l.contains("could not start again")), "{:?}", dev.stderr());
}

#[test]
fn entries_added_in_one_edit_start_in_the_files_order() {
    // Two new entries that cannot both run (one plugin, one event type):
    // the one written first runs, as at a fresh start, whatever the ids.
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(plugins.join("liba.so"), build_bytes('A')).unwrap();
    std::fs::write(plugins.join("libb.so"), build_bytes('B')).unwrap();
    std::fs::copy(library("tool-todo"), plugins.join("libtool_todo.so")).unwrap();
    let todo = "- id: todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n";
    scratch.composition(todo);
    let mut dev = Dev::start(scratch.path(), &[]);
    scratch.composition(&format!("{todo}- id: zz\n  name: ./plugins/liba.so\n- id: aa\n  name: ./plugins/libb.so\n"));
    dev.expect_notice("composition reloaded: added zz");
    assert_eq!(dev.version(), "A");
    let status = dev.send("status");
    assert_eq!(status["notRunning"][0]["id"], "aa", "{status}");
    // Told once, and no file is said to have appeared.
    std::thread::sleep(Duration::from_millis(500));
    let told: Vec<String> = dev.stderr().into_iter().filter(|l| l.contains("entry aa") || l.contains("appeared")).collect();
    assert_eq!(told.len(), 1, "{told:?}");
}

#[test]
fn a_build_refused_for_its_permissions_loads_once_they_are_fixed() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    let lib = setup(&scratch, true);
    let mut dev = Dev::start(scratch.path(), &[]);
    // `install -m 666`: a new build that every user may write.
    let tmp = lib.with_extension("new");
    std::fs::write(&tmp, build_bytes('B')).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::rename(&tmp, &lib).unwrap();
    dev.expect_notice("writable by every user");
    assert_eq!(dev.version(), "A");
    // chmod 644: no write, only the mode changes.
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
    dev.wait_until("build B never served after its mode was fixed", |dev| dev.version() == "B");
}

#[test]
fn a_link_to_a_link_pointing_nowhere_names_the_missing_end() {
    let scratch = Scratch::new();
    let root = scratch.path();
    std::fs::create_dir_all(root.join("plugins")).unwrap();
    std::fs::create_dir_all(root.join("builds")).unwrap();
    std::os::unix::fs::symlink("d.so", root.join("builds/cur.so")).unwrap();
    std::os::unix::fs::symlink("../builds/cur.so", root.join("plugins/libv.so")).unwrap();
    scratch.composition("- id: v\n  name: ./plugins/libv.so\n");
    let mut dev = Dev::start(root, &[]);
    let reason = dev.send("status")["notRunning"][0]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("builds/d.so, where no file is yet"), "{reason}");
    std::fs::write(root.join("builds/d.so"), build_bytes('A')).unwrap();
    dev.wait_until("v never loaded when the end of the chain landed", |dev| dev.running() == ["v"]);
}

#[test]
fn a_composition_that_stops_reading_is_told_once_and_again_when_it_reads() {
    let scratch = Scratch::new();
    setup(&scratch, true);
    let good = std::fs::read_to_string(scratch.path().join("cordis.yml")).unwrap();
    let mut dev = Dev::start(scratch.path(), &[]);
    let refusals = |dev: &Dev| dev.stderr().iter().filter(|l| l.contains("the composition was not reloaded")).count();
    scratch.composition("- id: v\n  name: [unclosed\n");
    dev.wait_until("the broken file was not told", |dev| refusals(dev) == 1);
    // Saved again, still broken the same way: not told again.
    scratch.composition("- id: v\n  name: [unclosed\n");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(refusals(&dev), 1, "{:?}", dev.stderr());
    // Fixed: said so, and the running entries are untouched.
    scratch.composition(&good);
    dev.expect_notice("reads again");
    assert_eq!(dev.version(), "A");
    assert_eq!(dev.reloads(), 0);
}

/// Writes `text` over `path` in place, as an editor that writes in place
/// does: truncated, the part before `cut` written and flushed, then after
/// `gap` the rest.
fn write_in_two_parts(path: &Path, text: &str, cut: &str, gap: Duration) {
    let at = text.find(cut).expect("the cut is in the text");
    let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(path).unwrap();
    f.write_all(&text.as_bytes()[..at]).unwrap();
    f.flush().unwrap();
    std::thread::sleep(gap);
    f.write_all(&text.as_bytes()[at..]).unwrap();
}

/// Issue 27, kind 1: `cordis.yml` saved in two parts whose first part still
/// parses (and leaves an entry out) is applied once, with its final
/// content, when the gap is shorter than the settle time: the default
/// (500 ms) against a 200 ms gap, and `--settle-ms` against a longer one.
#[test]
fn a_half_saved_composition_is_applied_once_it_settles() {
    for (args, gap) in [(&[][..], 200), (&["--settle-ms", "1500"][..], 900)] {
        let scratch = Scratch::new();
        setup(&scratch, true);
        let path = scratch.path().join("cordis.yml");
        let mut dev = Dev::start_with(scratch.path(), &[], args);
        let todo = dev.fiber("todo");
        let final_text = std::fs::read_to_string(&path).unwrap().replace("allowParallelInProgress: true", "allowParallelInProgress: false");
        write_in_two_parts(&path, &final_text, "- id: todo", Duration::from_millis(gap));
        dev.expect_reloads(1);
        assert_ne!(dev.fiber("todo"), todo, "{args:?}: the final content applied");
        assert_eq!(dev.entry("todo").unwrap()["config"]["allowParallelInProgress"], false);
        let notices: Vec<String> = dev.stderr().into_iter().filter(|l| l.contains("composition reloaded")).collect();
        assert_eq!(notices, ["cordis dev: composition reloaded: changed todo"], "{args:?}: {:?}", dev.stderr());
    }
}

/// Issue 27, kind 2: a provider and its consumer changed in one save. The
/// consumer's `!!js ctx.counter.label` is evaluated against the new
/// provider whichever row comes first in the file; each plugin is applied
/// once; no "waiting for service" is told for the host's own restart.
#[test]
fn a_provider_and_its_consumer_changed_together_settle_in_one_order() {
    let consumer = |tool: &str| format!("- id: user\n  name: fixture-counter-user\n  config:\n    tool: {tool}\n    seen: !!js ctx.counter.label\n");
    let provider = |label: &str| format!("- id: counter\n  name: fixture-counter\n  config: {{label: {label}}}\n");
    for provider_first in [true, false] {
        let text = |tool: &str, label: &str| {
            if provider_first {
                provider(label) + &consumer(tool)
            } else {
                consumer(tool) + &provider(label)
            }
        };
        let scratch = Scratch::new();
        scratch.composition(&text("next", "a"));
        let mut dev = Dev::start(scratch.path(), &[]);
        let seen = |dev: &mut Dev, tool: &str| -> Value {
            let reply = dev.call(tool, r#"{"seen": true}"#);
            serde_json::from_str::<Value>(reply["text"].as_str().unwrap_or("null")).unwrap_or(Value::Null)["seen"].clone()
        };
        assert_eq!(seen(&mut dev, "next"), "a");
        let fibers = (dev.fiber("user"), dev.fiber("counter"));
        for (round, (tool, label)) in [("again", "b"), ("next", "c")].into_iter().enumerate() {
            scratch.composition(&text(tool, label));
            dev.expect_reloads(round as u64 + 1);
            assert_eq!(seen(&mut dev, tool), label, "provider first: {provider_first}; stderr: {:?}", dev.stderr());
        }
        // Two changes, one apply per plugin each: four fibers after the two
        // of the start.
        let now = (dev.fiber("user"), dev.fiber("counter"));
        let newest = now.0.max(now.1);
        assert_eq!(newest, fibers.0.max(fibers.1) + 4, "provider first: {provider_first}: {fibers:?} then {now:?}; {:?}", dev.stderr());
        assert!(!dev.stderr().iter().any(|l| l.contains("waiting for service")), "{:?}", dev.stderr());
    }
}

/// Issue 27, kind 5: `cordis dev` refuses to start when an entry failed,
/// naming it, with exit 1.
#[test]
fn dev_refuses_to_start_with_a_failed_entry() {
    let scratch = Scratch::new();
    setup(&scratch, true);
    scratch.composition("- id: v\n  name: ./plugins/libversioned.so\n- id: todo\n  name: ./plugins/libtool_todo.so\n");
    let out = scratch.cordis(&["dev"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("cordis.yml:3: entry todo: $.allowParallelInProgress is required"), "{stderr}");
    assert!(stderr.contains("1 of 2 entries is not running: 1 failed; failed: todo; a failed entry refuses the start"), "{stderr}");
    assert!(!stdout.contains("ready"), "{stdout}");
}

/// A user patch layer written after `cordis dev` started is applied, and
/// its deletion is undone (no layer is a valid composition); an include
/// whose file is written after the row naming it is picked up when the
/// file lands.
#[test]
fn a_user_layer_and_an_included_file_written_later_are_picked_up() {
    let scratch = Scratch::new();
    setup(&scratch, true);
    let config = scratch.path().join(".config");
    let mut dev = Dev::start(scratch.path(), &[("XDG_CONFIG_HOME", config.to_str().unwrap())]);
    assert_eq!(dev.running(), ["todo", "v"]);
    let layer = config.join("cordis/cordis.patch.yml");
    std::fs::create_dir_all(layer.parent().unwrap()).unwrap();
    std::fs::write(&layer, "- id: todo\n  disabled: true\n").unwrap();
    dev.expect_notice("composition reloaded: disabled todo");
    assert_eq!(dev.running(), ["v"]);
    std::fs::remove_file(&layer).unwrap();
    dev.expect_notice("composition reloaded: enabled todo");
    assert!(!dev.stderr().iter().any(|l| l.contains("cannot read the patch layer")), "{:?}", dev.stderr());

    let path = scratch.path().join("cordis.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}- id: inc\n  name: cordis:include\n  config:\n    path: ./more.yml\n")).unwrap();
    dev.expect_notice("more.yml does not exist");
    std::fs::write(scratch.path().join("more.yml"), "- id: n\n  name: todo-nudge\n  config:\n    maxNudges: 1\n").unwrap();
    dev.expect_notice("composition reloaded: added inc/n");
    assert!(dev.running().iter().any(|r| r == "inc/n"), "{:?}", dev.stderr());
}
