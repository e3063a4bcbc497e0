//! `todo-nudge` with `tool-todo`, through the real binary and the real
//! compiled libraries: the example composition and script in which the model
//! stops early, is reminded once, finishes its plan, and ends the turn.

use cordis_tests::{repo_root, text, Scratch};
use serde_json::Value;

fn events(scratch: &Scratch, session: &str) -> Vec<Value> {
    let out = scratch.cordis(&["--state-dir", scratch.path().join("state").to_str().unwrap(), "session", "export", session]);
    assert!(out.status.success(), "{}", text(&out).1);
    text(&out).0.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn the_model_is_nudged_once_then_finishes_its_plan() {
    let scratch = Scratch::new();
    let composition = repo_root().join("examples/compositions/nudge.cordis.yml");
    let script = repo_root().join("examples/nudge.script.yml");
    let state = scratch.path().join("state");
    let out =
        scratch.cordis(&["-c", composition.to_str().unwrap(), "--state-dir", state.to_str().unwrap(), "run", "--script", script.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("4 steps"), "{stdout}");
    let session = stdout
        .lines()
        .find_map(|l| l.strip_prefix("session ").and_then(|r| r.split_whitespace().next()))
        .unwrap_or_else(|| panic!("no session line in:\n{stdout}"))
        .to_string();

    let log = events(&scratch, &session);
    let kinds: Vec<&str> = log.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let nudges: Vec<&Value> = log.iter().filter(|e| e["type"] == "todo/nudge").collect();
    assert_eq!(nudges.len(), 1, "{kinds:?}");
    let nudge = nudges[0];
    assert_eq!(nudge["surfaceOp"], "append", "a surface event: the model reads it");
    assert_eq!(nudge["data"]["open"], serde_json::json!(["[in_progress] rename the config loader", "[pending] update the callers"]));
    assert_eq!(nudge["data"]["nudge"], 1);
    // The reminder comes after the model's early stop (step 2 ended) and
    // before the step that finishes the plan.
    let at = kinds.iter().position(|k| *k == "todo/nudge").unwrap();
    assert_eq!(kinds[at - 1], "step/end");
    assert_eq!(kinds[at + 1], "step/start");
    assert_eq!(kinds.iter().filter(|k| **k == "todo/write").count(), 2);
    let end = log.last().unwrap();
    assert_eq!(end["type"], "turn/end");
    assert_eq!(end["data"]["reason"]["kind"], "completed");

    // The transcript shows the reminder as the user side.
    let out = scratch.cordis(&["-c", composition.to_str().unwrap(), "--state-dir", state.to_str().unwrap(), "session", "show", &session]);
    let (shown, _) = text(&out);
    assert!(shown.contains("Your plan still has unfinished todos"), "{shown}");
}

#[test]
fn max_nudges_bounds_the_reminders_of_a_turn() {
    let scratch = Scratch::new();
    scratch.composition(
        "- {id: todo, name: tool-todo, config: {allowParallelInProgress: true}}\n- {id: nudge, name: todo-nudge, config: {maxNudges: 2}}\n",
    );
    // A model that never finishes: plans, then keeps stopping.
    std::fs::write(
        scratch.path().join("stubborn.yml"),
        "model: stubborn\nprompt: go\nsteps:\n  - text: plan\n    calls:\n      - name: todo_write\n        arguments: '{\"todos\": [{\"content\": \"a\", \"status\": \"pending\"}]}'\n  - text: stop 1\n  - text: stop 2\n  - text: stop 3\n",
    )
    .unwrap();
    let out = scratch.cordis(&["run", "--script", "stubborn.yml"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("4 steps"), "two reminders, then the turn ends:\n{stdout}");
    let config = scratch.cordis(&["check"]);
    assert!(config.status.success());
    scratch.composition(
        "- {id: todo, name: tool-todo, config: {allowParallelInProgress: true}}\n- {id: nudge, name: todo-nudge, config: {maxNudges: -1}}\n",
    );
    let (bad, _) = text(&scratch.cordis(&["check"]));
    assert!(bad.contains("$.maxNudges"), "{bad}");
}
