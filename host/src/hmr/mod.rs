//! Hot reload for `cordis dev` (DESIGN §9).
//!
//! - The composition is watched: entries are diffed by `id`, and only
//!   entries whose `name`, `config` or `disabled` changed are applied again;
//!   new entries are added and removed ones disposed. A change that fails
//!   validation leaves the running fiber as it was and says why, with the
//!   line.
//! - Every loaded library file is watched. Once the file is complete and
//!   stable (same size and mtime across the debounce, ELF headers and
//!   sections inside the file), it is copied to a content-named file under
//!   a sealed in-memory copy, loaded and checked there, applied for every entry
//!   that uses it, and only then are the old fibers disposed. If anything
//!   fails, the old version keeps serving. Unchanged content does nothing.
//! - Swaps hold the tool registry's gate: calls in flight finish on the old
//!   version, calls arriving meanwhile wait.
//! - Sessions, their logs and other plugins are untouched; projections of a
//!   reloaded plugin are folded again from the log on next use.
//!
//! A library can never be unloaded (`abi_stable` leaks it by design), so each
//! reload keeps one more mapping of a library alive; the number of reloads is
//! capped by [`DevOptions::max_reloads`].

pub mod console;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use crate::loader::{library, Composition, Entry, EntryState, Layer, Loader, Prepared};
use crate::runtime::{BootError, Host, HostOptions};

pub use watch::watch;

/// Settings of a dev host.
#[derive(Debug, Clone)]
pub struct DevOptions {
    /// How long changes must be quiet before they are handled.
    pub debounce: Duration,
    /// How long a changed library may take to become complete.
    pub settle_timeout: Duration,
    /// Library reloads after which library changes are refused (each keeps
    /// a mapping); restart `cordis dev` to reset. Composition reloads do not
    /// count.
    pub max_reloads: u64,
}

impl Default for DevOptions {
    fn default() -> Self {
        DevOptions { debounce: Duration::from_millis(150), settle_timeout: Duration::from_secs(60), max_reloads: 100 }
    }
}

/// What one handled change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to do (same content, or no entry changed).
    Unchanged,
    /// These entries were applied again (or added or removed).
    Reloaded(Vec<String>),
    /// Nothing changed, for this reason.
    Refused(String),
}

/// A host that reloads its composition and libraries while it runs.
pub struct DevHost {
    /// The host.
    pub host: Host,
    composition: Mutex<Composition>,
    layers: Vec<Layer>,
    options: DevOptions,
    reloads: AtomicU64,
    library_reloads: AtomicU64,
    /// The content hash of the last build refused per library, so one
    /// broken build is reported once, however many events it causes.
    refused: Mutex<HashMap<PathBuf, u64>>,
    /// The file (device, inode, size, modification time) whose change was
    /// last refused, per library.
    refused_files: Mutex<HashMap<PathBuf, library::FileIdentity>>,
    /// Called after every applied reload (`cordis mcp --watch` tells its
    /// clients when the tool catalog changed).
    listeners: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

impl DevHost {
    /// Boots `options`, every library running from a sealed private copy
    /// (see [`crate::loader::LibraryCache::private_copies`]). Copies an
    /// earlier version left on disk (`<state dir>/hmr/`) are removed.
    ///
    /// # Errors
    /// [`BootError`].
    pub fn boot(mut options: HostOptions, dev: DevOptions) -> Result<DevHost, BootError> {
        let composition_dir = options.composition.parent().map(Path::to_path_buf).unwrap_or_default();
        let composition_dir = if composition_dir.as_os_str().is_empty() { PathBuf::from(".") } else { composition_dir };
        let state_dir = options.state_dir.clone().unwrap_or_else(|| composition_dir.join(".cordis"));
        clean_copies(&state_dir.join("hmr"));
        options.private_copies = true;
        options.state_dir = Some(state_dir);
        let host = Host::boot(&options)?;
        let composition = Composition::compose(&options.composition, &options.layers)?;
        Ok(DevHost { host, composition: Mutex::new(composition), layers: options.layers.clone(), options: dev, reloads: AtomicU64::new(0), library_reloads: AtomicU64::new(0), refused: Mutex::new(HashMap::new()), refused_files: Mutex::new(HashMap::new()), listeners: Mutex::new(Vec::new()) })
    }

    /// The number of reloads applied so far.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::SeqCst)
    }

    fn note(&self, message: String) {
        eprintln!("cordis dev: {message}");
    }

    /// The composition file.
    pub fn composition_path(&self) -> PathBuf {
        PathBuf::from(&self.composition.lock().unwrap_or_else(|e| e.into_inner()).file)
    }

    /// Every file the composition was composed from: the root file, its
    /// patch layers and the files it includes.
    pub fn composition_files(&self) -> Vec<PathBuf> {
        self.composition.lock().unwrap_or_else(|e| e.into_inner()).sources.iter().map(|s| s.path.clone()).collect()
    }

