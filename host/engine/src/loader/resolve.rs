//! Name resolution: what an entry's `name` refers to.
//!
//! - `cordis:X`, or a bare builtin name → the builtin `X`;
//! - `./path`, `../path` or an absolute path → a library file, relative to
//!   the composition's folder; `path/export` picks an export when `path` is
//!   the file;
//! - a bare `name` (or `name/export`) → `lib<name with - as _>.so`, searched
//!   in the plugin path;
//! - anything else that is a package name (`@deepseek-ai/dsh-tool-todo`,
//!   `@scope/pkg/export`), or a bare name with no such file → a package,
//!   found by the package names libraries on the plugin path declare
//!   ([`super::LibraryCache::find_package`]).

use std::path::{Path, PathBuf};

/// Builtin plugins: compiled into the host.
pub const BUILTINS: [&str; 2] = ["group", "include"];

/// What a name resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A builtin plugin.
    Builtin(String),
    /// An export of a plugin library.
    Library {
        /// The library file.
        path: PathBuf,
        /// The export named after `/`, if any.
        export: Option<String>,
        /// The library's own name (`tool-todo` for `libtool_todo.so`), which
        /// picks the default export.
        library: String,
    },
    /// A package name, looked up in the declarations of the libraries on
    /// the plugin path.
    Package {
        /// The name as written.
        name: String,
    },
}

/// A name that resolves to nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ResolveError {
    /// `cordis:X` with an unknown `X`.
    #[error("there is no builtin plugin `{0}` (builtins: {list})", list = BUILTINS.join(", "))]
    UnknownBuiltin(String),
    /// A path that names no file.
    #[error("no plugin library at {path} (resolved from `{name}` against {base}){dangling}")]
    NoSuchFile {
        /// The name as written.
        name: String,
        /// The resolved path.
        path: String,
        /// The folder it was resolved against.
        base: String,
        /// Empty, or, when `path` is a symlink that points where no file
        /// is: `; it links to <target>, where no file is yet`.
        dangling: String,
    },
    /// A bare name found nowhere in the plugin path.
    #[error("no library on the plugin path provides `{name}` (looked for {file}){hint}; searched {searched}. Build it (`cargo build --release`), pass --plugin-dir, or name the file with a ./relative path")]
    NotFound {
        /// The name as written.
        name: String,
        /// The file name searched for.
        file: String,
        /// The folders searched.
        searched: String,
        /// ` (did you mean `x`?)` when a library with a close name exists.
        hint: String,
    },
    /// A name that is not a valid plugin name.
    #[error("`{0}` is not a valid plugin name: use a package name (`@scope/name`, letters, digits, `-`, `_`, `.`), optionally `/export`, or a ./relative path")]
    InvalidName(String),
}

/// The folders searched for bare names, in order.
#[derive(Debug, Clone, Default)]
pub struct PluginPath {
    /// Each folder, with where it came from (`--plugin-dir`, ...).
    pub dirs: Vec<(PathBuf, &'static str)>,
}

impl PluginPath {
    /// The standard search path: `--plugin-dir` folders, `CORDIS_PLUGIN_PATH`
    /// (colon-separated), the build folders beside the composition
    /// (`target/<profile>`: first the profile the running `cordis` was built
    /// with, then `release`, then `debug`), then the folder of the host
    /// executable. The first folder holding the library wins.
    pub fn standard(plugin_dirs: &[PathBuf], composition_dir: &Path) -> PluginPath {
        let exe_dir = std::env::current_exe().ok().and_then(|p| p.parent().map(Path::to_path_buf));
        PluginPath::with_exe_dir(plugin_dirs, composition_dir, exe_dir.as_deref())
    }

