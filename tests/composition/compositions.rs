//! Compositions in the cordis loader's dialect, through the real `cordis`
//! binary and the real compiled tool-todo library: the operators' files in
//! `tests/fixtures/compositions/` (copied from the TypeScript harness's
//! repository), the examples in `examples/compositions/`, includes,
//! patches, patch layers, `!!js` and `cordis config`.

use std::path::{Path, PathBuf};

use cordis_tests::{repo_root, text, Scratch};
use serde_json::Value;

/// `cordis check --json ARGS` in `scratch`: the exit code and the report.
fn check_json(scratch: &Scratch, args: &[&str]) -> (Option<i32>, Value, String) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = scratch.cordis(&all);
    let (stdout, stderr) = text(&out);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}):\n{stdout}\n{stderr}"));
    (out.status.code(), report, stderr)
}

fn entries(report: &Value) -> Vec<(String, String)> {
    report["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| (e["id"].as_str().unwrap_or_default().to_string(), e["state"].as_str().unwrap_or_default().to_string()))
        .collect()
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the fixture folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yml" || e == "yaml") {
            out.push(path);
        }
    }
}

/// Every real composition composes with no dialect error, and every
/// `@deepseek-ai/dsh-tool-todo` row loads through our tool-todo library.
#[test]
fn every_fixture_composition_composes() {
    let scratch = Scratch::new();
    let empty = scratch.path().join("empty.yml");
    std::fs::write(&empty, "[]\n").unwrap();
    let mut files = Vec::new();
    yaml_files(&repo_root().join("tests/fixtures/compositions"), &mut files);
    files.sort();
    assert!(files.len() >= 11, "{files:?}");
    let mut todo_rows = 0;
    for file in &files {
        let shown = file.display().to_string();
        // Files named *.patch.yml, and the harness's test layer, are patch
        // layers: lists of patches, applied to an empty composition.
        let is_layer = shown.ends_with(".patch.yml") || shown.contains("dsh-badge");
        let (code, report, stderr) =
            if is_layer { check_json(&scratch, &[empty.to_str().unwrap(), "--patch", &shown]) } else { check_json(&scratch, &[&shown]) };
        assert!(matches!(code, Some(0 | 1)), "{shown}: exit {code:?}\n{stderr}");
        for e in report["entries"].as_array().unwrap() {
            let state = e["state"].as_str().unwrap();
            let reason = e["reason"].as_str().unwrap_or_default();
            assert!(
                matches!(state, "loaded" | "disabled" | "missing" | "waiting")
                    || (state == "failed" && (reason.contains("dshHomePath") || reason.contains("getBuiltinModule"))),
                "{shown}: {e}"
            );
            let source = e["source"].as_str().unwrap();
            assert!(source.rsplit_once(':').is_some_and(|(_, line)| line.parse::<usize>().is_ok()), "{shown}: {e}");
            if e["name"] == "@deepseek-ai/dsh-tool-todo" {
                assert_eq!(state, "loaded", "{shown}: {e}");
                assert!(e["library"].as_str().unwrap().ends_with("libtool_todo.so"), "{e}");
                todo_rows += 1;
            }
        }
    }
    assert!(todo_rows >= 6, "only {todo_rows} tool-todo rows were checked");
}

