//! Hot reload for `cordis dev`.
//!
//! - The composition is watched: entries are diffed by `id`, and only
//!   entries whose `name`, `config` or `disabled` changed are applied again;
//!   new entries are added and removed ones disposed. A change that fails
//!   validation leaves the running fiber as it was and says why, with the
//!   line.
//! - Every loaded library file is watched. Once the file is complete and
//!   stable (same size and mtime across the debounce, ELF headers and
//!   sections inside the file), it is copied into a sealed in-memory copy
//!   (see [`crate::loader::LibraryCache`]), loaded and checked there, applied for every entry
//!   that uses it, and only then are the old fibers disposed. If anything
//!   fails, the old version keeps serving. Unchanged content does nothing.
//! - Swaps hold the tool registry's gate: calls in flight finish on the old
//!   version, calls arriving meanwhile wait.
//! - Sessions, their logs and other plugins are untouched; projections of a
//!   reloaded plugin are folded again from the log on next use.
//!
//! A library can never be unloaded (`abi_stable` leaks it by design), so each
//! reload keeps one more mapping of a library alive. When what they keep
//! would pass [`DevOptions::memory_budget`], the host restarts itself in
//! place instead, on the same session ([`restart`]); there is no limit on
//! the number of reloads.

mod budget;
mod composition;
pub mod console;
mod libraries;
pub mod restart;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use libraries::{canonical_even_if_gone, clean_copies, lead};

use crate::loader::{library, resolve, Composition, Entry, EntryState, Layer, Loader, ResolveError, Target};
use crate::runtime::{BootError, Host, HostOptions};

use cordis_sync::LockExt;
pub use watch::watch;

/// Settings of a dev host.
#[derive(Debug, Clone)]
pub struct DevOptions {
    /// How long changes must be quiet before they are handled.
    pub debounce: Duration,
    /// How long the composition's files (the root file, its patch layers
    /// and includes) must stop changing before a change to one is applied:
    /// an editor that writes a file in place in parts, with pauses shorter
    /// than this, gives one reload to the final content. Any change to a
    /// watched file during the wait starts it again. Default
    /// [`DEFAULT_SETTLE`].
    pub settle: Duration,
    /// How long a changed library may take to become complete.
    pub settle_timeout: Duration,
    /// Memory, in bytes, that replaced libraries may keep: when loading a
    /// new build would take either the bytes of the builds this process
    /// has loaded since it started or the growth of its resident memory
    /// since then (counting the new build twice, for its mapping and what
    /// its `apply` allocates) past it, the host restarts itself in place
    /// instead ([`restart`]), unless it has loaded no build yet (nothing to
    /// let go of). Default [`DEFAULT_MEMORY_BUDGET`].
    pub memory_budget: u64,
    /// What an earlier process of this `cordis dev` handed over, when this
    /// one is a restart.
    pub handover: Option<restart::Handover>,
    /// Whether the host may restart in place when the budget is reached:
    /// only a host driven by the dev console ([`console::run`]), which
    /// makes the restart between two commands (`cordis dev`). Without it
    /// (`cordis mcp --watch`, whose clients hold a connection), new builds
    /// keep loading in process and the budget is not enforced.
    pub restart_in_place: bool,
    /// What the host's notices on stderr start with (`cordis dev`,
    /// `cordis mcp`).
    pub label: &'static str,
}

/// The default [`DevOptions::settle`]: 500 ms.
pub const DEFAULT_SETTLE: Duration = Duration::from_millis(500);

/// The default [`DevOptions::memory_budget`]: 128 MiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 128 * 1024 * 1024;