    /// [`PluginPath::standard`] for a host executable in `exe_dir`.
    pub fn with_exe_dir(plugin_dirs: &[PathBuf], composition_dir: &Path, exe_dir: Option<&Path>) -> PluginPath {
        let mut dirs: Vec<(PathBuf, &'static str)> = plugin_dirs.iter().map(|d| (d.clone(), "--plugin-dir")).collect();
        if let Some(env) = std::env::var_os("CORDIS_PLUGIN_PATH") {
            dirs.extend(std::env::split_paths(&env).filter(|p| !p.as_os_str().is_empty()).map(|p| (p, "CORDIS_PLUGIN_PATH")));
        }
        let own_profile = exe_dir.and_then(cargo_profile_of);
        let mut profiles: Vec<String> = own_profile.into_iter().collect();
        for profile in ["release", "debug"] {
            if !profiles.iter().any(|p| p == profile) {
                profiles.push(profile.to_string());
            }
        }
        for profile in profiles {
            dirs.push((composition_dir.join("target").join(profile), BESIDE));
        }
        if let Some(exe_dir) = exe_dir {
            dirs.push((exe_dir.to_path_buf(), "the cordis executable's folder"));
        }
        PluginPath { dirs }
    }
}

/// The cargo profile a binary in `exe_dir` was built with: the folder's name
/// when it sits in a `target` folder (`target/release` → `release`), or in
/// a target triple's folder there (`target/x86_64-unknown-linux-gnu/debug`).
fn cargo_profile_of(exe_dir: &Path) -> Option<String> {
    let name = exe_dir.file_name()?.to_str()?;
    let parent = exe_dir.parent()?;
    let in_target = parent.file_name().is_some_and(|n| n == "target") || parent.parent().and_then(Path::file_name).is_some_and(|n| n == "target");
    in_target.then(|| name.to_string())
}

/// The label of the build folders beside the composition.
const BESIDE: &str = "beside the composition";

/// The file name a bare library name maps to: `lib<name with - as _>.so`.
pub fn library_file_name(name: &str) -> String {
    format!("{}{}{}", std::env::consts::DLL_PREFIX, name.replace('-', "_"), std::env::consts::DLL_SUFFIX)
}

/// Resolves an entry's `name`.
///
/// # Errors
/// [`ResolveError`] when the name is malformed or names nothing.
pub fn resolve(name: &str, composition_dir: &Path, plugin_path: &PluginPath) -> Result<Target, ResolveError> {
    if name.contains('\0') {
        return Err(ResolveError::InvalidName(name.replace('\0', "\\0")));
    }
    if let Some(builtin) = name.strip_prefix("cordis:") {
        return if BUILTINS.contains(&builtin) {
            Ok(Target::Builtin(builtin.to_string()))
        } else {
            Err(ResolveError::UnknownBuiltin(builtin.to_string()))
        };
    }
    if BUILTINS.contains(&name) {
        return Ok(Target::Builtin(name.to_string()));
    }
    if name.starts_with("./") || name.starts_with("../") || Path::new(name).is_absolute() {
        return resolve_path(name, composition_dir);
    }
    let (library, export) = match name.split_once('/') {
        Some((lib, export)) => (lib, Some(export)),
        None => (name, None),
    };
    let valid = |s: &str| !s.is_empty() && !s.starts_with('.') && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid(library) && export.is_none_or(valid) {
        let file = library_file_name(library);
        for (dir, _) in &plugin_path.dirs {
            let candidate = dir.join(&file);
            if candidate.is_file() {
                return Ok(Target::Library { path: candidate, export: export.map(str::to_string), library: library.to_string() });
            }
        }
    }
    if is_package_name(name) {
        return Ok(Target::Package { name: name.to_string() });
    }
    Err(ResolveError::InvalidName(name.to_string()))
}

/// Whether `name` has the shape of an npm-style package name, optionally
/// followed by `/export`: `pkg`, `@scope/pkg`, `@scope/pkg/export`.
pub fn is_package_name(name: &str) -> bool {
    let part = |s: &str| !s.is_empty() && !s.starts_with('.') && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'));
    let rest = match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, rest)) if part(scope) => rest,
            _ => return false,
        },
        None => name,
    };
    let parts: Vec<&str> = rest.split('/').collect();
    parts.len() <= 2 && parts.iter().all(|p| part(p))
}

