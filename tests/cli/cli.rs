//! The `cordis` binary as a new user meets it: the README's main job in a
//! fresh folder, and the three mistakes an operator makes first.

use cordis_tests::{repo_root, text, Scratch};

fn with_repo_example(scratch: &Scratch) {
    std::fs::copy(repo_root().join("cordis.yml"), scratch.path().join("cordis.yml")).unwrap();
    std::fs::create_dir_all(scratch.path().join("examples")).unwrap();
    std::fs::copy(repo_root().join("examples/plan-and-ship.script.yml"), scratch.path().join("examples/plan-and-ship.script.yml")).unwrap();
}

#[test]
fn the_main_job_runs_with_no_arguments() {
    let scratch = Scratch::new();
    with_repo_example(&scratch);
    let check = scratch.cordis(&["check"]);
    let (out, err) = text(&check);
    assert!(check.status.success(), "{out}\n{err}");
    assert!(out.contains("loaded   tool-todo (tool-todo)"), "{out}");

    let run = scratch.cordis(&["run"]);
    let (out, err) = text(&run);
    assert!(run.status.success(), "{out}\n{err}");
    // The plan is printed after each todo_write, including parallel work.
    assert!(out.contains("todos     ┌ 2 in progress · 1 pending"), "{out}");
    assert!(out.contains("│ ● watch the background build"), "{out}");
    assert!(out.contains("todos     ┌ 4 completed"), "{out}");
    // The scripted mistake is reported and corrected.
    assert!(out.contains("$.todos must be an array, got the string"), "{out}");
    assert!(out.contains("turn 1 completed: 6 steps, 5 tool calls (1 failed)"), "{out}");

    let ls = scratch.cordis(&["session", "ls"]);
    let (listed, _) = text(&ls);
    assert!(listed.contains("todos: 4/4 completed"), "{listed}");

    let tools = scratch.cordis(&["tools", "--json"]);
    let (json, _) = text(&tools);
    let catalog: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(catalog[0]["name"], "todo_write");
    assert_eq!(catalog[0]["parameters"]["required"][0], "todos");
}

