//! The plugin guide's code is real: every `rust` block of `docs/plugins.md`
//! is an excerpt of compiled sources (`examples/plugin-guide`, a workspace
//! member, and `plugins/todo/todo-read`), checked line by line, and the
//! guide's library is loaded by the real binary and its tools called.

use cordis_tests::dev::Dev;
use cordis_tests::{library, repo_root, Scratch};

/// The sources the guide's blocks are excerpts of.
const SOURCES: [&str; 5] = [
    "examples/plugin-guide/src/lib.rs",
    "examples/plugin-guide/src/hello.rs",
    "examples/plugin-guide/src/borrowing.rs",
    "examples/plugin-guide/src/stamp.rs",
    "examples/plugin-guide/src/service.rs",
];

/// A block's or a file's lines, each trimmed, blank ones left out.
fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()
}

/// The `rust` blocks of `text`, each with the line it starts at.
fn rust_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut current, line.trim_start()) {
            (None, "```rust") => current = Some((n + 2, String::new())),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The runs of a block between its elision lines (`// ...`).
fn segments(block: &str) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    for line in lines(block) {
        if line.starts_with("// ...") {
            out.push(Vec::new());
        } else if let Some(last) = out.last_mut() {
            last.push(line);
        }
    }
    out.into_iter().filter(|s| !s.is_empty()).collect()
}

#[test]
fn every_rust_block_of_the_guide_is_compiled_code() {
    let guide = std::fs::read_to_string(repo_root().join("docs/plugins.md")).unwrap();
    let mut sources: Vec<(String, Vec<String>)> =
        SOURCES.iter().map(|p| (p.to_string(), lines(&std::fs::read_to_string(repo_root().join(p)).unwrap()))).collect();
    sources.push((
        "plugins/todo/todo-read/src/lib.rs".into(),
        lines(&std::fs::read_to_string(repo_root().join("plugins/todo/todo-read/src/lib.rs")).unwrap()),
    ));
    let blocks = rust_blocks(&guide);
    assert!(blocks.len() >= 8, "found only {} rust blocks", blocks.len());
    for (line, block) in &blocks {
        for segment in segments(block) {
            let found = sources.iter().any(|(_, text)| text.windows(segment.len()).any(|w| w == segment.as_slice()));
            assert!(found, "docs/plugins.md:{line}: these lines are in no compiled source ({SOURCES:?}, todo-read):\n{}", segment.join("\n"));
        }
    }
}

#[test]
fn the_guides_plugins_load_and_their_tools_answer() {
    let guide = library("plugin-guide");
    let scratch = Scratch::new();
    let lib = guide.display();
    scratch.composition(&format!(
        "- id: hello\n  name: {lib}/hello\n  config: {{greeting: Hello}}\n\
         - id: stamp\n  name: {lib}/stamp\n  config: {{}}\n\
         - id: welcomer\n  name: {lib}/welcomer\n  config: {{}}\n\
         - id: greeter\n  name: {lib}/greeter\n  config: {{greeting: Welcome}}\n"
    ));
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.call("greet", r#"{"name": "Ada"}"#)["text"], "Hello, Ada!");
    // Named without an export, the library's several plugins are listed and
    // the hint names it as the entry does.
    let lonely = Scratch::new();
    lonely.composition(&format!("- id: which\n  name: {lib}\n"));
    let stdout = String::from_utf8_lossy(&lonely.cordis(&["check"]).stdout).to_string();
    assert!(stdout.contains("exports several plugins (") && stdout.contains(&format!("pick one with `{lib}/<export>`")), "{stdout}");
    // The consumer is listed before its provider, and calls it with `?`.
    assert_eq!(dev.call("welcome", r#"{"name": "Ada"}"#)["text"], "Welcome, Ada!");
    let stamped = dev.call("stamp", r#"{"at": 1700000000}"#);
    assert_eq!(stamped["isError"], false, "{stamped}");
    assert_eq!(stamped["value"], serde_json::json!({"at": 1700000000, "seen": true}));
    drop(dev);

    // The borrowing `greet` answers the same.
    scratch.composition(&format!("- id: hello\n  name: {lib}/hello-borrowing\n  config: {{greeting: Hi}}\n"));
    let mut dev = Dev::start(scratch.path(), &[]);
    assert_eq!(dev.call("greet", r#"{"name": "Ada"}"#)["text"], "Hi, Ada!");
    let refused = dev.call("greet", r#"{"name": 1}"#);
    assert_eq!(refused["isError"], true, "{refused}");
}
