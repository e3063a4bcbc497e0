//! Reloading a plugin library: a changed file, once complete and stable,
//! copied, loaded and checked, applied for every entry that uses it, and
//! only then the old fibers disposed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use cordis_sync::LockExt;

use crate::loader::{library, resolve, Entry, EntryState, ResolveError, Target};

use super::enabled_rows;
use super::{DevHost, Outcome};

impl DevHost {
    /// Loads the new content of library `source` and swaps every entry
    /// that uses it. A change refused once is not reported again: one file
    /// (same inode, size and modification time) gets one notice, however
    /// many watch events it causes.
    pub fn library_changed(&self, source: &Path) -> Outcome {
        let _busy = self.busy.lock_or_recover();
        if self.restart_due().is_some() {
            return Outcome::Restarting;
        }
        let identity = library::file_identity(source);
        if identity.is_some() && self.refused_files.lock_or_recover().get(source) == identity.as_ref() {
            return Outcome::Unchanged;
        }
        let outcome = self.reload_library(source, false);
        self.hold_source(source);
        let mut refused = self.refused_files.lock_or_recover();
        match (&outcome, identity) {
            (Outcome::Refused(_), Some(id)) => {
                refused.insert(source.to_path_buf(), id);
            }
            (Outcome::Reloaded(_), _) => {
                refused.remove(source);
            }
            _ => {}
        }
        outcome
    }

    /// Loads the build at `source` for the entries running from it, each
    /// with its row as the composition reads now (the row it runs with if
    /// the new one does not validate). A build refused before is skipped
    /// unless `retry`.
    pub(super) fn reload_library(&self, source: &Path, retry: bool) -> Outcome {
        let loader = &self.host.loader;
        let users: Vec<String> = loader.live_libraries().into_iter().filter(|(_, p)| p == source).map(|(id, _)| id).collect();
        if users.is_empty() {
            return Outcome::Unchanged;
        }
        let old = loader.libraries().get(source);
        let sealed = match loader.libraries().changed_copy(source) {
            Ok(None) => return Outcome::Unchanged,
            Ok(Some(sealed)) => sealed,
            // Being written as it was copied: the writing brings more file
            // events, and a file that stays cut short is told by the
            // debounced check (after its grace), not at each write.
            Err(e @ library::LoadError::Incomplete { .. }) => {
                tracing::debug!("{e}");
                return Outcome::Unsettled;
            }
            Err(e) => return self.refuse(format!("{e}; the previous version keeps serving")),
        };
        if !retry {
            let refused = self.refused.lock_or_recover();
            if refused.get(source).is_some_and(|r| r.same_content(&sealed)) {
                return Outcome::Unchanged;
            }
        }
        // A new build: whether it suits the rows is found out again below.
        self.refused_rows.lock_or_recover().remove(source);
        if let Some(reason) = self.over_budget(sealed.len()) {
            if self.composition_composes() {
                *self.restart_due.lock_or_recover() = Some(reason);
                // Wakes the console, which restarts between two commands.
                let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
                return Outcome::Restarting;
            }
            self.note(format!("{reason}: a restart is due, but the composition does not compose now; loading {} in this process", source.display()));
        }
        let fresh = match loader.libraries().load_copy(source, sealed.clone()) {
            Ok(lib) => lib,
            Err(e) => {
                self.kept.fetch_add(sealed.len(), Ordering::SeqCst);
                self.refused.lock_or_recover().insert(source.to_path_buf(), sealed);
                return self.refuse(format!("{e}; the previous version keeps serving"));
            }
        };
        // Every copy loaded is mapped for good, also a refused one.
        self.kept.fetch_add(sealed.len(), Ordering::SeqCst);
        self.refused.lock_or_recover().insert(source.to_path_buf(), sealed);
        // The new build must still export the plugin each entry runs.
        for id in &users {
            let Some((was, export)) = loader.with_active(id, |a| (a.picked.decl.name.to_string(), a.export.clone())) else { continue };
            let now = library::unwrap_export(&fresh, export.as_deref()).map(|p| p.decl.name.to_string());
            if !now.as_ref().is_ok_and(|n| *n == was) {
                if let Some(old) = old {
                    loader.libraries().set(old);
                }
                let found = match now {
                    Ok(name) => format!("it exports `{name}` where entry {id} runs `{was}`"),
                    Err(e) => e.to_string(),
                };
                return self.refuse(format!("the new build of {} was not loaded: {found}; the previous version keeps serving", source.display()));
            }
        }
        let mut wanted = enabled_rows(loader, &self.composition.lock_or_recover().entries.clone());
        let mut prepared = Vec::new();
        let mut applied_rows = Vec::new();
        for id in &users {
            let Some(entry) = loader.live_entry(id) else { continue };
            // A row the running build refused may suit this one.
            let row = wanted.remove(id).filter(|row| row.name == entry.name && row.problems.is_empty() && !row.same_setup(&entry));
            if let Some(row) = row {
                if let Ok(p) = loader.prepare(&row, Some(fresh.clone())) {
                    applied_rows.push(id.clone());
                    prepared.push((row, p));
                    continue;
                }
            }
            match loader.prepare(&entry, Some(fresh.clone())) {
                Ok(p) => prepared.push((entry, p)),
                Err(EntryState::Failed(m) | EntryState::Waiting(m) | EntryState::Missing(m)) => {
                    if let Some(old) = old {
                        loader.libraries().set(old);
                    }
                    self.refused_rows.lock_or_recover().insert(source.to_path_buf());
                    return self.refuse(format!("{}; the previous version keeps serving", m.join("; ")));
                }
                Err(_) => {}
            }
        }
        match loader.swap(prepared, &[]) {
            Ok(restarted) => {
                let users: Vec<String> = users.into_iter().chain(restarted).collect();
                self.refused.lock_or_recover().remove(source);
                self.refused_rows.lock_or_recover().remove(source);
                let mut known = self.problems.lock_or_recover();
                for id in &applied_rows {
                    known.remove(id);
                }
                drop(known);
                // The copy now running was counted when it loaded; the one
                // it replaced stays mapped, which is what was counted.
                self.reloads.fetch_add(1, Ordering::SeqCst);
                self.library_reloads.fetch_add(1, Ordering::SeqCst);
                self.note(format!("reloaded {} for {}", source.display(), users.join(", ")));
                self.reloaded();
                Outcome::Reloaded(users)
            }
            Err(e) => {
                if let Some(old) = old {
                    loader.libraries().set(old);
                }
                // `apply` refused: with other rows it may not.
                self.refused_rows.lock_or_recover().insert(source.to_path_buf());
                self.refuse(format!("{e}; the previous version keeps serving"))
            }
        }
    }
}