/// The ways a package name can be read: the whole name as a package, then
/// (when it has a trailing `/export`) the package before it with that
/// export.
pub fn package_readings(name: &str) -> Vec<(String, Option<String>)> {
    let mut out = vec![(name.to_string(), None)];
    let slashes = name.matches('/').count();
    let has_export = if name.starts_with('@') { slashes == 2 } else { slashes == 1 };
    if has_export {
        if let Some((package, export)) = name.rsplit_once('/') {
            out.push((package.to_string(), Some(export.to_string())));
        }
    }
    out
}

/// The message for a package no library declares: where it looked, and the
/// closest library name when one is within two edits.
pub fn package_not_found(name: &str, plugin_path: &PluginPath) -> ResolveError {
    let searched = plugin_path.dirs.iter().map(|(d, from)| format!("{} ({from})", d.display())).collect::<Vec<_>>().join(", ");
    let bare = name.rsplit('/').next().unwrap_or(name);
    let hint = closest_library(bare, plugin_path).map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default();
    let file = if name.starts_with('@') {
        "a library declaring that package name".to_string()
    } else {
        format!("{} or a library declaring that package name", library_file_name(name.split('/').next().unwrap_or(name)))
    };
    ResolveError::NotFound { name: name.to_string(), file, searched, hint }
}

/// The library in the plugin path whose name is closest to `wanted`, if it
/// is within two edits.
fn closest_library(wanted: &str, plugin_path: &PluginPath) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for (dir, _) in &plugin_path.dirs {
        for file in library_files(dir) {
            let candidate = library_name_of(&file);
            let d = edit_distance(&wanted.replace('_', "-"), &candidate);
            if d <= 2 && best.as_ref().is_none_or(|(b, _)| d < *b) {
                best = Some((d, candidate));
            }
        }
    }
    best.map(|(_, name)| name)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

fn resolve_path(name: &str, composition_dir: &Path) -> Result<Target, ResolveError> {
    let full = if composition_dir == Path::new(".") { PathBuf::from(name) } else { composition_dir.join(name) };
    let (path, export) = if full.is_file() {
        (full, None)
    } else {
        match name.rsplit_once('/') {
            Some((lib, export)) if !export.is_empty() && composition_dir.join(lib).is_file() => (composition_dir.join(lib), Some(export.to_string())),
            _ => {
                let dangling = match dangling_end(&full) {
                    Some(end) => format!("; it links to {}, where no file is yet", end.display()),
                    None => String::new(),
                };
                return Err(ResolveError::NoSuchFile {
                    name: name.to_string(),
                    path: full.display().to_string(),
                    base: composition_dir.display().to_string(),
                    dangling,
                });
            }
        }
    };
    let library = library_name_of(&path);
    Ok(Target::Library { path, export, library })
}

/// Where the chain of symlinks starting at `path` ends, when `path` is a
/// symlink: the first path in it that is not a symlink (and does not
/// exist, for a `path` that names no file). `None` for a path that is not
/// a symlink. Follows at most 40 links, as Linux does.
pub fn dangling_end(path: &Path) -> Option<PathBuf> {
    let mut at = path.to_path_buf();
    let mut followed = 0;
    while let Ok(to) = std::fs::read_link(&at) {
        if followed == 40 {
            break;
        }
        at = match at.parent() {
            Some(folder) if to.is_relative() => folder.join(to),
            _ => to,
        };
        followed += 1;
    }
    (followed > 0).then_some(at)
}

/// The library files in `dir` (`lib*.so`), sorted by name; none when the
/// folder cannot be read.
pub fn library_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(listing) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = listing
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(std::env::consts::DLL_PREFIX) && f.ends_with(std::env::consts::DLL_SUFFIX))
        })
        .collect();
    files.sort();
    files
}

