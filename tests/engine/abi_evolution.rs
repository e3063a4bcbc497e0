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
/// processes while its bytes are the same; a library put at the same path
/// afterwards (here one whose layout differs), by a rename or written in
/// place through a shared mapping (which leaves the file's times as they
/// were), is checked, and refused, as if nothing had been remembered.
#[test]
fn a_library_checked_before_is_remembered_until_its_bytes_change() {
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

    // The same bytes again, in a new file: remembered.
    install(&lib_path("tool-todo"));
    let (code, text) = check();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("layout check: Remembered"), "{text}");

    // Written through a shared mapping whose pages are already dirty, a
    // file keeps its modification and status-change times.
    let old = std::fs::read(lib_path("fixture-old-abi")).unwrap();
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&installed).unwrap();
    let len = usize::try_from(file.metadata().unwrap().len()).unwrap();
    assert!(old.len() <= len, "the old-ABI fixture ({} bytes) fits in libtool_todo.so ({len})", old.len());
    // SAFETY: a shared mapping of the whole file, unmapped below; only this
    // test touches the file meanwhile.
    let map = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED,
            &file,
            0,
        )
        .unwrap()
    };
    // SAFETY: `map` is `len` writable bytes until the `munmap` below.
    let bytes = unsafe { std::slice::from_raw_parts_mut(map.cast::<u8>(), len) };
    for page in (0..len).step_by(4096) {
        // SAFETY: in bounds; a volatile write so every page is dirtied.
        unsafe { std::ptr::write_volatile(&mut bytes[page], bytes[page]) };
    }
    let (code, text) = check();
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("layout check: Remembered"), "{text}");
    bytes[..old.len()].copy_from_slice(&old);
    bytes[old.len()..].fill(0);
    let (code, text) = check();
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("its layout differs from this host's"), "{text}");
    assert!(!text.contains("layout check: Remembered"), "{text}");
    // SAFETY: `map` came from `mmap` with this length; `bytes` is not used again.
    unsafe { rustix::mm::munmap(map, len).unwrap() };
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
}