/// Where an entry's library name leads, followed on disk.
pub(super) struct Lead {
    /// The file as named, its folder resolved (a symlink at the end not
    /// followed), so it compares with file events.
    pub(super) named: PathBuf,
    /// The file it leads to, every symlink followed, also through ones
    /// that point nowhere yet: the library's source path once it exists.
    pub(super) target: PathBuf,
    /// Every symlink met on the way (a linked folder, a link to a link),
    /// each as its folder resolved and its name: re-pointing any of them
    /// changes `target`.
    pub(super) links: Vec<PathBuf>,
}

/// How many symlinks [`lead`] follows, as Linux's path walk does (40).
pub(super) const MAX_LINKS_FOLLOWED: usize = 40;

/// Where `entry`'s name leads (see [`Lead`]), whether or not the file
/// exists; `None` for a builtin, a package name or a name not found.
pub(super) fn lead(entry: &Entry, plugin_path: &crate::loader::resolve::PluginPath) -> Option<Lead> {
    use std::ffi::OsString;
    use std::path::Component;
    // Only a path names a file; a bare name is looked up on the plugin
    // path when its entry starts, and keeps that file while it runs.
    let is_path = entry.name.starts_with("./") || entry.name.starts_with("../") || Path::new(&entry.name).is_absolute();
    if !is_path {
        return None;
    }
    let path = match resolve::resolve(&entry.name, &entry.base_dir, plugin_path) {
        Ok(Target::Library { path, .. }) => path,
        Err(ResolveError::NoSuchFile { path, .. }) => PathBuf::from(path),
        _ => return None,
    };
    let path = std::path::absolute(&path).ok()?;
    let push_parts = |todo: &mut Vec<OsString>, p: &Path| {
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => todo.push(n.to_os_string()),
                Component::ParentDir => todo.push(OsString::from("..")),
                _ => {}
            }
        }
    };
    let mut todo = Vec::new();
    push_parts(&mut todo, &path);
    // `at` is the path walked so far, never through a symlink.
    let mut at = PathBuf::from("/");
    let mut links = Vec::new();
    while let Some(part) = todo.pop() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() && links.len() < MAX_LINKS_FOLLOWED => {
                let to = std::fs::read_link(&next).ok()?;
                links.push(next);
                if to.is_absolute() {
                    at = PathBuf::from("/");
                }
                push_parts(&mut todo, &to);
            }
            _ => at = next,
        }
    }
    let named = match (path.parent().and_then(|p| p.canonicalize().ok()), path.file_name()) {
        (Some(folder), Some(name)) => folder.join(name),
        _ => path.clone(),
    };
    Some(Lead { named, target: at, links })
}