    /// The library files (sources, not copies) live entries use.
    pub fn library_sources(&self) -> Vec<PathBuf> {
        let mut sources: Vec<PathBuf> = self.host.loader.live_libraries().into_iter().map(|(_, p)| p).collect();
        sources.sort();
        sources.dedup();
        sources
    }

    /// Re-reads the composition and applies what changed.
    pub fn composition_changed(&self) -> Outcome {
        let path = self.composition_path();
        let next = match Composition::compose(&path, &self.layers) {
            Ok(c) => c,
            Err(e) => return self.refuse(format!("the composition was not reloaded: {e}")),
        };
        // An include whose file does not read would drop every entry it
        // mounted: keep the last good tree instead.
        let broken: Vec<String> =
            next.walk().into_iter().filter(|e| e.is_container() && !e.problems.is_empty()).flat_map(|e| e.problems.clone()).collect();
        if !broken.is_empty() {
            return self.refuse(format!("the composition was not reloaded: {}; the running version is kept", broken.join("; ")));
        }
        let mut wanted: BTreeMap<String, Entry> = BTreeMap::new();
        let mut problems = Vec::new();
        collect_enabled(&self.host.loader, &next.entries, false, &mut wanted, &mut problems);
        let live: Vec<String> = self.host.loader.active_ids();
        let remove: Vec<String> = live.iter().filter(|id| !wanted.contains_key(*id)).cloned().collect();
        let mut prepared: Vec<(Entry, Prepared)> = Vec::new();
        let mut waiting: Vec<String> = Vec::new();
        for id in self.host.loader.pending_ids() {
            if !wanted.contains_key(&id) {
                self.host.loader.forget_pending(&id);
            }
        }
        for (id, entry) in &wanted {
            // Unchanged rows keep running: an expression's value can change
            // only with a provider it reads, and the loader restarts the
            // consumers of a provider it swaps.
            if self.host.loader.live_entry(id).is_some_and(|current| current.same_setup(entry)) {
                continue;
            }
            if !entry.problems.is_empty() {
                problems.extend(entry.problems.iter().cloned());
                continue;
            }
            match self.host.loader.prepare(entry, None) {
                Ok(p) => prepared.push((entry.clone(), p)),
                // Its service may come with this very change: it starts
                // once the swap is done, if it can.
                Err(EntryState::Waiting(m)) if self.host.loader.live_entry(id).is_none() => {
                    self.host.loader.wait(entry.clone());
                    waiting.extend(m);
                }
                Err(EntryState::Failed(m) | EntryState::Waiting(m) | EntryState::Missing(m)) => problems.extend(m),
                Err(_) => {}
            }
        }
        for p in &problems {
            self.note(format!("{p} (the running version is kept)"));
        }
        if prepared.is_empty() && remove.is_empty() {
            for m in &waiting {
                self.note(m.clone());
            }
            *self.composition.lock().unwrap_or_else(|e| e.into_inner()) = next;
            return if problems.is_empty() { Outcome::Unchanged } else { Outcome::Refused(problems.join("\n")) };
        }
        let touched: Vec<String> = prepared.iter().map(|(e, _)| e.id.clone()).chain(remove.iter().cloned()).collect();
        match self.host.loader.swap(prepared, &remove) {
            Ok(restarted) => {
                let touched: Vec<String> = touched.into_iter().chain(restarted).collect();
                let pending = self.host.loader.pending_ids();
                for m in waiting.iter().filter(|m| pending.iter().any(|w| m.contains(&format!("entry {w}:")))) {
                    self.note(m.clone());
                }
                *self.composition.lock().unwrap_or_else(|e| e.into_inner()) = next;
                self.reloads.fetch_add(1, Ordering::SeqCst);
                self.note(format!("composition reloaded: {}", touched.join(", ")));
                self.reloaded();
                Outcome::Reloaded(touched)
            }
            Err(e) => self.refuse(format!("the composition change was not applied ({e}); the running version is kept")),
        }
    }