fn check_fails_with(scratch: &Scratch, composition: &str, expected: &[&str]) {
    scratch.composition(composition);
    let out = scratch.cordis(&["check"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    for e in expected {
        assert!(stdout.contains(e), "expected {e:?} in:\n{stdout}");
    }
}

#[test]
fn broken_compositions_say_exactly_what_to_fix() {
    let scratch = Scratch::new();
    check_fails_with(
        &scratch,
        "- id: tool-todo\n  name: tool-todo\n",
        &["failed   tool-todo", "cordis.yml:1: entry tool-todo: $.allowParallelInProgress is required"],
    );
    check_fails_with(
        &scratch,
        "- id: tool-todo\n  name: tool-todo\n  config:\n    allowParalelInProgress: true\n",
        &[
            "cordis.yml:4: entry tool-todo: $.allowParalelInProgress is not an allowed key (allowed: allowParallelInProgress)",
            "cordis.yml:3: entry tool-todo: $.allowParallelInProgress is required",
        ],
    );
    check_missing(
        &scratch,
        "- id: tool-todo\n  name: ./build/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n",
        &["missing  tool-todo", "cordis.yml:2: entry tool-todo: no plugin library at", "build/libtool_todo.so"],
    );
    check_missing(
        &scratch,
        "- id: tool-todo\n  name: tool-todoo\n  config:\n    allowParallelInProgress: true\n",
        &["cordis.yml:2: entry tool-todo: no library on the plugin path provides `tool-todoo` (looked for libtool_todoo.so or a library declaring that package name) (did you mean `tool-todo`?); searched"],
    );
}

/// A plugin no library provides is `missing`: `check` exits 1 with a
/// summary line; `run` starts without it, saying so.
fn check_missing(scratch: &Scratch, composition: &str, expected: &[&str]) {
    scratch.composition(composition);
    let out = scratch.cordis(&["check"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    for e in expected {
        assert!(stdout.contains(e), "expected {e:?} in:\n{stdout}");
    }
    assert!(stdout.ends_with("1 of 1 entry is not running: 1 missing\n"), "{stdout}");
    let strict = scratch.cordis(&["--strict", "check"]);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict).0);
    let tools = scratch.cordis(&["tools"]);
    let (stdout, stderr) = text(&tools);
    assert_eq!(tools.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("warning: 1 of 1 entry is not running: 1 missing; starting without them"), "{stderr}");
}

#[test]
fn unusable_compositions_exit_2_with_line_and_column() {
    let scratch = Scratch::new();
    for (text_, expected) in [
        ("", "the composition is empty"),
        ("tool-todo: {}\n", "cordis.yml:1:1: expected a list of entries"),
        ("- name: a\n\tconfig: {}\n", "cordis.yml:2:"),
        ("- name: a\n  name: b\n", "cordis.yml:2:3: duplicate key `name`"),
    ] {
        scratch.composition(text_);
        let out = scratch.cordis(&["check"]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{text_:?}: {stdout}\n{stderr}");
        assert!(stderr.contains(expected), "{text_:?}: expected {expected:?} in {stderr}");
    }
}

#[test]
fn strict_refuses_to_run_with_a_failed_entry() {
    let scratch = Scratch::new();
    scratch.composition("- id: tool-todo\n  name: tool-todo\n");
    let out = scratch.cordis(&["--strict", "tools"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("1 of 1 entry is not running: 1 failed; not loaded: tool-todo; --strict refuses any entry that did not load"),
        "{stderr}"
    );
    // Without --strict the failure is a warning and the command runs.
    let out = scratch.cordis(&["tools"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success());
    assert!(stderr.contains("warning: ") && stderr.contains("$.allowParallelInProgress is required"), "{stderr}");
    assert_eq!(stdout.trim(), "no tools registered");
}

/// Issue 11, kind 9: the "Continue with" hint after a run repeats the
/// options that decide what the next run sees (-c, --plugin-dir, ...), so
/// the printed command continues the same session in the same setup.
#[test]
fn the_continue_hint_keeps_the_composition_and_plugin_dirs() {
    let scratch = Scratch::new();
    let sub = scratch.path().join("deploy");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("my cordis.yml"), "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n").unwrap();
    std::fs::write(scratch.path().join("s.yml"), "steps:\n  - text: hi\n").unwrap();
    let plugins = cordis_tests::plugin_dir();
    let plugins = plugins.to_str().unwrap();
    let run = scratch.cordis(&["-c", "deploy/my cordis.yml", "--plugin-dir", plugins, "run", "--script", "s.yml", "go"]);
    let (out, err) = text(&run);
    assert!(run.status.success(), "{out}{err}");
    let hint = out.lines().find(|l| l.contains("Continue with: ")).unwrap();
    let command = hint.split("Continue with: ").nth(1).unwrap();
    assert!(command.contains(&format!(" -c 'deploy/my cordis.yml' --plugin-dir {plugins} run --session s-")), "{command}");
    // The hint, with the placeholders filled in, runs.
    let id = command.split("--session ").nth(1).unwrap().split(' ').next().unwrap();
    let again = scratch.cordis(&["-c", "deploy/my cordis.yml", "--plugin-dir", plugins, "run", "--session", id, "--script", "s.yml", "more"]);
    assert!(again.status.success(), "{:?}", text(&again));
}

/// Issue 11, kind 4: `cordis run` runs plugin code from a sealed private
/// copy, so a new build copied over the library file while a call runs
/// (`cp new.so plugins/libx.so`, which rewrites the file in place) cannot
/// change the code under it.
#[test]
fn overwriting_a_library_during_a_run_does_not_touch_the_running_code() {
    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let lib = plugins.join("libversioned.so");
    std::fs::copy(cordis_tests::library("fixture-versioned-a"), &lib).unwrap();
    scratch.composition("- id: v\n  name: ./plugins/libversioned.so\n");
    std::fs::write(
        scratch.path().join("slow.yml"),
        "model: slow\nprompt: go\nsteps:\n  - text: calling\n    calls:\n      - name: slow_version\n        arguments: '{\"ms\": 1500}'\n  - text: done\n",
    )
    .unwrap();
    let child = std::process::Command::new(cordis_tests::cordis_exe())
        .args(["run", "--script", "slow.yml"])
        .current_dir(scratch.path())
        .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    // In place, as `cp` does: truncate and rewrite the same inode.
    std::fs::write(&lib, std::fs::read(cordis_tests::library("fixture-versioned-b")).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the run must survive: {:?}\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("✓ slow_version") || stdout.contains("slow_version"), "{stdout}");
    assert!(stdout.contains("A"), "the call finished on the code it started with:\n{stdout}");
}