/// Removes the on-disk library copies an earlier version of `cordis dev`
/// kept, and their folder.
pub(super) fn clean_copies(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let _ = std::fs::remove_file(entry.path());
    }
    let _ = std::fs::remove_dir(dir);
}

/// How long a library cut short must stay unchanged before it is reported:
/// a build written in chunks with pauses longer than the debounce is not
/// reported at each pause.
pub const INCOMPLETE_GRACE: Duration = Duration::from_secs(1);

/// Waits until `path` stops changing (the same size and mtime across
/// `quiet`), then checks it is a complete library (ELF headers, segments and
/// sections inside the file). A file cut short
/// ([`library::LoadError::Incomplete`]) is waited on until it has not
/// changed for [`INCOMPLETE_GRACE`].
///
/// # Errors
/// When the settled file is not a complete library (a later change is
/// handled again), or it keeps changing past `timeout`.
pub fn wait_until_complete(path: &Path, quiet: Duration, timeout: Duration) -> Result<(), String> {
    let start = std::time::Instant::now();
    let stamp = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.len(), m.modified().ok()));
    let mut last_change = start;
    loop {
        let before = stamp(path);
        std::thread::sleep(quiet);
        let after = stamp(path);
        match (&before, &after) {
            (Some(b), Some(a)) if b == a => match library::check_elf(path) {
                Ok(()) => return Ok(()),
                // A writer pausing between chunks: it is given
                // INCOMPLETE_GRACE without a change before it is told.
                Err(library::LoadError::Incomplete { .. }) if last_change.elapsed() < INCOMPLETE_GRACE.max(quiet) => {}
                Err(e) => return Err(e.to_string()),
            },
            (None, None) => return Err(format!("{} was removed", path.display())),
            _ => last_change = std::time::Instant::now(),
        }
        if start.elapsed() > timeout {
            return Err(format!("{} was still changing after {:?}", path.display(), timeout));
        }
    }
}

/// `path` resolved, or, when it does not exist (now), its folder resolved
/// and its name joined to it: a deleted file must still match the event
/// that reports its deletion. A path whose folder does not exist either is
/// returned as it is.
pub(crate) fn canonical_even_if_gone(path: &Path) -> PathBuf {
    if let Ok(full) = path.canonicalize() {
        return full;
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (folder.canonicalize(), path.file_name()) {
        (Ok(folder), Some(name)) => folder.join(name),
        _ => path.to_path_buf(),
    }
}

/// A map from watched file paths to what they are.
pub(crate) fn targets(dev: &DevHost) -> HashMap<PathBuf, bool> {
    let mut map = HashMap::new();
    for file in dev.composition_files() {
        map.insert(canonical_even_if_gone(&file), true);
    }
    for lib in dev.library_sources() {
        map.insert(lib, false);
    }
    map
}