impl Default for DevOptions {
    fn default() -> Self {
        DevOptions {
            debounce: Duration::from_millis(150),
            settle: DEFAULT_SETTLE,
            settle_timeout: Duration::from_secs(60),
            memory_budget: DEFAULT_MEMORY_BUDGET,
            handover: None,
            restart_in_place: false,
            label: "cordis dev",
        }
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
    /// Loading the change would pass the memory budget: the host restarts
    /// in place (between console commands) and handles it then.
    Restarting,
    /// The library was being written while it was copied (cut short, or
    /// changed during the copy): nothing changed; try again once the file
    /// has settled.
    Unsettled,
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
    /// Restarts in place so far (carried across them).
    restarts: u64,
    /// Bytes of the sealed copies reloads loaded in this process: each
    /// stays mapped for good (a library is never unloaded), so all but the
    /// running ones are what reloads keep.
    kept: AtomicU64,
    /// Resident memory when this process had booted.
    rss_at_boot: u64,
    /// Why a restart in place is due, once one is.
    restart_due: Mutex<Option<String>>,
    /// Signalled when a restart is due (the console waits on it beside its
    /// input).
    wake: OwnedFd,
    /// Held while a change is handled, so a restart never cuts one short.
    busy: Mutex<()>,
    /// The copy of the last build refused per library, so one broken
    /// build is reported once, however many events it causes.
    refused: Mutex<HashMap<PathBuf, library::SealedCopy>>,
    /// Per library no running entry uses, the last build that did not
    /// load when an entry was about to start on it, and why: the same
    /// build is not loaded (and mapped) again at every edit.
    refresh_refused: Mutex<HashMap<PathBuf, (library::SealedCopy, String)>>,
    /// Why the composition last did not read or compose, until it does.
    unreadable: Mutex<Option<String>>,
    /// The libraries whose last build loaded but was refused with the rows
    /// it would run with (its config schema or its `apply` rejected them):
    /// tried again when those rows are edited.
    refused_rows: Mutex<HashSet<PathBuf>>,
    /// Notices held back while a composition change may still be decided
    /// by a build waiting for it (`None`: notices are printed at once).
    held_notes: Mutex<Option<Vec<String>>>,
    /// The files the last composition read would read once they exist
    /// (kept apart from the running tree's, which a refused version does
    /// not replace).
    missing_while_refused: Mutex<Vec<PathBuf>>,
    /// The file (device, inode, size, modification time) whose change was
    /// last refused, per library, with a digest of its bytes: a file
    /// touched or copied again with the same bytes is not tried again.
    refused_files: Mutex<HashMap<PathBuf, (library::FileIdentity, u64)>>,
    /// The digest of the bytes of each file a waiting entry names that was
    /// there but did not load: the same bytes landing again (a `touch`, a
    /// copy of the same build) are not told as appeared nor tried again.
    refused_waiting: Mutex<HashMap<PathBuf, u64>>,
    /// Called after every applied reload (`cordis mcp --watch` tells its
    /// clients when the tool catalog changed).
    listeners: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// The last problem found per entry id (at boot, or when a composition
    /// change tried its row): for an entry that is not running, why not;
    /// for one that is, why its new row was not applied. A problem is
    /// printed when it is new, not again at every change of the file.
    problems: Mutex<HashMap<String, String>>,
    /// Per library source, the file found there after its last load, held
    /// open (see [`DevHost::hold_sources`]).
    held: Mutex<HashMap<PathBuf, std::fs::File>>,
    /// Held files whose path now names a newer build: closed by
    /// [`DevHost::release_replaced`] once changes are quiet.
    replaced: Mutex<Vec<std::fs::File>>,
}

/// A library file an entry is waiting for (see
/// [`DevHost::awaited_libraries`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Awaited {
    /// The folder it would appear in (it may not exist yet).
    pub folder: PathBuf,
    /// Its file name, or `None` when any plugin library there could be it
    /// (a package name, which a library declares).
    pub file: Option<String>,
}

impl Awaited {
    /// A library in `folder` (resolved when it exists, so that it compares
    /// with the canonical paths of file events).
    fn new(folder: &Path, file: Option<String>) -> Awaited {
        Awaited { folder: canonical_even_if_gone(folder), file }
    }

    /// The library file at `path`.
    fn file(path: &Path) -> Option<Awaited> {
        Some(Awaited::new(path.parent()?, Some(path.file_name()?.to_string_lossy().into_owned())))
    }

    /// The library file's path, when its name is known.
    pub fn file_path(&self) -> Option<PathBuf> {
        self.file.as_ref().map(|f| self.folder.join(f))
    }

