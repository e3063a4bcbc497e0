//! The compiled plugin library, loaded the way the host loads it
//! (`lib_header_from_path` + `init_root_module`): its one
//! export must still carry its name, `inject` and config schema.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

use std::path::PathBuf;

use abi_stable::library::lib_header_from_path;
use cordis_abi::PluginLibraryRef;
use serde_json::Value;

fn library_path() -> Option<PathBuf> {
    // Integration tests run from target/<profile>/deps; cargo builds the
    // crate's cdylib into target/<profile> before running them.
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?;
    let name = format!("{}tool_todo{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    Some(dir.join(name)).filter(|p| p.exists())
}

#[test]
fn the_library_exports_tool_todo_with_inject_and_schema() {
    let path = library_path().expect("the cdylib is built next to the test binaries");
    let header = lib_header_from_path(&path).unwrap();
    let root = header.init_root_module::<PluginLibraryRef>().unwrap();
    let plugins = root.plugins()();
    assert_eq!(plugins.len(), 1);
    let decl = &plugins[0];
    assert_eq!(decl.name.as_str(), "tool-todo");
    let inject: Vec<&str> = decl.inject.iter().map(|s| s.as_str()).collect();
    assert_eq!(inject, ["tools", "projections"]);
    let schema: Value = serde_json::from_str(decl.config_schema.as_str()).unwrap();
    assert_eq!(schema, tool_todo::config_schema());
    assert_eq!(schema["required"], serde_json::json!(["allowParallelInProgress"]));
}