/// The standard preset's rows keep their dialect keys: groups with
/// `isolate` realms, `!!js` switches, package names with an export.
#[test]
fn the_standard_preset_reads_as_written() {
    let scratch = Scratch::new();
    let file = repo_root().join("tests/fixtures/compositions/apps/cli/config/agent-presets/standard/agent.cordis.yml");
    // Rows name plugins this repository does not build (tool-bash, ...):
    // `check` says so with exit 1.
    let (code, report, _) = check_json(&scratch, &[file.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    let states = entries(&report);
    let state = |id: &str| states.iter().find(|(i, _)| i == id).map(|(_, s)| s.as_str()).unwrap_or("absent");
    assert_eq!(state("tool-todo"), "loaded");
    // process.platform is `linux` here: the bash row is enabled (missing,
    // no library), the PowerShell row disabled.
    assert_eq!(state("tool-bash"), "missing");
    assert_eq!(state("tool-pwsh"), "disabled");
    assert_eq!(state("planning"), "loaded");
    assert_eq!(state("planning/plan-mode"), "missing");
    assert_eq!(state("delegation/tool-subagent-codex"), "disabled");
    let missing = report["entries"].as_array().unwrap().iter().find(|e| e["id"] == "delegation/tool-subagent-list-agents").unwrap();
    assert!(missing["reason"].as_str().unwrap().contains("`@deepseek-ai/dsh-tool-subagent-control/list-agents`"), "{missing}");
    let text_out = scratch.cordis(&["check", file.to_str().unwrap()]);
    let (stdout, _) = text(&text_out);
    assert!(stdout.contains("isolate planMode: private"), "{stdout}");
    let missing = states.iter().filter(|(_, s)| s == "missing").count();
    assert!(stdout.lines().last().is_some_and(|l| l.ends_with(&format!("are not running: {missing} missing"))), "{stdout}");
}

/// The examples: a base file, an include with patches, and a patch layer.
#[test]
fn example_compositions_load_as_documented() {
    let scratch = Scratch::new();
    let dir = repo_root().join("examples/compositions");
    let path = |f: &str| dir.join(f).display().to_string();
    let (code, report, stderr) = check_json(&scratch, &[&path("base.cordis.yml")]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        entries(&report),
        [("tool-todo".into(), "loaded".into()), ("extras".into(), "loaded".into()), ("extras/todo-parallel".into(), "disabled".into())]
    );
    let (code, report, stderr) = check_json(&scratch, &[&path("with-patches.cordis.yml")]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        entries(&report),
        [
            ("base".into(), "loaded".into()),
            ("base/tool-todo".into(), "loaded".into()),
            ("base/extras".into(), "loaded".into()),
            ("base/extras/todo-parallel".into(), "disabled".into()),
            ("base/extras/todo-env".into(), "disabled".into()),
        ]
    );
    assert!(report["entries"][1]["source"].as_str().unwrap().ends_with("examples/compositions/base.cordis.yml:3"), "{report}");
    let (code, report, stderr) = check_json(&scratch, &[&path("base.cordis.yml"), "--patch", &path("layer.cordis.patch.yml")]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        entries(&report),
        [
            ("tool-todo".into(), "disabled".into()),
            ("extras".into(), "loaded".into()),
            ("extras/todo-parallel".into(), "loaded".into()),
            ("audit".into(), "disabled".into()),
        ]
    );
    // The include's patch replaced the whole config: the tool is parallel.
    let out = scratch.cordis(&["-c", &path("with-patches.cordis.yml"), "tools", "--json"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let parallel = scratch.cordis(&["-c", &path("base.cordis.yml"), "--patch", &path("layer.cordis.patch.yml"), "tools", "--json"]);
    assert_eq!(stdout, text(&parallel).0, "both select allowParallelInProgress: true");
    let single = scratch.cordis(&["-c", &path("base.cordis.yml"), "tools", "--json"]);
    assert_ne!(stdout, text(&single).0, "the base file selects allowParallelInProgress: false");
}

/// `!!js` config values are evaluated when the entry starts, with
/// JavaScript semantics; unknown names and services fail the entry with
/// file, line and the name; a required service nobody provides is waiting.
#[test]
fn check_json_reports_an_unreadable_composition_as_json() {
    let scratch = Scratch::new();
    scratch.composition("- name: tool-todo\n  config: {allowParallelInProgress: true\n");
    let (code, report, stderr) = check_json(&scratch, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    let error = report["error"].as_str().unwrap_or_else(|| panic!("no error member: {report}"));
    assert!(error.starts_with("cordis.yml:"), "{error}");
    assert!(stderr.contains(error), "the same message on stderr: {stderr}");
}

#[test]
fn expressions_and_services() {
    let scratch = Scratch::new();
    let composition = concat!(
        "- id: todo\n",
        "  name: '@deepseek-ai/dsh-tool-todo'\n",
        "  disabled: !!js \"process.env.CORDIS_T_OFF === '1'\"\n",
        "  config:\n",
        "    allowParallelInProgress: !!js \"(process.env.CORDIS_T_PAR ?? 'no') === 'yes' && ctx.tools !== undefined\"\n",
    );
    scratch.composition(composition);
    let run = |env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(cordis_tests::cordis_exe());
        cmd.args(["tools", "--json"]).current_dir(scratch.path()).env("CORDIS_PLUGIN_PATH", cordis_tests::plugin_dir());
        cmd.env("XDG_CONFIG_HOME", scratch.path().join(".config")).env_remove("CORDIS_T_PAR").env_remove("CORDIS_T_OFF");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        text(&out)
    };
    let (parallel, _) = run(&[("CORDIS_T_PAR", "yes")]);
    let (single, _) = run(&[]);
    assert_ne!(parallel, single);
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n");
    assert_eq!(parallel, text(&scratch.cordis(&["tools", "--json"])).0);
    scratch.composition(composition);
    let (off, stderr) = run(&[("CORDIS_T_OFF", "1")]);
    assert_eq!(off.trim(), "[]", "{stderr}");

    scratch.composition(concat!(
        "- id: helper\n  name: tool-todo\n  config:\n    allowParallelInProgress: !!js dshHomePath('x')\n",
        "- id: svc\n  name: tool-todo\n  config:\n    allowParallelInProgress: !!js ctx.webStartup.port\n",
        "- id: wait\n  name: tool-todo\n  inject: [webStartup]\n  config: {allowParallelInProgress: true}\n",
        "- id: optional\n  name: tool-todo\n  inject:\n    webStartup: {required: false}\n  config: {allowParallelInProgress: true}\n",
    ));
    let (code, report, _) = check_json(&scratch, &[]);
    assert_eq!(code, Some(1));
    let by_id = |id: &str| report["entries"].as_array().unwrap().iter().find(|e| e["id"] == id).unwrap().clone();
    let helper = by_id("helper");
    assert_eq!(helper["state"], "failed");
    assert!(helper["reason"].as_str().unwrap().starts_with("cordis.yml:4: entry helper: "), "{helper}");
    assert!(helper["reason"].as_str().unwrap().contains("`dshHomePath`"), "{helper}");
    let svc = by_id("svc");
    assert_eq!(svc["state"], "failed");
    assert!(svc["reason"].as_str().unwrap().starts_with("cordis.yml:8: entry svc: "), "{svc}");
    assert!(svc["reason"].as_str().unwrap().contains("`webStartup`"), "{svc}");
    let wait = by_id("wait");
    assert_eq!(wait["state"], "waiting");
    assert!(wait["reason"].as_str().unwrap().contains("waiting for service `webStartup`"), "{wait}");
    assert_eq!(by_id("optional")["state"], "loaded");
    // --strict: waiting counts as a failure; without it only `failed` does.
    scratch.composition("- id: wait\n  name: tool-todo\n  inject: [webStartup]\n  config: {allowParallelInProgress: true}\n");
    assert_eq!(scratch.cordis(&["check"]).status.code(), Some(0));
    assert_eq!(scratch.cordis(&["--strict", "check"]).status.code(), Some(1));
}

/// The user patch layer under XDG_CONFIG_HOME applies first, then --patch
/// files; `--no-user-patch` skips it; an empty layer is an error and `[]`
/// disables it.
#[test]
fn patch_layers_user_then_command_line() {
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config: {allowParallelInProgress: true}\n- id: other\n  name: tool-todo\n  disabled: true\n  config: {allowParallelInProgress: false}\n");
    let layer_dir = scratch.path().join(".config/cordis");
    std::fs::create_dir_all(&layer_dir).unwrap();
    std::fs::write(layer_dir.join("cordis.patch.yml"), "- id: todo\n  disabled: true\n- id: other\n  disabled: false\n").unwrap();
    let (_, report, _) = check_json(&scratch, &[]);
    assert_eq!(entries(&report), [("todo".into(), "disabled".into()), ("other".into(), "loaded".into())]);
    let (_, report, _) = check_json(&scratch, &["--no-user-patch"]);
    assert_eq!(entries(&report), [("todo".into(), "loaded".into()), ("other".into(), "disabled".into())]);
    std::fs::write(scratch.path().join("late.yml"), "- id: todo\n  disabled: false\n- id: other\n  disabled: true\n- id: ghost\n  disabled: true\n")
        .unwrap();
    let (_, report, _) = check_json(&scratch, &["--patch", "late.yml"]);
    assert_eq!(entries(&report), [("todo".into(), "loaded".into()), ("other".into(), "disabled".into())]);
    let warnings = report["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report}");
    assert!(warnings[0].as_str().unwrap().starts_with("late.yml:5: the patch targets entry `ghost`"), "{report}");
    std::fs::write(layer_dir.join("cordis.patch.yml"), "# nothing yet\n").unwrap();
    let out = scratch.cordis(&["check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("cordis.patch.yml: the patch file is empty; write `[]`"), "{}", text(&out).1);
    std::fs::write(layer_dir.join("cordis.patch.yml"), "[]\n").unwrap();
    assert_eq!(scratch.cordis(&["check"]).status.code(), Some(0));
}

/// `cordis config` prints one loadable document: loading it gives the same
/// entries in the same states.
#[test]
fn composed_tree_loads_again_the_same() {
    let scratch = Scratch::new();
    let dir = repo_root().join("examples/compositions");
    let out = scratch.cordis(&["config", dir.join("with-patches.cordis.yml").to_str().unwrap()]);
    let (yaml, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(yaml.contains("# from ") && yaml.contains("!!js \"process.env.CORDIS_TODO_PARALLEL === 'yes'\""), "{yaml}");
    std::fs::write(scratch.path().join("composed.yml"), &yaml).unwrap();
    let (_, again, _) = check_json(&scratch, &["composed.yml"]);
    let (_, first, _) = check_json(&scratch, &[dir.join("with-patches.cordis.yml").to_str().unwrap()]);
    assert_eq!(entries(&again), entries(&first), "{yaml}");
}

/// An include cycle fails the include that closes it, naming the chain.
#[test]
fn include_cycles_name_the_chain() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path().join("a.yml"), "- id: to-b\n  name: cordis:include\n  config: {path: b.yml}\n").unwrap();
    std::fs::write(scratch.path().join("b.yml"), "- id: to-a\n  name: cordis:include\n  config: {path: a.yml}\n").unwrap();
    scratch.composition(
        "- id: top\n  name: cordis:include\n  config: {path: a.yml}\n- id: todo\n  name: tool-todo\n  config: {allowParallelInProgress: true}\n",
    );
    let (code, report, _) = check_json(&scratch, &[]);
    assert_eq!(code, Some(1));
    let states = entries(&report);
    assert_eq!(states.last().unwrap(), &("todo".to_string(), "loaded".to_string()));
    let cycle = report["entries"].as_array().unwrap().iter().find(|e| e["id"] == "top/to-b/to-a").unwrap();
    let reason = cycle["reason"].as_str().unwrap();
    assert!(reason.starts_with("b.yml:3: entry top/to-b/to-a: include cycle: "), "{reason}");
    assert!(reason.contains("a.yml → ") && reason.contains("b.yml → "), "{reason}");
    // `cordis config` prints the tree but does not pass the cycle off as
    // fine: the problem on stderr, with file and line, and exit 1.
    let out = scratch.cordis(&["config"]);
    let (yaml, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(yaml.contains("id: to-a"), "{yaml}");
    assert!(stderr.contains("error: b.yml:3: entry top/to-b/to-a: include cycle: "), "{stderr}");
}
