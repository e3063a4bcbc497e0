//! Lines every store reads the way the harness's published backend reads
//! them:
//!
//! - a lone UTF-16 surrogate escape (`"half \ud83e here"`, half of a pair a
//!   writer cut apart) is read as U+FFFD, the message it is in stays in the
//!   transcript, and `session show` names the line;
//! - a negative event `time` and a packed chunk row with a negative `dt`
//!   (the clock stepped back) are read with the backend's times, in a root
//!   the backend itself wrote.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use cordis_session::json::replace_lone_surrogates;
use cordis_tests::{text, Scratch, StoreBackend};
use serde_json::{json, Value};

const COMPOSITION: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n";

/// One event line; surface types get `surfaceOp: "append"`.
fn event(seq: u64, time: i64, kind: &str, data: Value) -> String {
    let mut e = json!({"type": kind, "seq": seq, "time": time, "data": data});
    if matches!(kind, "user/message" | "assistant/message") {
        e["surfaceOp"] = json!("append");
    }
    e.to_string()
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "id": "u1"})
}

fn assistant(text: &str) -> Value {
    json!({"turn": 1, "step": 1, "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
        "source": {"kind": "model", "provider": "p", "model": "m"}, "id": "a1"}})
}

/// `serde_json` writes the escape of a lone half only from a placeholder:
/// a Rust string cannot hold one.
const HALF: &str = "LONE-HALF";