    /// Loads the new content of library `source` and swaps every entry
    /// that uses it. A change refused once is not reported again: one file
    /// (same inode, size and modification time) gets one notice, however
    /// many watch events it causes.
    pub fn library_changed(&self, source: &Path) -> Outcome {
        let identity = library::file_identity(source);
        if identity.is_some() && self.refused_files.lock().unwrap_or_else(|e| e.into_inner()).get(source) == identity.as_ref() {
            return Outcome::Unchanged;
        }
        let outcome = self.reload_library(source);
        let mut refused = self.refused_files.lock().unwrap_or_else(|e| e.into_inner());
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

    fn reload_library(&self, source: &Path) -> Outcome {
        if self.library_reloads.load(Ordering::SeqCst) >= self.options.max_reloads {
            return self.refuse(format!(
                "{} was not reloaded: {} reloads reached the limit (each keeps a library mapping alive); restart cordis dev",
                source.display(),
                self.options.max_reloads
            ));
        }
        let loader = &self.host.loader;
        let users: Vec<String> =
            loader.live_libraries().into_iter().filter(|(_, p)| p == source).map(|(id, _)| id).collect();
        if users.is_empty() {
            return Outcome::Unchanged;
        }
        let old = loader.libraries().get(source);
        let fresh = match loader.libraries().reload(source) {
            Ok(None) => return Outcome::Unchanged,
            Ok(Some(lib)) => lib,
            Err(e) => return self.refuse(format!("{e}; the previous version keeps serving")),
        };
        let restore = || {
            if let Some(old) = &old {
                loader.libraries().set(old.clone());
            }
        };
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        if fresh.hash.is_some() && refused.get(source) == fresh.hash.as_ref() {
            restore();
            return Outcome::Unchanged;
        }
        if let Some(hash) = fresh.hash {
            refused.insert(source.to_path_buf(), hash);
        }
        drop(refused);
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
        let mut prepared = Vec::new();
        for id in &users {
            let Some(entry) = loader.live_entry(id) else { continue };
            match loader.prepare(&entry, Some(fresh.clone())) {
                Ok(p) => prepared.push((entry, p)),
                Err(EntryState::Failed(m) | EntryState::Waiting(m) | EntryState::Missing(m)) => {
                    if let Some(old) = old {
                        loader.libraries().set(old);
                    }
                    return self.refuse(format!("{}; the previous version keeps serving", m.join("; ")));
                }
                Err(_) => {}
            }
        }
        match loader.swap(prepared, &[]) {
            Ok(restarted) => {
                let users: Vec<String> = users.into_iter().chain(restarted).collect();
                self.refused.lock().unwrap_or_else(|e| e.into_inner()).remove(source);
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
                self.refuse(format!("{e}; the previous version keeps serving"))
            }
        }
    }

    /// Calls `listener` after every reload that was applied (composition or
    /// library), on the thread that applied it.
    pub fn on_reload(&self, listener: impl Fn() + Send + Sync + 'static) {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(listener));
    }

    fn reloaded(&self) {
        for listener in self.listeners.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            listener();
        }
    }

    fn refuse(&self, message: String) -> Outcome {
        self.note(message.clone());
        Outcome::Refused(message)
    }

    /// The live entries, their plugin and library, as JSON.
    pub fn status(&self) -> Value {
        let loader = &self.host.loader;
        let entries: Vec<Value> = loader
            .active_ids()
            .into_iter()
            .filter_map(|id| {
                loader.with_active(&id, |a| {
                    serde_json::json!({
                        "id": id,
                        "plugin": a.picked.decl.name.as_str(),
                        "fiber": a.fiber.owner().fiber,
                        "library": a.library.source.display().to_string(),
                        "copy": a.library.path.display().to_string(),
                        "config": a.config,
                    })
                })
            })
            .collect();
        serde_json::json!({"reloads": self.reloads(), "entries": entries, "waiting": loader.pending_ids()})
    }
}

/// Enabled, problem-free or not, non-container entries by id (a disabled
/// group disables its children; `!!js` switches are evaluated now, as at
/// every mount decision, and one that fails is reported in `problems`).
fn collect_enabled(loader: &Loader, entries: &[Entry], parent_disabled: bool, out: &mut BTreeMap<String, Entry>, problems: &mut Vec<String>) {
    for e in entries {
        let own = match loader.disabled(e) {
            Ok(d) => d,
            Err(message) => {
                problems.push(message);
                continue;
            }
        };
        let disabled = parent_disabled || own;
        if e.is_container() {
            collect_enabled(loader, &e.children, disabled, out, problems);
        } else if !disabled {
            out.insert(e.id.clone(), e.clone());
        }
    }
}

/// Removes the on-disk library copies an earlier version of `cordis dev`
/// kept, and their folder.
fn clean_copies(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let _ = std::fs::remove_file(entry.path());
    }
    let _ = std::fs::remove_dir(dir);
}

/// Waits until `path` stops changing (the same size and mtime across
/// `quiet`), then checks it is a complete library (ELF headers, segments and
/// sections inside the file).
///
/// # Errors
/// When the settled file is not a complete library (a later change is
/// handled again), or it keeps changing past `timeout`.
pub fn wait_until_complete(path: &Path, quiet: Duration, timeout: Duration) -> Result<(), String> {
    let start = std::time::Instant::now();
    let stamp = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.len(), m.modified().ok()));
    loop {
        let before = stamp(path);
        std::thread::sleep(quiet);
        let after = stamp(path);
        match (&before, &after) {
            (Some(b), Some(a)) if b == a => return library::check_elf(path).map_err(|e| e.to_string()),
            (None, None) => return Err(format!("{} was removed", path.display())),
            _ => {}
        }
        if start.elapsed() > timeout {
            return Err(format!("{} was still changing after {:?}", path.display(), timeout));
        }
    }
}

/// A map from watched file paths to what they are.
pub(crate) fn targets(dev: &DevHost) -> HashMap<PathBuf, bool> {
    let mut map = HashMap::new();
    for file in dev.composition_files() {
        map.insert(file.canonicalize().unwrap_or(file), true);
    }
    for lib in dev.library_sources() {
        map.insert(lib, false);
    }
    map
}
