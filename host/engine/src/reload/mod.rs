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

pub mod console;
pub mod restart;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use crate::loader::{library, resolve, Composition, Entry, EntryState, Layer, Loader, Prepared, ResolveError, Target};
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
    /// last refused, per library.
    refused_files: Mutex<HashMap<PathBuf, library::FileIdentity>>,
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

    /// Why a restart in place is due, if one is.
    pub fn restart_due(&self) -> Option<String> {
        self.restart_due.lock_or_recover().clone()
    }

    /// Restarts in place (see [`restart`]): waits for the change being
    /// handled and the calls in flight, then re-executes this program on
    /// `session`, handing over the running libraries and `input`, the
    /// console input read but not answered. Call it between two console
    /// commands. Returns only when the restart could not be made; the host
    /// then goes on in this process, loading new builds here.
    pub fn restart(&self, session: &str, input: &[u8]) -> String {
        let _changes = self.busy.lock_or_recover();
        let _calls = self.host.services.tools.exclusive();
        let reason = self.restart_due().unwrap_or_default();
        let handover = restart::Handover {
            session: session.to_string(),
            reloads: self.reloads(),
            library_reloads: self.library_reloads.load(Ordering::SeqCst),
            restarts: self.restarts + 1,
            copies: Vec::new(),
            input: None,
        };
        let copies = self.host.loader.libraries().copies();
        self.note(format!("restarting in place to let go of replaced plugin libraries ({reason}); session {session} continues"));
        let error = restart::exec(handover, &copies, input);
        // Still here: go on without restarting.
        self.kept.store(0, Ordering::SeqCst);
        *self.restart_due.lock_or_recover() = None;
        let message = format!("could not restart in place ({error}); going on in this process");
        self.note(message.clone());
        message
    }

    /// After a restart in place: handles whatever changed while it was
    /// made, the change that asked for it included, as ordinary reloads.
    pub fn catch_up(&self) {
        self.composition_changed();
        for source in self.library_sources() {
            self.library_changed(&source);
        }
    }

    /// Whether loading a new build of `len` bytes must wait for a restart:
    /// returns the reason. Never while this process has loaded no build
    /// since it started: a restart would have nothing to let go of.
    fn over_budget(&self, len: u64) -> Option<String> {
        let budget = self.options.memory_budget;
        let kept = self.kept.load(Ordering::SeqCst);
        if kept == 0 || !self.options.restart_in_place {
            return None;
        }
        let grown = restart::resident_bytes().map_or(0, |now| now.saturating_sub(self.rss_at_boot));
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        if kept.saturating_add(len) > budget || grown.saturating_add(len.saturating_mul(2)) > budget {
            return Some(format!(
                "{:.1} MiB kept by replaced libraries, resident memory {:.1} MiB above start, a new build of {:.1} MiB, budget {:.0} MiB",
                mib(kept),
                mib(grown),
                mib(len),
                mib(budget)
            ));
        }
        None
    }

    /// Whether the composition on disk composes: a restart boots from it,
    /// so a half-edited one postpones restarts.
    fn composition_composes(&self) -> bool {
        Composition::compose(&self.composition_path(), &self.layers).is_ok()
    }

    /// The number of reloads applied so far.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::SeqCst)
    }

    fn note(&self, message: String) {
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

    /// Forgets the problems found for entries `ids`, so that what happens
    /// to them next is told even if it is the same (a new build landed for
    /// them).
    pub fn forget_problems(&self, ids: &[String]) {
        let mut known = self.problems.lock_or_recover();
        for id in ids {
            known.remove(id);
        }
    }

    /// Re-reads the composition and applies what changed. A build of a
    /// library that was refused (say, its new config schema rejected the
    /// row it ran with) is tried again when the rows of the entries using
    /// it were edited, so a config change and a schema change reload in
    /// either order.
    pub fn composition_changed(&self) -> Outcome {
        let _busy = self.busy.lock_or_recover();
        if self.restart_due().is_some() {
            return Outcome::Restarting;
        }
        let mut edited = HashSet::new();
        // With a build waiting for its rows, what the running build says
        // of an edited row is told only if that build does not take it:
        // only the verdict that stands is shown.
        let hold = !self.refused_rows.lock_or_recover().is_empty();
        if hold {
            *self.held_notes.lock_or_recover() = Some(Vec::new());
        }
        let outcome = self.apply_composition(&mut edited);
        let held = if hold { self.held_notes.lock_or_recover().take().unwrap_or_default() } else { Vec::new() };
        let outcome = self.retry_refused_builds(outcome, &edited);
        let taken: Vec<String> = match &outcome {
            Outcome::Reloaded(ids) => ids.iter().map(|id| format!("entry {id}:")).collect(),
            _ => Vec::new(),
        };
        for message in held {
            if !(message.ends_with("(the running version is kept)") && taken.iter().any(|t| message.contains(t.as_str()))) {
                self.note(message);
            }
        }
        outcome
    }

    /// Tries again the builds refused for the rows their entries ran with,
    /// when those rows were `edited`; adds what they reloaded to
    /// `outcome`.
    fn retry_refused_builds(&self, outcome: Outcome, edited: &HashSet<String>) -> Outcome {
        if matches!(outcome, Outcome::Restarting) || edited.is_empty() {
            return outcome;
        }
        let waiting: Vec<PathBuf> = self.refused_rows.lock_or_recover().iter().cloned().collect();
        let live = self.host.loader.live_libraries();
        let mut retried = Vec::new();
        for source in waiting {
            if live.iter().any(|(id, p)| *p == source && edited.contains(id)) {
                if let Outcome::Reloaded(ids) = self.reload_library(&source, true) {
                    self.refused_files.lock_or_recover().remove(&source);
                    retried.extend(ids);
                }
            }
        }
        match outcome {
            _ if retried.is_empty() => outcome,
            Outcome::Reloaded(mut ids) => {
                ids.extend(retried);
                Outcome::Reloaded(ids)
            }
            _ => Outcome::Reloaded(retried),
        }
    }

    /// Makes sure the library `entry` names is loaded as its file is now,
    /// when no running entry uses it (a library a disabled or refused entry
    /// used stays loaded, and the watcher reloads only libraries in use):
    /// an entry enabled again after a rebuild runs the new build.
    ///
    /// # Errors
    /// Why the current file does not load; the entry is not started on the
    /// build loaded before.
    fn refresh_library(&self, entry: &Entry) -> Result<(), String> {
        let loader = &self.host.loader;
        let Some(source) = lead(entry, loader.plugin_path()).and_then(|l| l.target.canonicalize().ok()) else { return Ok(()) };
        if loader.libraries().get(&source).is_none() || loader.live_libraries().iter().any(|(_, p)| *p == source) {
            return Ok(());
        }
        let sealed = match loader.libraries().changed_copy(&source) {
            Ok(None) => return Ok(()),
            Ok(Some(sealed)) => sealed,
            Err(e) => return Err(format!("entry {}: {e}", entry.id)),
        };
        let mut refused = self.refresh_refused.lock_or_recover();
        if let Some((_, why)) = refused.get(&source).filter(|(copy, _)| copy.same_content(&sealed)) {
            return Err(format!("entry {}: {why}", entry.id));
        }
        self.kept.fetch_add(sealed.len(), Ordering::SeqCst);
        match loader.libraries().load_copy(&source, sealed.clone()) {
            Ok(_) => {
                refused.remove(&source);
                Ok(())
            }
            Err(e) => {
                refused.insert(source, (sealed, e.to_string()));
                Err(format!("entry {}: {e}", entry.id))
            }
        }
    }

    /// Whether live entry `id`, with row `entry`, would now load another
    /// library file than the one it runs from.
    fn resolves_elsewhere(&self, id: &str, entry: &Entry) -> bool {
        let loader = &self.host.loader;
        let Some(running) = loader.with_active(id, |a| a.library.source.clone()) else { return false };
        lead(entry, loader.plugin_path()).is_some_and(|lead| lead.target != running)
    }

    /// Applies the composition as it reads now; `edited` gets the ids of
    /// the running entries whose row changed in this edit and is not the
    /// one they run.
    fn apply_composition(&self, edited: &mut HashSet<String>) -> Outcome {
        let (previous, was_enabled) = {
            let composition = self.composition.lock_or_recover();
            let rows: HashMap<String, Entry> = leaves(&composition).map(|e| (e.id.clone(), e.clone())).collect();
            (rows, enabled_rows(&self.host.loader, &composition.entries))
        };
        let path = self.composition_path();
        let composed = Composition::compose(&path, &self.layers).map_err(|e| e.to_string()).and_then(|next| {
            // Files this version would read once they exist (an include
            // not written yet) are watched while the last good tree runs.
            *self.missing_while_refused.lock_or_recover() = next.missing.clone();
            // An include whose file does not read would drop every entry it
            // mounted: keep the last good tree instead.
            let broken: Vec<String> =
                next.walk().into_iter().filter(|e| e.is_container() && !e.problems.is_empty()).flat_map(|e| e.problems.clone()).collect();
            if broken.is_empty() {
                Ok(next)
            } else {
                Err(broken.join("; "))
            }
        });
        let mut unreadable = self.unreadable.lock_or_recover();
        let next = match composed {
            Ok(next) => {
                // Warnings this version brings (a patch that no longer
                // applies, a template-looking value) are told once.
                let told: HashSet<String> = self.composition.lock_or_recover().warnings.iter().cloned().collect();
                for w in next.warnings.iter().filter(|w| !told.contains(*w)) {
                    self.note(format!("warning: {w}"));
                }
                if unreadable.take().is_some() {
                    self.note(format!("the composition ({} with its layers and includes) reads again", path.display()));
                }
                next
            }
            // The same fault again (a save that did not fix it) is not
            // told again.
            Err(e) if unreadable.as_deref() == Some(e.as_str()) => return Outcome::Refused(e),
            Err(e) => {
                *unreadable = Some(e.clone());
                return self.refuse(format!("the composition was not reloaded: {e}; the running version is kept"));
            }
        };
        drop(unreadable);
        let mut wanted: BTreeMap<String, Entry> = BTreeMap::new();
        let mut problems = Vec::new();
        collect_enabled(&self.host.loader, &next.entries, false, &mut wanted, &mut problems);
        let live: Vec<String> = self.host.loader.active_ids();
        let remove: Vec<String> = live.iter().filter(|id| !wanted.contains_key(*id)).cloned().collect();
        for id in self.host.loader.pending_ids() {
            if !wanted.contains_key(&id) {
                self.host.loader.forget_pending(&id);
            }
        }
        self.problems.lock_or_recover().retain(|id, _| wanted.contains_key(id));
        // Expressions in `disabled` that failed to evaluate.
        for p in &problems {
            self.note(format!("{p} (the running version is kept)"));
        }
        // Entries whose `apply` failed in an earlier try of this change: the
        // rest of the change is tried again without them.
        let mut failed: HashMap<String, String> = HashMap::new();
        // In the file's order, as a fresh start applies them: of two new
        // entries that conflict, the first one written runs.
        // (Each id once: a duplicate id is a problem of its row.)
        let mut seen = HashSet::new();
        let order: Vec<&Entry> = leaves(&next).filter(|e| seen.insert(&e.id)).filter_map(|e| wanted.get(&e.id)).collect();
        loop {
            let mut problems = problems.clone();
            let mut prepared: Vec<(Entry, Prepared)> = Vec::new();
            let mut waiting: Vec<String> = Vec::new();
            let mut known = self.problems.lock_or_recover();
            let mut notes = Vec::new();
            for &entry in &order {
                let id = &entry.id;
                // Unchanged rows keep running: an expression's value can change
                // only with a provider it reads, and the loader restarts the
                // consumers of a provider it swaps.
                match self.host.loader.live_entry(id) {
                    // A row the same, but its name now resolving to another
                    // file (a symlink re-pointed), is a change.
                    Some(current) if current.same_setup(entry) && !self.resolves_elsewhere(id, entry) => {
                        // Back to the row it runs: a problem found before is
                        // told again if the row breaks again.
                        known.remove(id);
                        continue;
                    }
                    Some(_) if previous.get(id).is_none_or(|before| !before.same_setup(entry)) => {
                        edited.insert(id.clone());
                    }
                    Some(_) | None => {}
                }
                let found = if let Some(message) = failed.get(id) {
                    vec![message.clone()]
                } else if !entry.problems.is_empty() {
                    entry.problems.clone()
                } else if let Err(e) = self.refresh_library(entry) {
                    vec![e]
                } else {
                    match self.host.loader.prepare(entry, None) {
                        Ok(p) => {
                            prepared.push((entry.clone(), p));
                            continue;
                        }
                        // Its service may come with this very change: it starts
                        // once the swap is done, if it can.
                        Err(EntryState::Waiting(m)) if self.host.loader.live_entry(id).is_none() => {
                            self.host.loader.wait(entry.clone());
                            waiting.extend(m);
                            continue;
                        }
                        Err(EntryState::Failed(m) | EntryState::Waiting(m) | EntryState::Missing(m)) => m,
                        Err(_) => continue,
                    }
                };
                let reason = found.join("; ");
                if known.get(id) != Some(&reason) {
                    let outcome = if self.host.loader.live_entry(id).is_some() { "the running version is kept" } else { "the entry is not running" };
                    notes.extend(found.iter().map(|p| format!("{p} ({outcome})")));
                    known.insert(id.clone(), reason);
                }
                problems.extend(found);
            }
            drop(known);
            for n in notes {
                self.note(n);
            }
            if prepared.is_empty() && remove.is_empty() {
                for m in &waiting {
                    self.note(m.clone());
                }
                *self.composition.lock_or_recover() = next;
                return if problems.is_empty() { Outcome::Unchanged } else { Outcome::Refused(problems.join("\n")) };
            }
            let pending_before = self.host.loader.pending_ids();
            let touched: Vec<String> = prepared.iter().map(|(e, _)| e.id.clone()).chain(remove.iter().cloned()).collect();
            let (changed, added): (Vec<String>, Vec<String>) =
                prepared.iter().map(|(e, _)| e.id.clone()).partition(|id| self.host.loader.live_entry(id).is_some());
            match self.host.loader.swap(prepared, &remove) {
                Ok(restarted) => {
                    // Rows still there were disabled rather than removed.
                    let rows: HashSet<&String> = leaves(&next).map(|e| &e.id).collect();
                    let (disabled, removed): (Vec<String>, Vec<String>) = remove.iter().cloned().partition(|id| rows.contains(id));
                    // Entries the swap started that did not run before
                    // (waiting for a provider this change brought) were
                    // added or enabled, not restarted.
                    let (restarted, started): (Vec<String>, Vec<String>) = restarted.into_iter().partition(|id| live.contains(id));
                    let mut added = added;
                    let mut waited = Vec::new();
                    for id in started {
                        if previous.contains_key(&id) && was_enabled.contains_key(&id) {
                            waited.push(id);
                        } else {
                            added.push(id);
                        }
                    }
                    // Rows there before, disabled, that now start were enabled.
                    let (enabled, added): (Vec<String>, Vec<String>) =
                        added.iter().cloned().partition(|id| previous.contains_key(id) && !was_enabled.contains_key(id));
                    let what = [
                        ("added", &added),
                        ("enabled", &enabled),
                        ("changed", &changed),
                        ("removed", &removed),
                        ("disabled", &disabled),
                        ("restarted", &restarted),
                        ("started", &waited),
                    ]
                    .iter()
                    .filter(|(_, ids)| !ids.is_empty())
                    .map(|(how, ids)| format!("{how} {}", ids.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ");
                    let touched: Vec<String> = touched
                        .into_iter()
                        .chain(restarted.iter().cloned())
                        .chain(added.iter().cloned())
                        .chain(enabled.iter().cloned())
                        .chain(waited.iter().cloned())
                        .collect();
                    let mut touched = touched;
                    touched.sort();
                    touched.dedup();
                    let pending = self.host.loader.pending_ids();
                    for m in waiting.iter().filter(|m| pending.iter().any(|w| m.contains(&format!("entry {w}:")))) {
                        self.note(m.clone());
                    }
                    // Consumers the swap left waiting (their provider went
                    // with this change) are told here, once, with why.
                    for id in pending.iter().filter(|id| !pending_before.contains(id) && !waiting.iter().any(|m| m.contains(&format!("entry {id}:"))))
                    {
                        if let Some(row) = wanted.get(id) {
                            if let Err(EntryState::Waiting(messages)) = self.host.loader.prepare(row, None) {
                                for m in messages {
                                    self.note(m);
                                }
                            }
                        }
                    }
                    // Applied: what was found wrong with these rows before
                    // is over.
                    let mut known = self.problems.lock_or_recover();
                    for id in added.iter().chain(&changed) {
                        known.remove(id);
                    }
                    drop(known);
                    *self.composition.lock_or_recover() = next;
                    self.reloads.fetch_add(1, Ordering::SeqCst);
                    self.note(format!("composition reloaded: {what}"));
                    self.reloaded();
                    return Outcome::Reloaded(touched);
                }
                // One entry's `apply` failed: that entry is left as it was,
                // as one whose row does not validate, and the rest is
                // tried again.
                Err(f) if touched.contains(&f.id) && !failed.contains_key(&f.id) => {
                    failed.insert(f.id, f.message);
                }
                Err(e) => return self.refuse(format!("the composition change was not applied ({e}); the running version is kept")),
            }
        }
    }

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
    fn reload_library(&self, source: &Path, retry: bool) -> Outcome {
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

    /// Holds open the file each live library was loaded from (and lets go
    /// of those no entry uses any more), so that when a build replaces it,
    /// by `rename` or by unlinking it, the filesystem does not free the old
    /// file's blocks inside that call: on ext4 freeing a just-written 2 MB
    /// library made the `rename` that lands a new build take about 3 ms,
    /// and the reload waited on it. The blocks are freed when
    /// [`DevHost::release_replaced`] closes the file, after the reload.
    /// Reading is all a held file is used for, so a build writing it in
    /// place, renaming or deleting it is never hindered. Also allocates
    /// each library's next private copy ahead
    /// ([`crate::loader::LibraryCache::prepare_spare`]).
    pub fn hold_sources(&self) {
        let sources = self.library_sources();
        for source in &sources {
            self.hold_source(source);
            self.host.loader.libraries().prepare_spare(source);
        }
        let mut held = self.held.lock_or_recover();
        let gone: Vec<PathBuf> = held.keys().filter(|p| !sources.contains(p)).cloned().collect();
        let mut replaced = self.replaced.lock_or_recover();
        for path in gone {
            replaced.extend(held.remove(&path));
        }
        self.host.loader.libraries().keep_spares_of(&sources);
    }

    /// Holds the file now at `source`; the one held before, if another
    /// (or if no regular file is there now: removed, say, by `cargo
    /// clean`), waits for [`DevHost::release_replaced`].
    fn hold_source(&self, source: &Path) {
        use std::os::unix::fs::MetadataExt;
        let file = library::open_without_waiting(source).ok().filter(|f| f.metadata().is_ok_and(|m| m.is_file()));
        let mut held = self.held.lock_or_recover();
        let Some(file) = file else {
            if let Some(old) = held.remove(source) {
                self.replaced.lock_or_recover().push(old);
            }
            return;
        };
        let Ok(meta) = file.metadata() else { return };
        if let Some(old) = held.get(source) {
            if old.metadata().is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino())) {
                return;
            }
        }
        if let Some(old) = held.insert(source.to_path_buf(), file) {
            self.replaced.lock_or_recover().push(old);
        }
    }

    /// Closes the held files of replaced builds (their blocks are freed
    /// now, if nothing else has them). The watcher calls it once changes
    /// have been quiet for the debounce.
    pub fn release_replaced(&self) {
        let files: Vec<std::fs::File> = std::mem::take(&mut *self.replaced.lock_or_recover());
        drop(files);
    }

    /// Calls `listener` after every reload that was applied (composition or
    /// library), on the thread that applied it.
    pub fn on_reload(&self, listener: impl Fn() + Send + Sync + 'static) {
        self.listeners.lock_or_recover().push(Box::new(listener));
    }

    fn reloaded(&self) {
        for listener in self.listeners.lock_or_recover().iter() {
            listener();
        }
    }

    fn refuse(&self, message: String) -> Outcome {
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
    pub fn status(&self) -> Value {
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
                        "config": a.config,
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
            .filter(|e| !crate::loader::persistence::is_persistence(&e.name) && !crate::loader::compaction::is_compaction(&e.name))
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
fn leaves(composition: &Composition) -> impl Iterator<Item = &Entry> {
    composition.walk().into_iter().filter(|e| !e.is_container())
}

/// The enabled leaf entries of `entries` by id (see [`collect_enabled`]);
/// a `disabled` expression that fails leaves its entry out.
fn enabled_rows(loader: &Loader, entries: &[Entry]) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    collect_enabled(loader, entries, false, &mut out, &mut Vec::new());
    out
}

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

/// Where an entry's library name leads, followed on disk.
struct Lead {
    /// The file as named, its folder resolved (a symlink at the end not
    /// followed), so it compares with file events.
    named: PathBuf,
    /// The file it leads to, every symlink followed, also through ones
    /// that point nowhere yet: the library's source path once it exists.
    target: PathBuf,
    /// Every symlink met on the way (a linked folder, a link to a link),
    /// each as its folder resolved and its name: re-pointing any of them
    /// changes `target`.
    links: Vec<PathBuf>,
}

/// How many symlinks [`lead`] follows, as Linux's path walk does (40).
const MAX_LINKS_FOLLOWED: usize = 40;

/// Where `entry`'s name leads (see [`Lead`]), whether or not the file
/// exists; `None` for a builtin, a package name or a name not found.
fn lead(entry: &Entry, plugin_path: &crate::loader::resolve::PluginPath) -> Option<Lead> {
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
fn clean_copies(dir: &Path) {
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
