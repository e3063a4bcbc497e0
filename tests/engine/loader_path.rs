//! The real compiled `tool-todo` library through the real loader: the
//! unwrapped export still carries its name, `inject` and config schema, and
//! `apply` works. A library whose exports include a stripped decoy is refused,
//! never half-used: a re-export that drops `inject` once loaded a plugin
//! without its services, and this test keeps that from coming back.

use cordis_engine::loader::{library, EntryState};
use cordis_tests::{library as lib_path, Scratch};
use serde_json::Value;

#[test]
fn unwrapped_tool_todo_export_keeps_name_inject_and_schema() {
    let lib = library::load_library(&lib_path("tool-todo")).expect("tool-todo loads through the ABI");
    let picked = library::unwrap_export(&lib, None).expect("the export named after the library is picked");
    assert_eq!(picked.decl.name.as_str(), "tool-todo");
    let inject: Vec<&str> = picked.decl.inject.iter().map(|s| s.as_str()).collect();
    assert_eq!(inject, vec!["tools", "projections"]);
    assert_eq!(lib.provides, vec![("tool-todo".to_string(), "todos".to_string())], "the library declares the service it provides");
    assert_eq!(lib.packages, vec![("@deepseek-ai/dsh-tool-todo".to_string(), "tool-todo".to_string())]);
    let required = picked.config_schema["required"].as_array().expect("the schema lists required keys");
    assert!(required.contains(&Value::from("allowParallelInProgress")), "{}", picked.config_schema);
    assert_eq!(picked.config_schema["additionalProperties"], Value::Bool(false));
    // The same export, picked by its explicit name.
    let explicit = library::unwrap_export(&lib, Some("tool-todo")).unwrap();
    assert_eq!(explicit.decl.name, picked.decl.name);
}

#[test]
fn composition_entry_applies_the_unwrapped_export() {
    let scratch = Scratch::new();
    let host = scratch.boot("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n", true);
    assert_eq!(host.reports.len(), 1);
    assert_eq!(host.reports[0].state, EntryState::Loaded, "{:?}", host.reports[0]);
    let inject: Vec<String> = host.loader.with_active("todo", |a| a.picked.decl.inject.iter().map(|s| s.to_string()).collect()).unwrap();
    assert_eq!(inject, vec!["tools", "projections"]);
    let effects = &host.reports[0].effects;
    assert!(effects.contains(&"service todos".to_string()), "{effects:?}");
    assert!(effects.contains(&"tool todo_write".to_string()), "{effects:?}");
    assert!(effects.contains(&"event type todo/write".to_string()), "{effects:?}");
    assert!(effects.contains(&"projection todos".to_string()), "{effects:?}");
    let names: Vec<String> = host.services.tools.schemas().into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["todo_write"]);
}

#[test]
fn library_with_a_stripped_decoy_is_refused_with_a_clear_error() {
    let lib = library::load_library(&lib_path("fixture-decoy")).expect("the decoy fixture loads");
    let err = library::unwrap_export(&lib, None).err().expect("an ambiguous library must be refused").to_string();
    assert!(err.contains("exports 2 plugins named `fixture-decoy`"), "{err}");
    let bare = library::unwrap_export(&lib, Some("bare")).err().expect("a declaration without schema is refused").to_string();
    assert!(bare.contains("incomplete declaration"), "{bare}");

    let scratch = Scratch::new();
    let host = scratch.boot(
        "- id: decoy\n  name: fixture-decoy\n  config:\n    label: x\n- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: false\n",
        true,
    );
    match &host.reports[0].state {
        EntryState::Failed(m) => {
            assert!(m[0].contains("cordis.yml:2: entry decoy"), "{m:?}");
            assert!(m[0].contains("plugins named `fixture-decoy`"), "{m:?}");
        }
        other => panic!("the decoy entry must fail, got {other:?}"),
    }
    // Neither declaration ran: no tool from the complete one.
    assert!(host.services.tools.get("decoy_tool").is_none());
    // The other entry still loads.
    assert_eq!(host.reports[1].state, EntryState::Loaded);
}

#[test]
fn not_a_plugin_and_missing_libraries_fail_only_their_entry() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path().join("libnotes.so"), "just text\n").unwrap();
    let host = scratch.boot(
        "- id: text\n  name: ./libnotes.so\n- id: nowhere\n  name: no-such-plugin\n- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n",
        true,
    );
    let messages = |i: usize| match &host.reports[i].state {
        EntryState::Failed(m) | EntryState::Missing(m) => m.join("\n"),
        other => panic!("entry {i} should fail or be missing, got {other:?}"),
    };
    assert!(matches!(host.reports[0].state, EntryState::Failed(_)));
    assert!(messages(0).contains("not a loadable shared library"), "{}", messages(0));
    assert!(matches!(host.reports[1].state, EntryState::Missing(_)), "a plugin no library provides is missing, not failed");
    assert!(
        messages(1).contains("cordis.yml:4: entry nowhere: no library on the plugin path provides `no-such-plugin` (looked for libno_such_plugin.so"),
        "{}",
        messages(1)
    );
    assert_eq!(host.reports[2].state, EntryState::Loaded);
}