#[test]
fn a_lone_surrogate_is_shown_as_the_replacement_character_with_its_line() {
    let scratch = Scratch::new();
    scratch.composition(COMPOSITION);
    let lines = [
        json!({"type": "session", "version": 0, "id": "half", "createdAt": 1, "delegationDepth": 0}).to_string(),
        event(0, 1, "turn/start", json!({"turn": 1})),
        event(1, 1, "user/message", user(&format!("half {HALF} here"))).replace(HALF, "\\ud83e"),
        event(2, 1, "step/start", json!({"turn": 1, "step": 1})),
        event(3, 1, "assistant/message", assistant(&format!("pair {HALF}"))).replace(HALF, "\\ud83e\\udd14"),
        event(4, 1, "step/end", json!({"turn": 1, "step": 1})),
        event(5, 1, "turn/end", json!({"turn": 1, "reason": {"kind": "completed"}})),
    ];
    let sessions = scratch.path().join(".cordis/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let file = sessions.join("half.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let before = std::fs::read(&file).unwrap();

    let show = scratch.cordis(&["session", "show", "half"]);
    let (shown, err) = text(&show);
    assert!(show.status.success(), "{shown}{err}");
    assert!(shown.contains("6 events"), "{shown}");
    assert!(shown.contains("transcript (2 messages)"), "{shown}");
    assert!(shown.contains("user      › half \u{FFFD} here"), "{shown}");
    // A valid pair is the character it encodes.
    assert!(shown.contains("assistant › pair \u{1F914}"), "{shown}");
    assert!(shown.contains("problem: line 3: a lone UTF-16 surrogate escape (first `\\ud83e`"), "{shown}");
    assert!(shown.contains("read as U+FFFD"), "{shown}");
    assert_eq!(shown.matches("problem:").count(), 1, "{shown}");
    assert_eq!(std::fs::read(&file).unwrap(), before, "reading never rewrites the log");

    // The note is not a break: --strict continues the session.
    std::fs::write(scratch.path().join("s.yml"), "steps:\n  - text: fine\n").unwrap();
    let run = scratch.cordis(&["--strict", "run", "--session", "half", "--script", "s.yml", "next"]);
    let (out, err) = text(&run);
    assert!(run.status.success(), "{out}{err}");
    assert!(err.contains("line 3: a lone UTF-16 surrogate escape"), "{err}");
}

/// Lines of JSON, read after the lone surrogate escapes in them are
/// replaced, so that the backend's output (which keeps them, as
/// JavaScript strings can) compares with ours.
fn values(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let l = replace_lone_surrogates(l).map_or_else(|| l.to_string(), |r| r.text);
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .collect()
}

fn reference_read(root: &Path, id: &str, compression: &str) -> Vec<Value> {
    let out = StoreBackend::get().run(&["read", "--inspect", "--root", &root.display().to_string(), "--id", id, "--compression", compression]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the reference refused {id} in {}: {stdout}{stderr}", root.display());
    values(&stdout)
}

fn reference_write(root: &Path, log: &str, compression: &str) {
    let mut write = StoreBackend::get()
        .command(&["write", "--root", &root.display().to_string(), "--compression", compression])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    write.stdin.take().unwrap().write_all(log.as_bytes()).unwrap();
    let out = write.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the reference could not write the log: {stdout}{stderr}");
}

#[test]
fn negative_times_and_gaps_read_as_the_reference_reads_them() {
    let lines = [
        json!({"type": "session", "version": 0, "id": "clock-steps", "createdAt": 1_700_000_000_000_u64, "cwd": "{{cwd}}", "delegationDepth": 0})
            .to_string(),
        event(0, 1_700_000_000_000, "turn/start", json!({"turn": 1})),
        // The clock stepped back before the epoch.
        event(1, -960_585_284, "user/message", user(&format!("half {HALF} here"))).replace(HALF, "\\ud83e"),
        event(2, -960_585_000, "step/start", json!({"turn": 1, "step": 1})),
        // A run of chunks whose clock stepped back between the first two.
        json!({"type": "text-chunks", "seq0": 3, "time0": 1_700_000_000_100_i64,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [-2_378_304_174_i64, 28], "texts": ["a", "b", "c"]}})
        .to_string(),
        json!({"type": "reasoning-chunks", "seq0": 6, "time0": -5,
            "data": {"turn": 1, "step": 1, "index": 1, "dt": [-1, 0], "texts": ["x", "y", "z"]}})
        .to_string(),
        event(9, 1_700_000_000_200, "assistant/message", assistant("abc")),
        event(10, 1_700_000_000_200, "step/end", json!({"turn": 1, "step": 1})),
        event(11, -1, "turn/end", json!({"turn": 1, "reason": {"kind": "completed"}})),
    ];
    let log = lines.join("\n") + "\n";
    for compression in ["zstd", "none"] {
        let scratch = Scratch::new();
        let root = scratch.path().join("root");
        reference_write(&root, &log, compression);
        let theirs = reference_read(&root, "clock-steps", compression);
        assert_eq!(theirs.len(), 13, "{compression}: {theirs:?}");
        let times: Vec<i64> = theirs[1..].iter().map(|e| e["time"].as_i64().unwrap()).collect();
        assert_eq!(
            times,
            [
                1_700_000_000_000,
                -960_585_284,
                -960_585_000,
                1_700_000_000_100,
                1_697_621_695_926,
                1_697_621_695_954,
                -5,
                -6,
                -6,
                1_700_000_000_200,
                1_700_000_000_200,
                -1
            ],
            "{compression}"
        );

        let root_arg = root.display().to_string();
        let out = scratch.cordis(&["session", "export", "--root", &root_arg, "clock-steps"]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{compression}: cordis refused the log: {stderr}");
        assert_eq!(values(&stdout), theirs, "{compression}: the same events, with the same times");

        let show = scratch.cordis(&["session", "show", "--root", &root_arg, "clock-steps"]);
        let (shown, stderr) = text(&show);
        assert!(show.status.success(), "{compression}: {shown}{stderr}");
        assert!(shown.contains("12 events"), "{compression}: {shown}");
        assert!(shown.contains("user      › half \u{FFFD} here"), "{compression}: {shown}");
        assert!(shown.contains("problem: line 3: a lone UTF-16 surrogate escape"), "{compression}: {shown}");
    }
}
