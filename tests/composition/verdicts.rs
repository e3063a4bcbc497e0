//! What `check`, `run`, `dev` and `mcp` say of a composition that is not
//! whole: tags the dialect does not know, two layers inserting one id,
//! failed, missing and waiting entries, and what `cordis config` shows of
//! values and layers.

use std::process::{Command, Stdio};

use cordis_tests::{cordis_exe, plugin_dir, text, Scratch};

/// Runs `cordis ARGS` in `scratch` with stdin closed (so `dev` and `mcp`
/// end at once if they start): the exit code, stdout and stderr.
fn cordis(scratch: &Scratch, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(cordis_exe())
        .args(args)
        .current_dir(scratch.path())
        .env("CORDIS_PLUGIN_PATH", plugin_dir())
        .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run cordis");
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout, stderr)
}

const TODO: &str = "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n";

/// Issue 27, kind 4: `!!JS`, `!!jsx` and `!jss` are refused with file,
/// line and column and the tags a composition knows, by every command;
/// `!!js` and YAML's core tags are read.
#[test]
fn a_tag_the_dialect_does_not_know_is_an_error_naming_the_known_tags() {
    let scratch = Scratch::new();
    for (tag, column) in [("!!JS", 30), ("!!jsx", 30), ("!jss", 30), ("!<tag:example.com,2026:js>", 30)] {
        scratch.composition(&format!("- name: tool-todo\n  config:\n    allowParallelInProgress: {tag} \"1 == 1\"\n"));
        for command in [&["check"][..], &["config"], &["run", "hi"], &["dev"], &["mcp"]] {
            let (code, stdout, stderr) = cordis(&scratch, command);
            assert_eq!(code, Some(2), "{tag} {command:?}: {stdout}\n{stderr}");
            assert!(
                stderr.contains(&format!(
                    "cordis.yml:3:{column}: unknown tag `{tag}`: a composition knows `!!js` (an expression) and YAML's core tags `!!str`, `!!int`"
                )),
                "{tag} {command:?}: {stderr}"
            );
        }
    }
    // Tags on block collections are pointed at where they are written;
    // `!!js` on a collection is refused (it tags a scalar).
    for (text, at, needle) in [
        ("- name: tool-todo\n  config: !foo\n    allowParallelInProgress: true\n", "cordis.yml:2:11:", "unknown tag `!foo`"),
        ("!foo\n- name: tool-todo\n", "cordis.yml:1:1:", "unknown tag `!foo`"),
        ("- !foo\n  name: tool-todo\n", "cordis.yml:1:3:", "unknown tag `!foo`"),
        ("- name: tool-todo\n  config: !!js\n    allowParallelInProgress: true\n", "cordis.yml:2:11:", "`!!js` tags a scalar holding an expression"),
    ] {
        scratch.composition(text);
        let (code, _, stderr) = cordis(&scratch, &["check"]);
        assert_eq!(code, Some(2), "{text}: {stderr}");
        assert!(stderr.contains(&format!("{at} {needle}")), "{text}: {stderr}");
    }
    scratch.composition(
        "- name: tool-todo\n  config: !!map\n    allowParallelInProgress: !!js \"1 == 1\"\n- name: todo-nudge\n  config:\n    maxNudges: !!int 2\n",
    );
    let (code, stdout, stderr) = cordis(&scratch, &["check"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}

/// Issue 27, kind 3: two patch layers inserting an entry with one id (the
/// same plugin, or another) are refused before any plugin is applied,
/// naming the id, both files and lines and the layer order, with the same
/// verdict from `check`, `run`, `dev` and `mcp`.
#[test]
fn two_layers_inserting_one_id_are_refused_by_every_command() {
    let scratch = Scratch::new();
    scratch.composition("- id: base\n  name: todo-nudge\n  config:\n    maxNudges: 2\n");
    let layers = scratch.path().join(".config/cordis");
    std::fs::create_dir_all(&layers).unwrap();
    std::fs::write(layers.join("cordis.patch.yml"), format!("- insert:\n{}", TODO.lines().map(|l| format!("    {l}\n")).collect::<String>()))
        .unwrap();
    for second in ["- insert:\n    - id: todo\n      name: todo-nudge\n", "# the same row again\n- insert:\n    - id: todo\n      name: tool-todo\n"]
    {
        std::fs::write(scratch.path().join("late.yml"), second).unwrap();
        let line = second.lines().position(|l| l.contains("id: todo")).unwrap() + 1;
        for command in [&["check"][..], &["run", "hi"], &["dev"], &["mcp"], &["config"], &["tools"]] {
            let mut args = vec!["--patch", "late.yml"];
            args.extend_from_slice(command);
            let (code, stdout, stderr) = cordis(&scratch, &args);
            assert_eq!(code, Some(2), "{command:?}: {stdout}\n{stderr}");
            let expected = format!(
                "entry id `todo` is written twice: first at {}:2 (user patch layer), inserted again at late.yml:{line} (--patch layer 1); patch layers apply in order",
                layers.join("cordis.patch.yml").display()
            );
            assert!(stderr.contains(&expected), "{command:?}: expected {expected:?} in {stderr}");
            assert!(!stdout.contains("loaded") && !stderr.contains("ready"), "{command:?}: nothing was applied: {stdout}");
        }
    }
    // One layer alone composes.
    let (code, stdout, stderr) = cordis(&scratch, &["check"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}

/// Issue 27, kind 5: a failed entry refuses `run`, `dev` and `mcp` (exit 1,
/// naming it, before any turn); a missing one (`todo-nudj`, with its
/// did-you-mean) fails `check` with a summary line and lets the others
/// start with a warning; a consumer whose provider failed has its own
/// config checked in the same pass.
#[test]
fn a_broken_composition_never_looks_like_success() {
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: \"yes\"\n- id: nudge\n  name: todo-nudge\n  config:\n    maxNudges: \"2\"\n");
    let (code, stdout, _) = cordis(&scratch, &["check"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("cordis.yml:4: entry todo: $.allowParallelInProgress must be a boolean"), "{stdout}");
    assert!(stdout.contains("cordis.yml:8: entry nudge: $.maxNudges must be an integer, got the string \"2\""), "{stdout}");
    assert!(stdout.ends_with("2 of 2 entries are not running: 2 failed\n"), "{stdout}");
    for command in [&["run", "hi"][..], &["dev"], &["mcp"], &["mcp", "--watch"]] {
        let (code, stdout, stderr) = cordis(&scratch, command);
        assert_eq!(code, Some(1), "{command:?}: {stdout}\n{stderr}");
        assert!(
            stderr.contains("2 of 2 entries are not running: 2 failed; failed: todo, nudge; a failed entry refuses the start"),
            "{command:?}: {stderr}"
        );
        assert!(!stdout.contains("turn 1") && !stdout.contains("assistant") && !stdout.contains("jsonrpc"), "{command:?}: {stdout}");
    }

    // Missing: `check` fails, with the summary; `run` starts and says so.
    scratch.composition(&format!("{TODO}- id: nudge\n  name: todo-nudj\n"));
    let (code, stdout, _) = cordis(&scratch, &["check"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("(did you mean `todo-nudge`?)"), "{stdout}");
    assert!(stdout.ends_with("1 of 2 entries is not running: 1 missing\n"), "{stdout}");
    std::fs::create_dir_all(scratch.path().join("examples")).unwrap();
    std::fs::copy(cordis_tests::repo_root().join("examples/plan-and-ship.script.yml"), scratch.path().join("examples/plan-and-ship.script.yml"))
        .unwrap();
    let script = ["run", "--script", "examples/plan-and-ship.script.yml"];
    let (code, stdout, stderr) = cordis(&scratch, &script);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("completed"), "{stdout}");
    assert!(stderr.contains("warning: 1 of 2 entries is not running: 1 missing; starting without them"), "{stderr}");
    let (code, _, stderr) = cordis(&scratch, &[&["--strict"][..], &script].concat());
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("1 missing; not loaded: nudge; --strict refuses any entry that did not load"), "{stderr}");

    // Waiting: `check` passes with the summary, fails under --strict.
    scratch.composition("- id: nudge\n  name: todo-nudge\n  config:\n    maxNudges: 2\n");
    let (code, stdout, _) = cordis(&scratch, &["check"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.ends_with("1 of 1 entry is not running: 1 waiting for a service\n"), "{stdout}");
    assert_eq!(cordis(&scratch, &["--strict", "check"]).0, Some(1));
}

/// Issue 27, kind 6: `cordis config` shows each `!!js` value as it
/// evaluates for this run beside its source, and on each key a patch layer
/// set, which layer and line; a `${{ … }}` template gets a hint.
#[test]
fn config_shows_values_and_the_layer_of_each_key() {
    let scratch = Scratch::new();
    scratch.composition(
        "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: !!js process.env.PARALLEL === 'yes'\n- id: nudge\n  name: todo-nudge\n  config:\n    maxNudges: !!js 1 + 1\n",
    );
    let layers = scratch.path().join(".config/cordis");
    std::fs::create_dir_all(&layers).unwrap();
    std::fs::write(layers.join("cordis.patch.yml"), "- id: nudge\n  disabled: !!js process.env.QUIET === '1'\n").unwrap();
    let config = |args: &[&str]| {
        Command::new(cordis_exe())
            .arg("config")
            .args(args)
            .current_dir(scratch.path())
            .env("XDG_CONFIG_HOME", scratch.path().join(".config"))
            .env("PARALLEL", "yes")
            .env("QUIET", "1")
            .output()
            .unwrap()
    };
    // What reads process.env may be a secret: its value is shown only when
    // asked for.
    let out = config(&[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(
            "    allowParallelInProgress: !!js \"process.env.PARALLEL === 'yes'\"  # now: hidden, it reads process.env (`cordis config --show-values` shows it)\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("    maxNudges: !!js \"1 + 1\"  # now: 2\n"), "{stdout}");
    let out = config(&["--show-values"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("    allowParallelInProgress: !!js \"process.env.PARALLEL === 'yes'\"  # now: true\n"), "{stdout}");
    assert!(stdout.contains("    maxNudges: !!js \"1 + 1\"  # now: 2\n"), "{stdout}");
    let layer = layers.join("cordis.patch.yml").display().to_string();
    assert!(
        stdout.contains(&format!("  disabled: !!js \"process.env.QUIET === '1'\"  # now: true; set by {layer}:2 (user patch layer)\n")),
        "{stdout}"
    );
    // The rows' own keys carry no layer comment.
    assert!(stdout.contains("  name: todo-nudge\n"), "{stdout}");

    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n    label: \"${{ env.LABEL }}\"\n");
    for command in ["config", "check", "run", "mcp", "tools"] {
        let (_, stdout, stderr) = cordis(&scratch, &[command]);
        let all = format!("{stdout}{stderr}");
        assert!(
            all.contains(
                "warning: cordis.yml:5: entry todo: \"${{ env.LABEL }}\" looks like a `${{ … }}` template, which this dialect does not expand"
            ),
            "{command}: {all}"
        );
    }
}

/// A `disabled` expression that throws fails its own entry and nothing
/// else: the session store and compaction entries, chosen before any
/// plugin loads, do not depend on another entry's switch, which is
/// evaluated once, by the loader.
#[test]
fn a_failing_switch_fails_only_its_own_entry() {
    let scratch = Scratch::new();
    scratch.composition(concat!(
        "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n",
        "- id: nudge\n  name: todo-nudge\n  disabled: !!js \"(() => { throw new Error('boom') })()\"\n",
    ));
    let (code, stdout, stderr) = cordis(&scratch, &["check"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let nudge = stdout.lines().find(|l| l.contains("nudge")).unwrap_or_else(|| panic!("no nudge line:\n{stdout}"));
    assert!(nudge.contains("failed"), "{stdout}");
    assert!(stdout.contains("cordis.yml:7: entry nudge: `disabled`:") && stdout.contains("boom"), "{stdout}");
    assert!(stdout.lines().any(|l| l.contains("todo") && l.contains("loaded")), "{stdout}");
    // The sessions stay usable: the store is not refused for the switch.
    let (code, stdout, stderr) = cordis(&scratch, &["session", "ls"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("no sessions in"), "{stdout}{stderr}");
    assert_eq!(stderr.matches("boom").count(), 1, "the switch is evaluated and reported once: {stderr}");
    // `run` refuses to start for the failed entry, and says so.
    let (code, stdout, stderr) = cordis(&scratch, &["run"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("1 of 2 entries is not running: 1 failed; failed: nudge"), "{stderr}");
}

/// `cordis config` output loads again to the same values, also for text a
/// YAML reader would take as line breaks or refuse (U+2028, U+0085, DEL,
/// C1 controls), in values and in the `# now:` comment of an expression.
#[test]
fn config_output_loads_again_with_line_separators_and_controls() {
    let scratch = Scratch::new();
    // Written with YAML's escapes: the file itself holds no such character.
    scratch.composition(concat!(
        "- id: m\n  name: llm-openai\n  disabled: true\n  config:\n",
        r#"    baseUrl: "a \u2028 b\u0085c\u007fd\u009fe # not a comment""#,
        "\n    model: !!js \"'x\\u2028y'\"\n"
    ));
    let (code, printed, stderr) = cordis(&scratch, &["config"]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::write(scratch.path().join("again.yml"), &printed).unwrap();
    let (code, again, stderr) = cordis(&scratch, &["config", "again.yml"]);
    assert_eq!(code, Some(0), "{printed}\n{stderr}");
    let first = cordis_composition::composition::Composition::read(&scratch.path().join("cordis.yml")).unwrap();
    let second = cordis_composition::composition::Composition::read(&scratch.path().join("again.yml")).unwrap();
    assert_eq!(first.entries[0].config().unwrap().value, second.entries[0].config().unwrap().value, "{printed}");
    assert!(again.contains("# now: \"x y\""), "{again}");
}
