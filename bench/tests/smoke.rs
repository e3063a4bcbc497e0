//! The benchmark's smoke mode: every figure runs once on tiny inputs, so a
//! change that breaks the benchmark fails here. It times nothing against a
//! limit and finishes in a few seconds (it needs `cargo build --workspace`
//! first, like the workspace tests: it drives the built `cordis` binary and
//! plugin libraries).

use std::process::Command;

#[test]
fn every_figure_still_runs() {
    let out = Command::new(env!("CARGO_BIN_EXE_cordis-bench")).arg("--smoke").output().expect("run cordis-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cordis-bench --smoke failed:\n{stdout}\n{stderr}");
    let rows = [
        ("| boot |", true),
        ("| boot vs reference |", false),
        ("| tool call (5 items) |", true),
        ("| tool call vs reference |", false),
        ("| durable append |", true),
        ("| replay (3001 events) |", true),
        ("| resume (3001 events) |", true),
        ("| reload |", true),
        ("| memory (peak RSS) |", true),
        ("| compaction, a session of 3001 events |", true),
        ("| token estimate, english |", true),
        ("| token estimate, code |", true),
        ("| token estimate, chinese session |", true),
        ("| token estimate, chinese prose |", true),
        ("| a real tokenizer's start-up |", false),
        ("| summary requests per compaction |", true),
        ("| summary requests, a summarizer that never summarizes |", true),
    ];
    for (figure, measured) in rows {
        let Some(line) = stdout.lines().find(|l| l.starts_with(figure)) else {
            panic!("no row {figure} in:\n{stdout}");
        };
        // The smoke run skips the oracle; every other row must carry numbers.
        assert!(!measured || !line.contains('—'), "row {figure} has no value:\n{line}");
    }
}
