//! Where things are: the cargo target folder the running binary belongs to,
//! the compiled plugin libraries and binaries in it, and a scratch folder on
//! the same disk (not `/tmp`, which may be a RAM disk where `fdatasync` costs
//! nothing).

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// `target/<profile>` of the running binary: its own folder, or the parent
/// of `deps/` for bench and test binaries.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().map(Path::to_path_buf).unwrap_or(dir)
    } else {
        dir
    }
}

/// The compiled plugin library of crate `name` (`tool-todo` →
/// `libtool_todo.so`): the newer of the copy in `target/<profile>` and the
/// one in `deps/`. A test fixture (`fixture-*`) is built on first use by
/// `cordis_tests::fixture_library`, which panics when that build fails.
///
/// # Errors
/// A message when neither exists.
pub fn library(name: &str) -> Result<PathBuf, String> {
    if name.starts_with("fixture-") {
        return Ok(cordis_tests::fixture_library(name, &target_dir()));
    }
    let file = cordis_engine::loader::resolve::library_file_name(name);
    let dir = target_dir();
    let candidates = [dir.join(&file), dir.join("deps").join(&file)];
    candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone())))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
        .ok_or_else(|| format!("{file} is not built in {}; run `cargo build --workspace` (with --release for the benchmarks) first", dir.display()))
}

/// A binary of this workspace in `target/<profile>`.
///
/// # Errors
/// A message when it is not built.
pub fn binary(name: &str) -> Result<PathBuf, String> {
    let path = target_dir().join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{} is not built; run `cargo build --workspace` (with --release for the benchmarks) first", path.display()))
    }
}

/// A scratch folder for generated logs and durable sessions:
/// `target/<profile>/bench-scratch/<what>`, created empty when `fresh`.
///
/// # Errors
/// A message when it cannot be created.
pub fn scratch(what: &str, fresh: bool) -> Result<PathBuf, String> {
    let dir = target_dir().join("bench-scratch").join(what);
    if fresh && dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}
