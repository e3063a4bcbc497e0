//! The ABI's refusals, checked with real compiled libraries (docs/abi.md):
//!
//! - a library built against cordis-abi 0.x (the `old-version` fixture) is
//!   refused, naming its version and saying to rebuild against 1;
//! - a library whose declaration differs in layout from this host's (the
//!   `old-abi` fixture: one field more, as a 1.x release that broke the
//!   freeze would) is refused by the layout check before any of its code
//!   runs.
//!
//! What must load across versions is in the `abi_compat` tests.

use cordis_engine::loader::library;
use cordis_tests::{cordis_exe, library as lib_path};

/// A library built against cordis-abi 0.x is refused with a message that
/// names its version and says to rebuild it against 1.
#[test]
fn a_0_x_library_is_refused_with_a_rebuild_message() {
    let err = library::load_library(&lib_path("fixture-old-version")).expect_err("a 0.x library is refused");
    let text = err.to_string();
    assert!(text.contains("built against an incompatible plugin ABI"), "{text}");
    assert!(text.contains("it was built against cordis-abi 0.1"), "{text}");
    assert!(text.contains("rebuild it against cordis-abi 1"), "{text}");
    let _ = cordis_exe();
}

#[test]
fn a_field_added_to_a_plain_struct_is_refused_clearly() {
    let err = library::load_library(&lib_path("fixture-old-abi")).expect_err("a changed PluginDecl is refused");
    let text = err.to_string();
    assert!(text.contains("built against an incompatible plugin ABI"), "{text}");
    // One line naming where the layouts part and how, then what to do.
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.contains("its layout differs from this host's at PluginLibrary: type from package `fixture-old-abi`, expected `cordis-abi`"),
        "{text}"
    );
    assert!(text.contains("rebuild it against cordis-abi 1"), "{text}");
}

#[test]
fn a_library_with_the_root_symbol_but_no_header_is_not_a_plugin_library() {
    let err = library::load_library(&lib_path("fixture-foreign-header")).expect_err("a foreign header is refused");
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not a cordis plugin library (no cordis ABI header: it exports the root module's symbol over other data): \
             rebuild it against cordis-abi 1 with `cordis_abi::export_library!()`",
            lib_path("fixture-foreign-header").display()
        )
    );
}

/// A library that passed the layout check is not checked again by later
/// processes while neither it nor the host binary changed; a library put
/// at the same path afterwards (here one whose layout differs) is checked,
/// and refused, as if nothing had been remembered.
#[test]
fn a_library_checked_before_is_remembered_until_its_file_changes() {
    use std::time::{Duration, Instant};
    let started = Instant::now();
    let scratch = cordis_tests::Scratch::new();
    let plugins = scratch.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let installed = plugins.join("libtool_todo.so");
    let install = |from: &std::path::Path| {
        let next = plugins.join("next.tmp");
        std::fs::copy(from, &next).unwrap();
        std::fs::rename(&next, &installed).unwrap();
    };
    install(&lib_path("tool-todo"));
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n");
    let record = scratch.path().join("cache");
    let check = || {
        let out = scratch
            .command(&["--plugin-dir", "plugins", "check"])
            .env("CORDIS_CACHE_DIR", &record)
            .env("RUST_LOG", "cordis_engine::loader=debug")
            .output()
            .unwrap();
        let (stdout, stderr) = cordis_tests::text(&out);
        (out.status.code(), format!("{stdout}{stderr}"))
    };
    // A pass is remembered only for files that last changed 2 s ago or more.
    let (code, text) = check();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("layout check: Checked"), "{text}");
    assert!(!record.join("verified-layouts").exists(), "a library copied just now is not remembered yet");
    std::thread::sleep(Duration::from_millis(2_100));
    let (code, text) = check();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("layout check: Checked"), "{text}");
    let lines = std::fs::read_to_string(record.join("verified-layouts")).unwrap();
    assert_eq!(lines.lines().count(), 1, "{lines}");
    let (code, text) = check();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("layout check: Remembered"), "{text}");

    install(&lib_path("fixture-old-abi"));
    let (code, text) = check();
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("its layout differs from this host's"), "{text}");
    assert!(!text.contains("layout check: Remembered"), "{text}");

    // Back to the library that passed: a new file, so checked again.
    install(&lib_path("tool-todo"));
    let (code, text) = check();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("layout check: Checked"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
}
