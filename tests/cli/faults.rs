//! Faults injected on purpose: misbehaving libraries, insecure library
//! permissions, hostile compositions and corrupt session logs. Each must give
//! a clear error naming where it came from, and lose nothing already
//! accepted.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use cordis_engine::loader::EntryState;
use cordis_engine::tools::ToolCall;
use cordis_session::Appender;
use cordis_tests::{library, text, Scratch};
use serde_json::{json, Value};

const TODO: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n";

fn failure(state: &EntryState) -> String {
    match state {
        EntryState::Failed(m) => m.join("\n"),
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// Byte offset where the last loadable segment of an ELF file ends.
fn end_of_last_load_segment(bytes: &[u8]) -> usize {
    let phoff = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
    let phentsize = u16::from_le_bytes([bytes[54], bytes[55]]) as usize;
    let phnum = u16::from_le_bytes([bytes[56], bytes[57]]) as usize;
    (0..phnum)
        .map(|i| &bytes[phoff + i * phentsize..])
        .filter(|e| u32::from_le_bytes(e[0..4].try_into().unwrap()) == 1)
        .map(|e| (u64::from_le_bytes(e[8..16].try_into().unwrap()) + u64::from_le_bytes(e[32..40].try_into().unwrap())) as usize)
        .max()
        .unwrap()
}

#[test]
fn misbehaving_libraries_fail_their_entry_with_distinct_errors() {
    let scratch = Scratch::new();
    let dir = scratch.path().join("libs");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy("/lib/x86_64-linux-gnu/libm.so.6", dir.join("libmath.so")).unwrap();
    let todo = std::fs::read(library("tool-todo")).unwrap();
    // Cut inside the last loadable segment: mapping this file and touching
    // the missing pages would kill the process with SIGBUS.
    std::fs::write(dir.join("libcut.so"), &todo[..end_of_last_load_segment(&todo) - 4096]).unwrap();
    // The same, with the section table pointer cleared, so only the
    // program-header check stands between the file and dlopen.
    let mut cut = todo[..end_of_last_load_segment(&todo) - 4096].to_vec();
    cut[40..48].copy_from_slice(&0u64.to_le_bytes());
    std::fs::write(dir.join("libcut2.so"), &cut).unwrap();

    let host = scratch.boot(
        &format!(
            "{TODO}\
- id: not-plugin\n  name: fixture-not-plugin\n\
- id: unrelated\n  name: ./libs/libmath.so\n\
- id: truncated\n  name: ./libs/libcut.so\n\
- id: truncated-headers\n  name: ./libs/libcut2.so\n\
- id: old-abi\n  name: fixture-old-abi\n\
- id: panics-apply\n  name: fixture-faulty/panics-apply\n\
- id: panics-config\n  name: fixture-faulty/panics-config\n  config:\n    boom: true\n\
- id: panics-execute\n  name: fixture-faulty/panics-execute\n"
        ),
        true,
    );
    let by_id = |id: &str| host.reports.iter().find(|r| r.id == id).unwrap();
    assert_eq!(by_id("todo").state, EntryState::Loaded, "the good entry still loads");
    let expect = [
        ("not-plugin", "libfixture_not_plugin.so is a shared library but not a cordis plugin library"),
        ("unrelated", "libmath.so is a shared library but not a cordis plugin library"),
        ("truncated", "libcut.so is not a loadable shared library"),
        ("truncated-headers", "libcut2.so is not a loadable shared library: loadable segment"),
        ("old-abi", "libfixture_old_abi.so was built against an incompatible plugin ABI"),
        ("panics-apply", "plugin panics-apply panicked in apply: fixture panic in apply"),
        ("panics-config", "plugin panics-config panicked in apply: fixture panic while reading config"),
    ];
    let mut seen = Vec::new();
    for (id, text) in expect {
        let f = failure(&by_id(id).state);
        assert!(f.contains(text), "{id}: {f}");
        assert!(f.contains(&format!("entry {id}:")), "{id}: {f}");
        assert!(f.lines().count() == 1 && f.len() < 400, "{id}: one short line, not a layout report: {f}");
        assert!(!seen.contains(&f), "{id}: errors must be distinct");
        seen.push(f);
    }
    // A panic in execute is an error result; the host keeps serving.
    let session = host.services.sessions.create(None).unwrap();
    session.append_value("turn/start", &json!({"turn": 1}), Appender::Host).unwrap();
    let r = host.services.tools.execute(&ToolCall { id: "1", name: "panicking_tool", arguments: r#"{"text":"x"}"# }, Some(&session));
    assert!(r.is_error && r.text.contains("plugin panics-execute panicked in panicking_tool.execute"), "{}", r.text);
    let ok = host
        .services
        .tools
        .execute(&ToolCall { id: "2", name: "todo_write", arguments: r#"{"todos":[{"content":"still here","status":"pending"}]}"# }, Some(&session));
    assert!(!ok.is_error, "{}", ok.text);
}

#[test]
fn world_writable_libraries_are_refused_unless_allowed() {
    let scratch = Scratch::new();
    let open_dir = scratch.path().join("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::copy(library("tool-todo"), open_dir.join("libtool_todo.so")).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let safe_dir = scratch.path().join("safe");
    std::fs::create_dir(&safe_dir).unwrap();
    let writable = safe_dir.join("libtool_todo.so");
    std::fs::copy(library("tool-todo"), &writable).unwrap();
    std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o666)).unwrap();

    let entry = |path: &str| format!("- id: todo\n  name: {path}\n  config:\n    allowParallelInProgress: true\n");
    scratch.composition(&entry("./open/libtool_todo.so"));
    let out = scratch.cordis(&["check"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("its folder") && stdout.contains("is writable by every user"), "{stdout}");
    assert!(stdout.contains("--allow-writable-plugins"), "{stdout}");

    scratch.composition(&entry("./safe/libtool_todo.so"));
    let (stdout, _) = text(&scratch.cordis(&["check"]));
    assert!(stdout.contains("the file is writable by every user"), "{stdout}");

    let allowed = scratch.cordis(&["--allow-writable-plugins", "check"]);
    assert!(allowed.status.success(), "{:?}", text(&allowed));
}

/// Runs `cordis check` on `composition`; returns (exit code, stderr, time).
fn check(scratch: &Scratch, composition: &[u8]) -> (Option<i32>, String, Duration) {
    std::fs::write(scratch.path().join("cordis.yml"), composition).unwrap();
    let start = Instant::now();
    let out = scratch.cordis(&["check"]);
    let elapsed = start.elapsed();
    let (stdout, stderr) = text(&out);
    (out.status.code(), format!("{stdout}{stderr}"), elapsed)
}

#[test]
fn hostile_compositions_get_bounded_clear_errors() {
    let scratch = Scratch::new();
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n";
    let bomb_list = format!("- id: x\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n    {}", bomb.replace('\n', "\n    "));
    let deep = format!("- name: x\n  config: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    let huge = {
        let mut t = String::from(TODO);
        t.push_str(&"# padding padding padding padding padding padding padding padding\n".repeat(800_000));
        t
    };
    let cases: Vec<(&str, Vec<u8>, i32, &str)> = vec![
        ("alias bomb", bomb_list.into_bytes(), 2, "alias"),
        ("deep nesting", deep.into_bytes(), 2, "cordis.yml:2:"),
        ("50 MB", huge.into_bytes(), 2, "over the limit of"),
        ("tabs", b"- name: a\n\tconfig: {}\n".to_vec(), 2, "cordis.yml:2:"),
        ("duplicate key", b"- name: a\n  name: b\n".to_vec(), 2, "cordis.yml:2:3: duplicate key `name`"),
        ("empty", Vec::new(), 2, "the composition is empty"),
        ("mapping", b"tool-todo:\n  allowParallelInProgress: true\n".to_vec(), 2, "cordis.yml:1:1: expected a list of entries"),
        ("yes", b"- id: t\n  name: tool-todo\n  config:\n    allowParallelInProgress: yes\n".to_vec(), 1, "cordis.yml:4: entry t: $.allowParallelInProgress must be a boolean, got the string \"yes\""),
        ("on", b"- id: t\n  name: tool-todo\n  config:\n    allowParallelInProgress: on\n".to_vec(), 1, "YAML 1.1 spellings"),
        ("quoted false", b"- id: t\n  name: tool-todo\n  config:\n    allowParallelInProgress: \"false\"\n".to_vec(), 1, "(quotes or a `!!str` tag make it a string: write true or false bare)"),
        ("!!str true", b"- id: t\n  name: tool-todo\n  config:\n    allowParallelInProgress: !!str true\n".to_vec(), 1, "cordis.yml:4: entry t: $.allowParallelInProgress must be a boolean, got the string \"true\" (quotes or a `!!str` tag make it a string: write true or false bare)"),
        ("merge key in an entry", b"- &base\n  id: a\n  name: tool-todo\n  config: {allowParallelInProgress: true}\n- <<: *base\n  id: b\n".to_vec(), 1, "cordis.yml:5: entry b: `<<` is a YAML 1.1 merge key, and YAML 1.2 (how compositions are read) has no merge keys"),
        ("merge key in a config", b"- id: a\n  name: tool-todo\n  config: &c {allowParallelInProgress: true}\n- id: b\n  name: tool-todo\n  config:\n    <<: *c\n".to_vec(), 1, "cordis.yml:7: entry b: `<<` is a YAML 1.1 merge key"),
        ("not UTF-8", b"- id: t\n  name: caf\xe9\n".to_vec(), 2, "cordis.yml:2:12: the composition is not UTF-8"),
    ];
    for (what, bytes, code, expected) in cases {
        let (got, output, elapsed) = check(&scratch, &bytes);
        assert_eq!(got, Some(code), "{what}: {output}");
        assert!(output.contains(expected), "{what}: expected {expected:?} in {output}");
        assert!(elapsed < Duration::from_secs(10), "{what}: took {elapsed:?}");
    }
    // A byte-order mark is accepted.
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend_from_slice(TODO.as_bytes());
    let (got, output, _) = check(&scratch, &bom);
    assert_eq!(got, Some(0), "{output}");
}

/// A session file with every kind of damage a log meets.
fn damaged_log() -> String {
    let line = |v: Value| format!("{}\n", v);
    let write = |seq: u64, items: Value| line(json!({"seq": seq, "time": 1, "type": "todo/write", "data": {"todos": items}}));
    let mut s = String::new();
    s += &line(json!({"type": "session", "version": 0, "id": "damaged", "createdAt": 1}));
    s += &line(json!({"seq": 0, "time": 1, "type": "turn/start", "data": {"turn": 1}}));
    s += &write(1, json!([{"content": "first", "status": "pending"}]));
    s += "\0\0\0\0\0\0\0\0\n";
    s += "{\"seq\":2,\"time\":1,\"type\":\"x/y\",\"data\":{}}{\"seq\":3,\"time\":1,\"type\":\"x/y\",\"data\":{}}\n";
    s += "{\"seq\":2,\"time\":1,\"type\":\"user/message\",\"data\":{\"content\":[{\"type\":\"text\",\"text\":\"line\\u2028sep \u{2028} nel \u{85} cr \\r end\"}],\"role\":\"user\"},\"surfaceOp\":\"append\"}\r\n";
    s += &line(json!({"seq": 3, "time": 1, "type": "made/up", "data": {"kept": true}}));
    s += &line(json!({"seq": 4, "time": 1, "type": "todo/write", "data": {"todos": [{"content": " untrimmed ", "status": "pending"}]}}));
    s += &write(5, json!([{"content": "last", "status": "in_progress"}, {"content": "whole list", "status": "completed"}]));
    s += &line(json!({"seq": 6, "time": 1, "type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}));
    s
}

#[test]
fn corrupt_logs_keep_every_good_line_and_report_each_bad_one() {
    let scratch = Scratch::new();
    let host = scratch.boot(TODO, false);
    let dir = scratch.path().join(".cordis/sessions");
    let path = dir.join("damaged.jsonl");
    let original = damaged_log();
    std::fs::write(&path, &original).unwrap();

    let (session, problems) = host.services.sessions.open("damaged").unwrap();
    let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
    assert_eq!(lines, vec![4, 5, 6, 6, 8], "{problems:?}");
    assert!(problems[0].message.contains("NUL"));
    assert_eq!(problems[1].message, "2 records on one line (a missing newline); each is read and kept");
    assert_eq!(problems[2].message, "seq 2 follows 3: a duplicate or out-of-order seq (kept)");
    assert!(problems[3].message.contains("CRLF"), "{}", problems[3].message);
    assert!(problems[4].message.contains("rejected by plugin tool-todo"), "{}", problems[4].message);
    // Every good event is kept, both glued records and the unknown types
    // included.
    let kinds: Vec<String> = session.events().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["turn/start", "todo/write", "x/y", "x/y", "user/message", "made/up", "todo/write", "todo/write", "turn/end"]);
    // The later whole list wins; the rejected write is not folded.
    let plan: Value = serde_json::from_str(&session.state("todos").unwrap()).unwrap();
    assert_eq!(plan, json!([{"content": "last", "status": "in_progress"}, {"content": "whole list", "status": "completed"}]));
    // Content round-trips exactly, separators and control escapes included.
    let user = session.events().into_iter().find(|e| e.kind == "user/message").unwrap();
    assert!(user.data.get().contains("line\\u2028sep \u{2028} nel \u{85} cr \\r end"), "{}", user.data.get());
    drop(session);
    // Opening for append rewrote nothing.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);

    // The next append lands on a line of its own after the damage.
    let (session, _) = host.services.sessions.open("damaged").unwrap();
    session.append_value("turn/start", &json!({"turn": 2}), Appender::Host).unwrap();
    drop(session);
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.starts_with(&original));
    let last: Value = serde_json::from_str(after.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "turn/start");
    assert_eq!(last["seq"], 7);
}

#[test]
fn session_ids_cannot_escape_the_state_directory() {
    let scratch = Scratch::new();
    scratch.composition(TODO);
    for bad in ["../outside", "/etc/passwd", "a/b", ".hidden"] {
        let out = scratch.cordis(&["run", "--session", bad, "--script", "x.yml", "p"]);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(stderr.contains("invalid session id") || stderr.contains("cannot read script"), "{bad}: {stderr}");
    }
    std::fs::write(scratch.path().join("s.yml"), "steps:\n  - text: hi\n").unwrap();
    for bad in ["../outside", "/etc/passwd", "a/b", ".hidden"] {
        let out = scratch.cordis(&["run", "--session", bad, "--script", "s.yml", "p"]);
        let (_, stderr) = text(&out);
        assert!(stderr.contains("invalid session id"), "{bad}: {stderr}");
    }
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let run = scratch.cordis(&["run", "--script", "s.yml", "hello"]);
    assert!(run.status.success());
    assert_eq!(mode(&scratch.path().join(".cordis")), 0o700);
    assert_eq!(mode(&scratch.path().join(".cordis/sessions")), 0o700);
    for f in std::fs::read_dir(scratch.path().join(".cordis/sessions")).unwrap() {
        assert_eq!(mode(&f.unwrap().path()), 0o600);
    }
}

/// Deeply nested flow collections are refused from a linear pre-scan,
/// before the YAML parser (whose work on such input grows with the square
/// of its size: 40 000 nested `{a: ` took 6 s to refuse, 20 000 nested
/// `[a, ` 1.7 s, before this check).
#[test]
fn deep_flow_nesting_is_refused_at_once_whatever_the_size() {
    let scratch = Scratch::new();
    for (what, open, close, n) in [("mappings", "{a: ", "}", 40_000), ("lists", "[a, ", "]", 20_000), ("mappings, 4 MB", "{a: ", "}", 800_000)] {
        let text = format!("- name: x\n  config: {}1{}\n", open.repeat(n), close.repeat(n));
        let (code, output, elapsed) = check(&scratch, text.as_bytes());
        assert_eq!(code, Some(2), "{what}: {output}");
        assert!(output.contains("cordis.yml:2:") && output.contains("nested more than 64 levels deep"), "{what}: {output}");
        // Generous for a loaded CI machine; it takes milliseconds.
        assert!(elapsed < Duration::from_secs(2), "{what}: took {elapsed:?}");
    }
}

/// A composition, included file or patch layer that is not a regular file
/// (here `/dev/zero` behind a `.yml` name) is read only up to the size
/// limit, never without bound.
#[test]
fn endless_files_stop_at_the_size_limit() {
    let scratch = Scratch::new();
    std::os::unix::fs::symlink("/dev/zero", scratch.path().join("z.yml")).unwrap();
    std::fs::write(scratch.path().join("ok.yml"), "[]\n").unwrap();
    std::fs::write(scratch.path().join("inc.yml"), "- id: x\n  name: cordis:include\n  config: {path: ./z.yml}\n").unwrap();
    for args in [vec!["check", "z.yml"], vec!["check", "ok.yml", "--patch", "z.yml"]] {
        let start = Instant::now();
        let out = scratch.cordis(&args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains("z.yml") && stderr.contains("over the limit of 4194304 bytes"), "{args:?}: {stderr}");
        assert!(start.elapsed() < Duration::from_secs(10), "{args:?}");
    }
    let out = scratch.cordis(&["check", "inc.yml"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("over the limit of 4194304 bytes"), "{stdout}");
}