/// The library's own name from its file: `libtool_todo.so` → `tool-todo`.
pub fn library_name_of(path: &Path) -> String {
    let stem = path.file_name().and_then(|s| s.to_str()).unwrap_or_default();
    let stem = stem.strip_prefix(std::env::consts::DLL_PREFIX).unwrap_or(stem);
    let stem = stem.split(std::env::consts::DLL_SUFFIX).next().unwrap_or(stem);
    stem.replace('_', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_profile_is_searched_first_beside_the_composition() {
        let beside = |pp: &PluginPath| -> Vec<PathBuf> { pp.dirs.iter().filter(|(_, l)| *l == BESIDE).map(|(d, _)| d.clone()).collect() };
        let dir = Path::new("/srv/app");
        let debug = PluginPath::with_exe_dir(&[], dir, Some(Path::new("/srv/app/target/debug")));
        assert_eq!(beside(&debug), [dir.join("target/debug"), dir.join("target/release")]);
        let release = PluginPath::with_exe_dir(&[], dir, Some(Path::new("/srv/app/target/release")));
        assert_eq!(beside(&release), [dir.join("target/release"), dir.join("target/debug")]);
        let custom = PluginPath::with_exe_dir(&[], dir, Some(Path::new("/x/target/x86_64-unknown-linux-gnu/profiling")));
        assert_eq!(beside(&custom), [dir.join("target/profiling"), dir.join("target/release"), dir.join("target/debug")]);
        let installed = PluginPath::with_exe_dir(&[], dir, Some(Path::new("/usr/local/bin")));
        assert_eq!(beside(&installed), [dir.join("target/release"), dir.join("target/debug")]);
        assert_eq!(installed.dirs.last().map(|(d, _)| d.as_path()), Some(Path::new("/usr/local/bin")));
    }

    #[test]
    fn builtins_and_names() {
        let pp = PluginPath::default();
        assert_eq!(resolve("cordis:group", Path::new("."), &pp).unwrap(), Target::Builtin("group".into()));
        assert!(matches!(resolve("cordis:nope", Path::new("."), &pp), Err(ResolveError::UnknownBuiltin(_))));
        assert!(matches!(resolve("../../etc", Path::new("/nonexistent"), &pp), Err(ResolveError::NoSuchFile { .. })));
        assert!(matches!(resolve("a/../b", Path::new("."), &pp), Err(ResolveError::InvalidName(_))));
        assert!(matches!(resolve("bad\0name", Path::new("."), &pp), Err(ResolveError::InvalidName(_))));
        assert_eq!(resolve("tool-todo", Path::new("."), &pp).unwrap(), Target::Package { name: "tool-todo".into() });
        assert_eq!(
            resolve("@deepseek-ai/dsh-tool-todo", Path::new("."), &pp).unwrap(),
            Target::Package { name: "@deepseek-ai/dsh-tool-todo".into() }
        );
        assert!(matches!(resolve("@bad", Path::new("."), &pp), Err(ResolveError::InvalidName(_))));
        assert_eq!(resolve("cordis:include", Path::new("."), &pp).unwrap(), Target::Builtin("include".into()));
        assert_eq!(package_readings("@s/p/x"), [("@s/p/x".to_string(), None), ("@s/p".to_string(), Some("x".to_string()))]);
        assert_eq!(package_readings("@s/p"), [("@s/p".to_string(), None)]);
        assert_eq!(package_readings("p/x"), [("p/x".to_string(), None), ("p".to_string(), Some("x".to_string()))]);
    }

    #[test]
    fn finds_library_in_plugin_path_and_export() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(library_file_name("tool-todo")), b"x").unwrap();
        let pp = PluginPath { dirs: vec![(dir.path().to_path_buf(), "--plugin-dir")] };
        match resolve("tool-todo/tool-todo", Path::new("."), &pp).unwrap() {
            Target::Library { export, library, .. } => {
                assert_eq!(export.as_deref(), Some("tool-todo"));
                assert_eq!(library, "tool-todo");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(library_name_of(Path::new("/x/libtool_todo.so")), "tool-todo");
        let typo = package_not_found("tool-todoo", &pp).to_string();
        assert!(typo.contains("(did you mean `tool-todo`?)"), "{typo}");
    }
}