    /// Whether canonical `path` is this library (or could be, for a
    /// package name).
    pub fn matches(&self, path: &Path) -> bool {
        let Some(name) = path.file_name().map(|n| n.to_string_lossy()) else { return false };
        path.parent() == Some(self.folder.as_path())
            && match &self.file {
                Some(file) => name == file.as_str(),
                None => name.ends_with(std::env::consts::DLL_SUFFIX),
            }
    }
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
        if let Some(handover) = &dev.handover {
            options.adopted_copies = handover.adopt_copies();
        }
        let host = Host::boot(&options)?;
        let composition = Composition::compose(&options.composition, &options.layers)?;
        let wake = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK)
            .map_err(|e| BootError::Store(cordis_session::StoreError::Unusable(format!("cannot create an eventfd: {e}"))))?;
        let carried = dev.handover.clone().unwrap_or_default();
        let problems = host
            .reports
            .iter()
            .filter_map(|r| match &r.state {
                EntryState::Failed(m) | EntryState::Waiting(m) | EntryState::Missing(m) => Some((r.id.clone(), m.join("; "))),
                _ => None,
            })
            .collect();
        Ok(DevHost {
            host,
            composition: Mutex::new(composition),
            layers: options.layers.clone(),
            reloads: AtomicU64::new(carried.reloads),
            library_reloads: AtomicU64::new(carried.library_reloads),
            restarts: carried.restarts,
            kept: AtomicU64::new(0),
            rss_at_boot: restart::resident_bytes().unwrap_or(0),
            restart_due: Mutex::new(None),
            wake,
            busy: Mutex::new(()),
            options: dev,
            refused: Mutex::new(HashMap::new()),
            refused_files: Mutex::new(HashMap::new()),
            refused_waiting: Mutex::new(HashMap::new()),
            refused_rows: Mutex::new(HashSet::new()),
            held_notes: Mutex::new(None),
            missing_while_refused: Mutex::new(Vec::new()),
            refresh_refused: Mutex::new(HashMap::new()),
            unreadable: Mutex::new(None),
            listeners: Mutex::new(Vec::new()),
            problems: Mutex::new(problems),
            held: Mutex::new(HashMap::new()),
            replaced: Mutex::new(Vec::new()),
        })
    }

    /// What the process this one replaced handed over, if this is a
    /// restart in place.
    pub fn handover(&self) -> Option<&restart::Handover> {
        self.options.handover.as_ref()
    }

    /// The number of restarts in place so far.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// The descriptor that becomes readable when a restart is due.
    pub fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.wake.as_fd()
    }

    /// Whether the composition on disk composes: a restart boots from it,
    /// so a half-edited one postpones restarts.
    pub(super) fn composition_composes(&self) -> bool {
        Composition::compose(&self.composition_path(), &self.layers).is_ok()
    }

    /// The number of reloads applied so far.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::SeqCst)
    }

    pub(super) fn note(&self, message: String) {
        match self.held_notes.lock_or_recover().as_mut() {
            Some(held) => held.push(message),
            None => eprintln!("{}: {message}", self.options.label),
        }
    }

    /// The composition file.
    pub fn composition_path(&self) -> PathBuf {
        PathBuf::from(&self.composition.lock_or_recover().file)
    }

    /// Every file the composition was composed from: the root file, its
    /// patch layers and the files it includes, and the files of those it
    /// would read that are not there now.
    pub fn composition_files(&self) -> Vec<PathBuf> {
        let composition = self.composition.lock_or_recover();
        // Files it would read if they were there are watched too: the
        // user's layer written later, an include not written yet.
        let refused = self.missing_while_refused.lock_or_recover().clone();
        composition.sources.iter().map(|s| s.path.clone()).chain(composition.missing.iter().cloned()).chain(refused).collect()
    }

    /// The library files (sources, not copies) live entries use.
    pub fn library_sources(&self) -> Vec<PathBuf> {
        let mut sources: Vec<PathBuf> = self.host.loader.live_libraries().into_iter().map(|(_, p)| p).collect();
        sources.sort();
        sources.dedup();
        sources
    }

    /// The symlinks on the way from the library names of live entries to
    /// the files they run from (`plugins/libx.so -> ../target/debug/libx.so`,
    /// a linked folder, a link to a link), each as its folder resolved and
    /// its name, so it compares with file events; also a named path whose
    /// file is gone. Making, re-pointing or removing one is a change of
    /// the entries that use it.
    pub fn named_libraries(&self) -> Vec<PathBuf> {
        let loader = &self.host.loader;
        let mut named: Vec<PathBuf> = loader
            .live_libraries()
            .into_iter()
            .filter_map(|(id, source)| {
                let lead = lead(&loader.live_entry(&id)?, loader.plugin_path())?;
                let renamed = (lead.named != source).then_some(lead.named);
                Some(lead.links.into_iter().chain(renamed))
            })
            .flatten()
            .collect();
        named.sort();
        named.dedup();
        named
    }

    /// Where the library of an enabled entry that is not running could
    /// appear, so that it loads once built: the file a `./path` name points
    /// to (and, through a symlink that points nowhere yet, the file it
    /// points to), `lib<name>.so` in every folder of the plugin path for a
    /// bare name, or any library there for a package name. A running entry
    /// whose row or link now names another file than the one it runs
    /// waits for that file the same way. Empty when every enabled entry runs as its row says
    /// or waits on something other than a file (a service, a bad config).
    pub fn awaited_libraries(&self) -> Vec<Awaited> {
        let awaited: BTreeSet<Awaited> = self.awaited_entries().into_iter().map(|(_, a)| a).collect();
        awaited.into_iter().collect()
    }

    /// [`DevHost::awaited_libraries`], each with the id of the entry
    /// waiting for it.
    pub fn awaited_entries(&self) -> Vec<(String, Awaited)> {
        let loader = &self.host.loader;
        let wanted = enabled_rows(loader, &self.composition.lock_or_recover().entries.clone());
        let pending: HashSet<String> = loader.pending_ids().into_iter().collect();
        let plugin_path = loader.plugin_path();
        let mut awaited: Vec<(String, Awaited)> = Vec::new();
        for entry in wanted.values().filter(|e| !pending.contains(&e.id)) {
            let running = loader.with_active(&entry.id, |a| a.library.source.clone());
            if let Some(lead) = lead(entry, plugin_path) {
                // Not running: a file not there yet, or there but not
                // loaded (a build that failed to load is retried when the
                // next one lands). Running: only when its row or a link now
                // names another file, which the library watch does not
                // cover.
                if running.is_none_or(|source| lead.target != source) {
                    awaited.extend([&lead.named, &lead.target].into_iter().filter_map(|p| Awaited::file(p)).map(|a| (entry.id.clone(), a)));
                }
                continue;
            }
            if running.is_some() {
                continue;
            }
            match resolve::resolve(&entry.name, &entry.base_dir, plugin_path) {
                // A bare name found, but not loaded.
                Ok(Target::Library { path, .. }) => awaited.extend(Awaited::file(&path).map(|a| (entry.id.clone(), a))),
                Ok(Target::Package { name }) | Err(ResolveError::NotFound { name, .. }) => {
                    // A bare name is looked for as its file first; a package
                    // name can be declared by any library.
                    let file = (!name.starts_with('@')).then(|| resolve::library_file_name(name.split('/').next().unwrap_or(&name)));
                    for (folder, _) in &plugin_path.dirs {
                        awaited.push((entry.id.clone(), Awaited::new(folder, file.clone())));
                    }
                }
                _ => {}
            }
        }
        awaited.sort();
        awaited.dedup();
        awaited
    }

    /// Calls `listener` after every reload that was applied (composition or
    /// library), on the thread that applied it.
    pub fn on_reload(&self, listener: impl Fn() + Send + Sync + 'static) {
        self.listeners.lock_or_recover().push(Box::new(listener));
    }

    pub(super) fn reloaded(&self) {
        for listener in self.listeners.lock_or_recover().iter() {
            listener();
        }
    }

    pub(super) fn refuse(&self, message: String) -> Outcome {
        self.note(message.clone());
        Outcome::Refused(message)
    }

    /// The live entries, their plugin and library, as JSON:
    /// `{"reloads", "restarts", "entries": [{"id", "plugin", "fiber",
    /// "library", "abi", "config", "status"?, "heldBack"?}], "waiting": [id],
    /// "notRunning": [{"id", "name", "reason"}]}`, where `heldBack` says why
    /// an entry's changed row was not applied, `status` is what the entry's
    /// tool source last reported (`{"level", "text"}`, for example an MCP
    /// server reconnecting), `waiting` lists the entries waiting for
    /// a service and `notRunning` the other enabled entries that are not
    /// running (a library missing or refused, a config refused), each with
    /// the reason last found.
    ///
    /// The reload count is read before the entries: it is bumped only once
    /// a swap is done, so a count of n comes with entries at least as new as
    /// the nth reload, never with the ones it replaced.
    ///
    /// Config values the plugin marks secret (`writeOnly` in its config
    /// schema, such as mcp-client's `headers` and `env`) are hidden; see
    /// [`DevHost::status_with`].
    pub fn status(&self) -> Value {
        self.status_with(false)
    }

    /// [`DevHost::status`], with the secret config values shown when
    /// `show_values` (the console's `status --show-values`).
    pub fn status_with(&self, show_values: bool) -> Value {
        let reloads = self.reloads();
        let loader = &self.host.loader;
        let tools = &self.host.services.tools;
        let enabled = enabled_rows(loader, &self.composition.lock_or_recover().entries.clone());
        let mut held = self.problems.lock_or_recover().clone();
        // Only rows that are not the ones running are held back.
        held.retain(|id, _| {
            enabled.get(id).is_some_and(|row| loader.live_entry(id).is_some_and(|live| !live.same_setup(row) || self.resolves_elsewhere(id, row)))
        });
        let entries: Vec<Value> = loader
            .active_ids()
            .into_iter()
            .filter_map(|id| {
                loader.with_active(&id, |a| {
                    let mut entry = serde_json::json!({
                        "id": id,
                        "plugin": a.picked.decl.name.as_str(),
                        "fiber": a.fiber.owner().fiber,
                        "library": a.library.source.display().to_string(),
                        "abi": a.library.abi.to_string(),
                        "config": if show_values { a.config.clone() } else { crate::loader::redact::redact(&a.config, &a.picked.config_schema) },
                    });
                    // What its tool source last said (an MCP connection's state).
                    if let Some(status) = tools.source_status(&id) {
                        entry["status"] = serde_json::json!(status);
                    }
                    // Its row in cordis.yml was changed, but not applied.
                    if let Some(why) = held.get(&id) {
                        entry["heldBack"] = Value::String(why.clone());
                    }
                    entry
                })
            })
            .collect();
        let pending = loader.pending_ids();
        let reasons = self.problems.lock_or_recover();
        let not_running: Vec<Value> = enabled
            .values()
            // The builtin store and compaction entries are the host's own:
            // configured at boot, never a loaded plugin.
            .filter(|e| {
                !crate::loader::persistence::is_persistence(&e.name)
                    && !crate::loader::compaction::is_compaction(&e.name)
                    && !crate::loader::acp::is_acp(&e.name)
            })
            .filter(|e| loader.live_entry(&e.id).is_none() && !pending.contains(&e.id))
            .map(|e| {
                let reason = reasons.get(&e.id).cloned().unwrap_or_else(|| "not loaded".to_string());
                serde_json::json!({"id": e.id, "name": e.name, "reason": reason})
            })
            .collect();
        serde_json::json!({"reloads": reloads, "restarts": self.restarts, "entries": entries, "waiting": pending, "notRunning": not_running})
    }
}

/// Enabled, problem-free or not, non-container entries by id (a disabled
/// group disables its children; `!!js` switches are evaluated now, as at
/// every mount decision, and one that fails is reported in `problems`).
/// The entries of `composition` that are not groups or includes, in the
/// file's order.
pub(super) fn leaves(composition: &Composition) -> impl Iterator<Item = &Entry> {
    composition.walk().into_iter().filter(|e| !e.is_container())
}

/// The enabled leaf entries of `entries` by id (see [`collect_enabled`]);
/// a `disabled` expression that fails leaves its entry out.
pub(super) fn enabled_rows(loader: &Loader, entries: &[Entry]) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    collect_enabled(loader, entries, false, &mut out, &mut Vec::new());
    out
}

pub(super) fn collect_enabled(
    loader: &Loader,
    entries: &[Entry],
    parent_disabled: bool,
    out: &mut BTreeMap<String, Entry>,
    problems: &mut Vec<String>,
) {
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
