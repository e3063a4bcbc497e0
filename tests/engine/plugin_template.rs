//! `examples/plugin-template/`, the plugin kit's standalone cargo project,
//! built outside the workspace exactly as a plugin author would build it,
//! then loaded by the real `cordis`: `check` (by file and by its package
//! name), a scripted `run` that calls its tool, and `session show` with its
//! projection.

use cordis_tests::{build_outside, repo_root, text, Scratch};

#[test]
fn the_template_builds_outside_the_workspace_and_loads() {
    let template = repo_root().join("examples/plugin-template");
    // The template's own lock file is not committed: the build uses the
    // workspace's dependency versions.
    let library = build_outside(&template).join("libhello_plugin.so");
    assert!(library.is_file());

    let scratch = Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(&library, plugins.join("libhello_plugin.so")).unwrap();
    std::fs::copy(template.join("greet.script.yml"), scratch.path().join("greet.script.yml")).unwrap();

    // By file, as the template's own cordis.yml does.
    scratch.composition("- id: hello\n  name: ./plugins/libhello_plugin.so/hello\n  config:\n    greeting: Hello\n");
    let out = scratch.cordis(&["check"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for effect in ["event type hello/greeting", "projection greetings", "tool greet", "service greeter"] {
        assert!(stdout.contains(effect), "{effect} missing in:\n{stdout}");
    }

    // By its package name, found in its declarations on the plugin path.
    scratch.composition("- id: hello\n  name: '@example/hello'\n  config:\n    greeting: Hi\n");
    let out = scratch.cordis(&["--plugin-dir", plugins.to_str().unwrap(), "check", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&text(&out).0).unwrap();
    assert_eq!(report["entries"][0]["state"], "loaded", "{report}");

    // A scripted run calls the tool; the event is logged and folded.
    let out = scratch.cordis(&["--plugin-dir", plugins.to_str().unwrap(), "run", "--script", "greet.script.yml"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Hi, Ada!"), "{stdout}");
    let session = stdout
        .split_whitespace()
        .find(|w| w.starts_with("s-"))
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-').to_string())
        .unwrap_or_else(|| panic!("no session id in:\n{stdout}"));
    let out = scratch.cordis(&["--plugin-dir", plugins.to_str().unwrap(), "session", "show", &session]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Ada: 1"), "the greetings projection folds the logged event:\n{stdout}");

    // `cordis plugins` lists it with what it declares.
    let out = scratch.cordis(&["--plugin-dir", plugins.to_str().unwrap(), "plugins", "--json"]);
    let listing: serde_json::Value = serde_json::from_str(&text(&out).0).unwrap();
    let hello = listing["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["file"].as_str().unwrap().ends_with("libhello_plugin.so"))
        .unwrap_or_else(|| panic!("{listing}"));
    let plugin = &hello["plugins"][0];
    assert_eq!(plugin["name"], "hello");
    assert_eq!(plugin["provides"], serde_json::json!(["greeter"]));
    assert_eq!(plugin["packages"], serde_json::json!(["@example/hello"]));
    assert_eq!(plugin["inject"], serde_json::json!(["tools"]));
    assert_eq!(plugin["config"]["required"], serde_json::json!(["greeting"]));
}
