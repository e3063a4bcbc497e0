//! The loader: from a composition to applied fibers.
//!
//! For each entry: resolve its `name` → load the library through
//! the stable ABI → unwrap the library's exports to the named plugin →
//! validate `config` against the plugin's JSON Schema (every violation with
//! its `$.path` and YAML line) → check the host capabilities it requires
//! and `inject` → run `apply` in a fresh
//! fiber, disposing everything it registered if it fails. One bad entry does
//! not stop the others.

pub mod acp;
pub mod catalog;
pub mod compaction;
pub mod defined;
pub mod library;
pub mod persistence;
pub mod redact;
pub mod resolve;
pub mod verified;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use abi_stable::sabi_trait::TD_Opaque;
use cordis_abi::ffi::HostContext_TO;
use cordis_abi::schema::{Checker, Segment};
use serde_json::Value;

use cordis_composition::{composition, expr, positions};
pub use cordis_composition::{Composition, CompositionError, Entry, EntryKind, Layer, Switch};
pub use library::{Library, LibraryCache, LoadError, Picked, UnwrapError};
pub use resolve::{PluginPath, ResolveError, Target};

use crate::context::{Fiber, FiberContext, RealmKey, Services};
use cordis_sync::LockExt;
use positions::Step;

/// How long a swap lets the calls in flight of entries it does not swap
/// finish before it cancels those that can be cancelled.
const SWAP_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// What became of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryState {
    /// Applied; its fiber is live.
    Loaded,
    /// `disabled` (or inside a disabled group).
    Disabled,
    /// A group or include; see its children.
    Group,
    /// Not applied; each message names file, line and entry.
    Failed(Vec<String>),
    /// Waiting for services nothing provides.
    Waiting(Vec<String>),
    /// No library on the plugin path provides its plugin; the message says
    /// where the loader looked.
    Missing(Vec<String>),
}

impl EntryState {
    /// Whether the entry failed (`missing` and `waiting` are not failures:
    /// see [`EntryState::fails`]).
    pub fn is_failure(&self) -> bool {
        matches!(self, EntryState::Failed(_))
    }

    /// Whether the entry counts as a failure: `failed`, and under `strict`
    /// also `missing` and `waiting`.
    pub fn fails(&self, strict: bool) -> bool {
        match self {
            EntryState::Failed(_) => true,
            EntryState::Missing(_) | EntryState::Waiting(_) => strict,
            _ => false,
        }
    }

    /// A one-word label: `loaded`, `disabled`, `group`, `failed`,
    /// `waiting`, `missing`.
    pub fn label(&self) -> &'static str {
        match self {
            EntryState::Loaded => "loaded",
            EntryState::Disabled => "disabled",
            EntryState::Group => "group",
            EntryState::Failed(_) => "failed",
            EntryState::Waiting(_) => "waiting",
            EntryState::Missing(_) => "missing",
        }
    }

    /// The messages of a failed, waiting or missing entry.
    pub fn messages(&self) -> &[String] {
        match self {
            EntryState::Failed(m) | EntryState::Waiting(m) | EntryState::Missing(m) => m,
            _ => &[],
        }
    }
}

/// Why [`Loader::swap`] changed nothing: the entry whose `apply` failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SwapFailure {
    /// The entry's id.
    pub id: String,
    /// What failed, naming the file, line and entry.
    pub message: String,
}

/// The outcome for one entry.
#[derive(Debug, Clone)]
pub struct EntryReport {
    /// The entry's scoped id (`group/child`).
    pub id: String,
    /// Its `name`.
    pub name: String,
    /// The file the row was written in.
    pub file: String,
    /// 1-based line where the entry starts.
    pub line: usize,
    /// Nesting depth (0 at top level).
    pub depth: usize,
    /// What happened.
    pub state: EntryState,
    /// The library file, when one was loaded.
    pub library: Option<PathBuf>,
    /// The effects of the fiber, when loaded (`tool todo_write`, ...).
    pub effects: Vec<String>,
    /// `isolate` and `intercept` as recorded (`isolate planMode: private`).
    pub notes: Vec<String>,
}

/// One applied entry.
pub struct Active {
    /// The entry as applied.
    pub entry: Entry,
    /// Its fiber.
    pub fiber: Arc<Fiber>,
    /// The library it came from.
    pub library: Arc<Library>,
    /// The declaration applied.
    pub picked: Picked,
    /// The export the entry's name picked (`lib/export`), if any.
    pub export: Option<String>,
    /// The config applied, after defaults.
    pub config: Value,
    /// The plugin services it injects, with the realm each resolved in:
    /// when their provider stops, this entry is stopped first.
    pub uses: Vec<(RealmKey, String)>,
    /// Every service the plugin and the entry inject.
    pub inject: Vec<String>,
}

/// Everything checked about an entry before `apply`: resolved, loaded,
/// unwrapped, config validated, `inject` satisfied.
pub struct Prepared {
    library: Arc<Library>,
    picked: Picked,
    export: Option<String>,
    config: Value,
    /// Every service the plugin and the entry inject.
    inject: Vec<String>,
}

impl Prepared {
    /// The config `apply` will get (expressions evaluated, validated).
    pub fn config(&self) -> &Value {
        &self.config
    }
}

/// Applies composition entries against the host's services.
pub struct Loader {
    services: Arc<Services>,
    libraries: LibraryCache,
    plugin_path: PluginPath,
    active: Mutex<BTreeMap<String, Active>>,
    /// Entries waiting for a service, by id, in the order they were found.
    pending: Mutex<Vec<Entry>>,
    /// Compiled config schemas, by their JSON text: a rebuilt library (hot
    /// reload) usually declares the same schema, which is compiled once.
    config_checkers: Mutex<HashMap<String, Arc<Checker>>>,
}

impl Loader {
    /// A loader whose bare names search `plugin_path`.
    pub fn new(services: Arc<Services>, plugin_path: PluginPath) -> Loader {
        Loader::with_cache(services, plugin_path, LibraryCache::default())
    }

    /// A loader that loads libraries through `libraries` (e.g. from private
    /// copies, for hot reload).
    pub fn with_cache(services: Arc<Services>, plugin_path: PluginPath, libraries: LibraryCache) -> Loader {
        Loader {
            services,
            libraries,
            plugin_path,
            active: Mutex::new(BTreeMap::new()),
            pending: Mutex::new(Vec::new()),
            config_checkers: Mutex::new(HashMap::new()),
        }
    }

    /// The library cache.
    pub fn libraries(&self) -> &LibraryCache {
        &self.libraries
    }

    /// The services entries are applied against.
    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// The plugin search path.
    pub fn plugin_path(&self) -> &PluginPath {
        &self.plugin_path
    }

    /// Applies every entry of `composition`, in order; returns one report per
    /// entry (depth first).
    ///
    /// An entry whose required services are not there yet is `waiting`;
    /// once the pass is done, waiting entries are tried again as long as one
    /// of them starts (a provider listed after its consumers still serves
    /// them). Entries still waiting then are kept, and start when a later
    /// change brings their services ([`Loader::start_pending`]).
    pub fn load(&self, composition: &Composition) -> Vec<EntryReport> {
        let mut reports = Vec::new();
        for entry in &composition.entries {
            self.load_entry(entry, 0, false, &mut reports);
        }
        for (id, outcome) in self.try_pending() {
            let Some(r) = reports.iter_mut().find(|r| r.id == id) else { continue };
            match outcome {
                Ok(()) => {
                    r.state = EntryState::Loaded;
                    if let Some((library, effects)) = self.with_active(&id, |a| (a.library.source.clone(), a.fiber.effects())) {
                        r.library = Some(library);
                        r.effects = effects;
                    }
                }
                Err(state) => r.state = state,
            }
        }
        self.name_absent_providers(composition, &mut reports);
        reports
    }

    /// Rewords each waiting entry's "which nothing provides" when a row of
    /// the composition would provide the service but is not running (it
    /// failed, is missing, disabled, or waits itself), naming that row, so
    /// a provider that failed is told apart from one that does not exist.
    fn name_absent_providers(&self, composition: &Composition, reports: &mut [EntryReport]) {
        if !reports.iter().any(|r| matches!(r.state, EntryState::Waiting(_))) {
            return;
        }
        // (service, entry id, line, why it is not running) for every row
        // that is not running and whose plugin declares the service.
        let mut idle: Vec<(String, String, usize, &'static str)> = Vec::new();
        for entry in composition.walk() {
            let Some(report) = reports.iter().find(|r| r.id == entry.id) else { continue };
            let why = match report.state {
                EntryState::Failed(_) => "it failed",
                EntryState::Missing(_) => "it is missing",
                EntryState::Disabled => "it is disabled",
                EntryState::Waiting(_) => "it waits for a service itself",
                _ => continue,
            };
            for service in self.would_provide(entry) {
                idle.push((service, entry.id.clone(), report.line, why));
            }
        }
        for report in reports.iter_mut() {
            let EntryState::Waiting(messages) = &mut report.state else { continue };
            for m in messages.iter_mut() {
                let Some(service) = m.split("waiting for service `").nth(1).and_then(|rest| rest.split('`').next()).map(str::to_string) else {
                    continue;
                };
                let rows: Vec<String> = idle
                    .iter()
                    .filter(|(s, id, _, _)| *s == service && *id != report.id)
                    .map(|(_, id, line, why)| format!("entry {id} (line {line}) would provide it, but {why}"))
                    .collect();
                if !rows.is_empty() {
                    *m = m.replacen(", which nothing provides", &format!(": {}", rows.join("; ")), 1);
                }
            }
        }
    }

    /// The services the plugin `entry` names declares it provides, read
    /// from its library without running it (empty when the library cannot
    /// be found or loaded).
    fn would_provide(&self, entry: &Entry) -> Vec<String> {
        let (library, export) = match resolve::resolve(&entry.name, &entry.base_dir, &self.plugin_path) {
            Ok(Target::Library { path, export, .. }) => match self.libraries.load(&path) {
                Ok(library) => (library, export),
                Err(_) => return Vec::new(),
            },
            Ok(Target::Package { name }) => match self.libraries.find_package(&name, &self.plugin_path) {
                Some((library, plugin)) => (library, Some(plugin)),
                None => return Vec::new(),
            },
            _ => return Vec::new(),
        };
        let Ok(picked) = library::unwrap_export(&library, export.as_deref()) else { return Vec::new() };
        let plugin = picked.decl.name.to_string();
        library.provides.iter().filter(|(p, _)| *p == plugin).map(|(_, s)| s.clone()).collect()
    }

    /// Tries every waiting entry again, as long as one starts; returns the
    /// ids started, in order.
    pub fn start_pending(&self) -> Vec<String> {
        self.try_pending().into_iter().filter(|(_, outcome)| outcome.is_ok()).map(|(id, _)| id).collect()
    }

    /// [`Loader::start_pending`], with each entry that left the waiting list:
    /// started, or the state that keeps it from starting now (it no longer
    /// waits, and the warning is logged).
    fn try_pending(&self) -> Vec<(String, Result<(), EntryState>)> {
        let mut outcomes = Vec::new();
        loop {
            let waiting: Vec<Entry> = self.pending.lock_or_recover().clone();
            let mut progress = false;
            for entry in waiting {
                match self.apply(&entry) {
                    Ok(active) => {
                        self.forget_pending(&entry.id);
                        self.active.lock_or_recover().insert(entry.id.clone(), active);
                        outcomes.push((entry.id.clone(), Ok(())));
                        progress = true;
                    }
                    Err(EntryState::Waiting(_)) => {}
                    Err(state) => {
                        self.forget_pending(&entry.id);
                        for m in state.messages() {
                            tracing::warn!("{m}");
                        }
                        outcomes.push((entry.id.clone(), Err(state)));
                    }
                }
            }
            if !progress {
                return outcomes;
            }
        }
    }

    /// Records `entry` as waiting for a service (replacing an older version).
    pub fn wait(&self, entry: Entry) {
        let mut pending = self.pending.lock_or_recover();
        pending.retain(|e| e.id != entry.id);
        pending.push(entry);
    }

    /// Forgets waiting entry `id`; returns whether it was waiting.
    pub fn forget_pending(&self, id: &str) -> bool {
        let mut pending = self.pending.lock_or_recover();
        let before = pending.len();
        pending.retain(|e| e.id != id);
        pending.len() != before
    }

    /// Ids of the entries waiting for a service.
    pub fn pending_ids(&self) -> Vec<String> {
        self.pending.lock_or_recover().iter().map(|e| e.id.clone()).collect()
    }

    fn load_entry(&self, entry: &Entry, depth: usize, parent_disabled: bool, out: &mut Vec<EntryReport>) {
        let mut notes: Vec<String> = entry.isolate.iter().map(|(name, realm)| format!("isolate {name}: {realm}")).collect();
        if let Some(intercept) = &entry.intercept {
            notes.push(format!("intercept {intercept}"));
        }
        let mut report = EntryReport {
            id: entry.id.clone(),
            name: entry.name.clone(),
            file: entry.origin.source.file.clone(),
            line: entry.position.line,
            depth,
            state: EntryState::Loaded,
            library: None,
            effects: Vec::new(),
            notes,
        };
        if !entry.problems.is_empty() {
            report.state = EntryState::Failed(entry.problems.clone());
            out.push(report);
            return;
        }
        let disabled = match self.disabled(entry) {
            Ok(d) => parent_disabled || d,
            Err(message) => {
                report.state = EntryState::Failed(vec![message]);
                out.push(report);
                return;
            }
        };
        if entry.is_container() {
            report.state = if disabled { EntryState::Disabled } else { EntryState::Group };
            out.push(report);
            for child in &entry.children {
                self.load_entry(child, depth + 1, disabled, out);
            }
            return;
        }
        if disabled {
            report.state = EntryState::Disabled;
            out.push(report);
            return;
        }
        if persistence::is_persistence(&entry.name) {
            // The store was chosen at boot from this same entry; the report
            // shows it (or why the config is refused).
            match persistence::configure(entry) {
                Ok(p) => report.notes.push(p.describe()),
                Err(messages) => report.state = EntryState::Failed(messages),
            }
            out.push(report);
            return;
        }
        if acp::is_acp(&entry.name) {
            // `cordis acp` reads this entry when it starts.
            match acp::configure(entry) {
                Ok(c) => report.notes.push(acp::describe(&c)),
                Err(messages) => report.state = EntryState::Failed(messages),
            }
            out.push(report);
            return;
        }
        if compaction::is_compaction(&entry.name) {
            // Compaction is the host's own, configured at boot from this
            // same entry.
            match compaction::configure(entry) {
                Ok(c) => report.notes.push(compaction::describe(&c)),
                Err(messages) => report.state = EntryState::Failed(messages),
            }
            out.push(report);
            return;
        }
        match self.apply(entry) {
            Ok(active) => {
                report.library = Some(active.library.source.clone());
                report.effects = active.fiber.effects();
                self.active.lock_or_recover().insert(entry.id.clone(), active);
            }
            Err(state) => {
                if matches!(state, EntryState::Waiting(_)) {
                    self.wait(entry.clone());
                }
                report.state = state;
            }
        }
        out.push(report);
    }

    /// Whether `entry` is switched off by its own `disabled` (a `!!js`
    /// expression is evaluated now, as at every mount decision).
    ///
    /// # Errors
    /// The expression's failure, naming file, line and entry.
    pub fn disabled(&self, entry: &Entry) -> Result<bool, String> {
        match &entry.disabled {
            Switch::Fixed(b) => Ok(*b),
            Switch::Expr(source) => {
                let names = self.services.names();
                let services = self.service_values(entry, names.iter().map(String::as_str));
                expr::truthy(source, &services).map_err(|e| format!("{}: entry {}: `disabled`: {e}", entry.locate_key("disabled"), entry.id))
            }
        }
    }

    /// The values `ctx.<name>` shows expressions for the provided services
    /// among `names`.
    /// (An injected service that is not provided, an optional one, shows as
    /// `null`.)
    fn service_values<'a>(&self, entry: &Entry, names: impl Iterator<Item = &'a str>) -> serde_json::Map<String, Value> {
        names
            .map(|n| {
                let value = if self.services.available(n, &entry.realms) { self.services.value(n, &entry.realms) } else { Value::Null };
                (n.to_string(), value)
            })
            .collect()
    }

    /// The first required service among `inject` that is not available to
    /// `entry` now (the plugin's injects are required; the entry's follow
    /// their `required`).
    fn absent_services(&self, entry: &Entry, inject: &[String]) -> Option<String> {
        inject
            .iter()
            .filter(|n| entry.inject.iter().find(|i| i.name == **n).is_none_or(|i| i.required))
            .find(|n| !self.services.available(n, &entry.realms))
            .cloned()
    }

    /// Resolves, loads, validates and applies one entry.
    ///
    /// # Errors
    /// The entry's failed, waiting or missing state, with messages naming
    /// file, line and entry.
    pub fn apply(&self, entry: &Entry) -> Result<Active, EntryState> {
        let prepared = self.prepare(entry, None)?;
        self.apply_prepared(entry, prepared)
    }

    /// Everything before `apply`: resolve the name, load the library (or use
    /// `library`, a freshly reloaded one), unwrap the export, check
    /// `inject`, evaluate and validate the config.
    ///
    /// # Errors
    /// As [`Loader::apply`].
    pub fn prepare(&self, entry: &Entry, library: Option<Arc<Library>>) -> Result<Prepared, EntryState> {
        let at_name = format!("{}: entry {}", entry.locate_key("name"), entry.id);
        let fail = |msg: String| EntryState::Failed(vec![format!("{at_name}: {msg}")]);
        let missing = |e: ResolveError| EntryState::Missing(vec![format!("{at_name}: {e}")]);
        if persistence::is_persistence(&entry.name) {
            return Err(fail("the session store is chosen when the host starts; restart to change it".into()));
        }
        if compaction::is_compaction(&entry.name) {
            return Err(fail("compaction is configured when the host starts; restart to change it".into()));
        }
        if acp::is_acp(&entry.name) {
            return Err(fail("the ACP entry is read when `cordis acp` starts; restart it to change it".into()));
        }

        let target = match resolve::resolve(&entry.name, &entry.base_dir, &self.plugin_path) {
            Ok(t) => t,
            Err(e @ (ResolveError::NoSuchFile { .. } | ResolveError::NotFound { .. })) => return Err(missing(e)),
            Err(e) => return Err(fail(e.to_string())),
        };
        let (library, export) = match (target, library) {
            (Target::Builtin(b), _) => {
                return Err(fail(format!("the builtin `cordis:{b}` holds entries and cannot be applied as a plugin")));
            }
            (Target::Library { export, .. }, Some(lib)) => (lib, export),
            (Target::Library { path, export, .. }, None) => (self.libraries.load(&path).map_err(|e| fail(e.to_string()))?, export),
            (Target::Package { name }, given) => match self.libraries.find_package(&name, &self.plugin_path) {
                Some((found, plugin)) => (given.unwrap_or(found), Some(plugin)),
                None => return Err(missing(resolve::package_not_found(&name, &self.plugin_path))),
            },
        };
        let picked = library::unwrap_export(&library, export.as_deref()).map_err(|e| match e {
            // The hint names the library as this entry does (a path, or a
            // bare name found on the plugin path), which is what resolves.
            library::UnwrapError::Unspecified { path, library, available } => fail(format!(
                "plugin library {path} exports several plugins ({available}) and none is named `{library}`; pick one with `{}/<export>`",
                entry.name
            )),
            other => fail(other.to_string()),
        })?;
        let decl_name = picked.decl.name.to_string();
        // Capabilities the plugin cannot work without: refused before any
        // of its code runs, in a host older than the plugin.
        if let Err(missing) = crate::capabilities::check_requirements(&decl_name, picked.decl.requires.as_slice()) {
            return Err(EntryState::Failed(missing.into_iter().map(|m| format!("{at_name}: {m}")).collect()));
        }

        // Services: the plugin's own `inject` and the entry's, required
        // unless the entry says `required: false`.
        let mut wanted: Vec<(String, bool)> = picked.decl.inject.iter().map(|s| (s.to_string(), true)).collect();
        for i in &entry.inject {
            match wanted.iter_mut().find(|(n, _)| *n == i.name) {
                Some(w) => w.1 = w.1 && i.required,
                None => wanted.push((i.name.clone(), i.required)),
            }
        }
        let own: Vec<&String> = library.provides.iter().filter(|(p, _)| *p == decl_name).map(|(_, s)| s).collect();
        if let Some((n, _)) = wanted.iter().find(|(n, required)| *required && own.contains(&n)) {
            return Err(fail(format!("plugin {decl_name} injects `{n}`, which it provides itself: it would wait for itself forever")));
        }
        let absent: Vec<String> = wanted
            .iter()
            .filter(|(n, required)| *required && !self.services.available(n, &entry.realms))
            .map(|(n, _)| {
                let realm = entry.realms.of(n);
                let place = if realm == RealmKey::Root { String::new() } else { format!(" in {realm}") };
                format!(
                    "{}: entry {}: waiting for service `{n}`, which nothing provides{place} (host services: {})",
                    entry.locate_injection(n),
                    entry.id,
                    self.services.names().join(", ")
                )
            })
            .collect();
        if !absent.is_empty() {
            // The row's own faults are told now, not once the provider
            // comes: a config without expressions does not depend on the
            // services, so it is checked already.
            if !entry.config_has_expressions() {
                let config = entry.config_json(&mut |_| Ok(None)).map_err(|m| EntryState::Failed(vec![m]))?;
                if let Ok(checker) = self.config_checker(&picked) {
                    let mut messages = config_violations(entry, &checker, &config);
                    if !messages.is_empty() {
                        messages.extend(absent);
                        return Err(EntryState::Failed(messages));
                    }
                }
            }
            return Err(EntryState::Waiting(absent));
        }

        let services = self.service_values(entry, wanted.iter().map(|(n, _)| n.as_str()));
        let (config, undefined) = entry
            .config_json_traced(&mut |source| expr::evaluate(source, &services).map_err(|e| e.to_string()))
            .map_err(|m| EntryState::Failed(vec![m]))?;
        let checker =
            self.config_checker(&picked).map_err(|e| fail(format!("plugin {decl_name} declares a config schema that does not compile: {e}")))?;
        let mut messages = defined::refused(entry, &decl_name, &picked.config_schema, &undefined);
        messages.extend(config_violations(entry, &checker, &config));
        if !messages.is_empty() {
            return Err(EntryState::Failed(messages));
        }
        let inject: Vec<String> = wanted.into_iter().map(|(n, _)| n).collect();
        Ok(Prepared { library, picked, export, config, inject })
    }

    /// The compiled config schema of `picked`, compiled once per schema
    /// text.
    fn config_checker(&self, picked: &Picked) -> Result<Arc<Checker>, cordis_abi::schema::InvalidSchema> {
        let text = picked.decl.config_schema.as_str();
        if let Some(checker) = self.config_checkers.lock_or_recover().get(text) {
            return Ok(checker.clone());
        }
        let checker = Arc::new(Checker::new(Value::clone(&picked.config_schema))?);
        self.config_checkers.lock_or_recover().insert(text.to_string(), checker.clone());
        Ok(checker)
    }

    /// Runs a prepared entry's `apply` in a fresh fiber; on failure every
    /// effect it registered is disposed.
    ///
    /// # Errors
    /// The entry's failed state.
    pub fn apply_prepared(&self, entry: &Entry, prepared: Prepared) -> Result<Active, EntryState> {
        self.run_apply(entry, prepared).map_err(|e| EntryState::Failed(vec![format!("{}: entry {}: {e}", entry.locate(), entry.id)]))
    }

    fn run_apply(&self, entry: &Entry, prepared: Prepared) -> Result<Active, String> {
        let Prepared { library, picked, export, config, inject } = prepared;
        let decl_name = picked.decl.name.to_string();
        let provides: Vec<String> = library.provides.iter().filter(|(p, _)| *p == decl_name).map(|(_, s)| s.clone()).collect();
        let fiber = Arc::new(Fiber::new(&decl_name, &entry.id));
        let ctx = FiberContext { fiber: &fiber, services: &self.services, inject: &inject, provides: &provides, realms: &entry.realms };
        let config_text = config.to_string();
        let outcome = (picked.decl.apply)(HostContext_TO::from_ptr(&ctx, TD_Opaque), config_text.as_str().into());
        if let Err(e) = outcome.into_result() {
            fiber.dispose();
            return Err(format!("plugin {decl_name} failed to apply: {e}"));
        }
        let uses = inject.iter().filter(|n| !self.services.provides(n)).map(|n| (entry.realms.of(n), n.clone())).collect();
        Ok(Active { entry: entry.clone(), fiber, library, picked, export, config, uses, inject })
    }

    /// Swaps live entries for new versions, atomically for tool calls: calls
    /// in flight finish first (or are cancelled, see
    /// [`crate::tools::ToolRegistry::exclusive_for`]), calls arriving meanwhile wait. Entries that
    /// inject a service one of the swapped entries provides (and, in turn,
    /// their own dependents) are stopped first and started again after,
    /// against the new provider (or left waiting when it no longer provides
    /// the service). Every old fiber is disposed, then every new version
    /// applied; if any `apply` fails, the new fibers are disposed and the old
    /// versions applied again, so the old version keeps serving. Entries in
    /// `new` that were not live are added; ids in `remove` are disposed.
    /// Returns the dependents restarted.
    ///
    /// # Errors
    /// The first failure, naming the entry; nothing changed.
    pub fn swap(&self, new: Vec<(Entry, Prepared)>, remove: &[String]) -> Result<Vec<String>, SwapFailure> {
        let swapping: Vec<String> = new.iter().map(|(e, _)| e.id.clone()).chain(remove.iter().cloned()).collect();
        // Calls that can be cancelled (a tool source's) are, so that a
        // hung server does not hold the swap: the swapped entries' at once,
        // the others' after SWAP_GRACE.
        let _calls = self.services.tools.exclusive_for(&swapping, SWAP_GRACE);
        let mut active = self.active.lock_or_recover();
        // Everything the swapped fibers provide, then everything that uses it.
        let mut provided: Vec<(RealmKey, String)> = Vec::new();
        for id in &swapping {
            if let Some(a) = active.get(id) {
                provided.extend(self.services.registry.provided_by(a.fiber.owner().fiber));
            }
        }
        let mut dependents: Vec<String> = Vec::new();
        loop {
            let more: Vec<String> = active
                .iter()
                .filter(|(id, a)| !swapping.contains(id) && !dependents.contains(id) && a.uses.iter().any(|u| provided.contains(u)))
                .map(|(id, _)| id.clone())
                .collect();
            if more.is_empty() {
                break;
            }
            for id in more {
                if let Some(a) = active.get(&id) {
                    provided.extend(self.services.registry.provided_by(a.fiber.owner().fiber));
                }
                dependents.push(id);
            }
        }
        // Consumers stop before their providers.
        let mut stopped: Vec<Active> = Vec::new();
        for id in dependents.iter().rev() {
            if let Some(a) = active.remove(id) {
                a.fiber.dispose();
                stopped.push(a);
            }
        }
        stopped.reverse();
        let mut old: Vec<Active> = Vec::new();
        for id in &swapping {
            if let Some(a) = active.remove(id) {
                a.fiber.dispose();
                old.push(a);
            }
        }
        let mut applied: Vec<Active> = Vec::new();
        let mut failure = None;
        // Entries this swap set waiting: a swap undone takes them back.
        let mut queued: Vec<String> = Vec::new();
        let new = providers_first(new);
        // Services the new versions provide: a consumer swapped with its
        // provider reads the new one.
        let fresh: Vec<String> = new
            .iter()
            .flat_map(|(_, p)| p.library.provides.iter().filter(|(plugin, _)| *plugin == p.picked.decl.name.as_str()).map(|(_, s)| s.clone()))
            .collect();
        for (entry, prepared) in new {
            // Its config's expressions were evaluated before the swap: one
            // that reads a service swapped with it is evaluated again, now
            // that the new provider runs.
            let prepared = if entry.config_has_expressions() && prepared.inject.iter().any(|n| fresh.contains(n)) {
                match self.prepare(&entry, Some(prepared.library.clone())) {
                    Ok(again) => again,
                    Err(EntryState::Waiting(_)) => prepared,
                    Err(state) => {
                        failure = Some(SwapFailure { id: entry.id.clone(), message: state.messages().join("; ") });
                        break;
                    }
                }
            } else {
                prepared
            };
            // Its services may have gone with this very swap: then it waits.
            if let Some(absent) = self.absent_services(&entry, &prepared.inject) {
                tracing::debug!("entry {}: waiting for service `{absent}`", entry.id);
                queued.push(entry.id.clone());
                self.wait(entry.clone());
                continue;
            }
            match self.apply_prepared(&entry, prepared) {
                Ok(a) => applied.push(a),
                Err(state) => {
                    let message = match state {
                        EntryState::Failed(m) | EntryState::Waiting(m) | EntryState::Missing(m) => m.join("; "),
                        other => format!("entry {}: {}", entry.id, other.label()),
                    };
                    failure = Some(SwapFailure { id: entry.id.clone(), message });
                    break;
                }
            }
        }
        if let Some(failure) = failure {
            for id in &queued {
                self.forget_pending(id);
            }
            for a in applied.into_iter().rev() {
                a.fiber.dispose();
            }
            for a in old.into_iter().chain(stopped) {
                let id = a.entry.id.clone();
                let again = Prepared {
                    library: a.library.clone(),
                    picked: a.picked.clone(),
                    export: a.export.clone(),
                    config: a.config.clone(),
                    inject: a.inject.clone(),
                };
                match self.run_apply(&a.entry, again) {
                    Ok(restored) => {
                        self.libraries.set(a.library.clone());
                        active.insert(id, restored);
                    }
                    Err(e) => tracing::error!("entry {id}: the previous version could not be applied again: {e}"),
                }
            }
            return Err(failure);
        }
        for a in applied {
            active.insert(a.entry.id.clone(), a);
        }
        // Dependents start again, against what is provided now.
        let mut restarted = Vec::new();
        for a in stopped {
            let id = a.entry.id.clone();
            match self.prepare(&a.entry, Some(a.library.clone())).and_then(|p| self.apply_prepared(&a.entry, p)) {
                Ok(again) => {
                    active.insert(id.clone(), again);
                    restarted.push(id);
                }
                Err(EntryState::Waiting(m)) => {
                    // The caller tells it (cordis dev says which entries
                    // wait, and why).
                    tracing::debug!("{}", m.join("; "));
                    self.wait(a.entry.clone());
                }
                Err(state) => tracing::error!("entry {id} could not start again: {}", state.messages().join("; ")),
            }
        }
        drop(active);
        restarted.extend(self.start_pending());
        Ok(restarted)
    }

    /// Ids and libraries (source files) of the live entries.
    pub fn live_libraries(&self) -> Vec<(String, PathBuf)> {
        self.active.lock_or_recover().iter().map(|(id, a)| (id.clone(), a.library.source.clone())).collect()
    }

    /// The entry as applied for live entry `id`.
    pub fn live_entry(&self, id: &str) -> Option<Entry> {
        self.with_active(id, |a| a.entry.clone())
    }

    /// Disposes the fiber of entry `id`; returns whether one was live.
    pub fn dispose(&self, id: &str) -> bool {
        let active = self.active.lock_or_recover().remove(id);
        match active {
            Some(a) => {
                a.fiber.dispose();
                true
            }
            None => false,
        }
    }

    /// Ids of the live entries.
    pub fn active_ids(&self) -> Vec<String> {
        self.active.lock_or_recover().keys().cloned().collect()
    }

    /// Runs `f` on the live entry `id`.
    pub fn with_active<R>(&self, id: &str, f: impl FnOnce(&Active) -> R) -> Option<R> {
        self.active.lock_or_recover().get(id).map(f)
    }
}

/// `new` reordered so that an entry comes after the entries in `new` that
/// provide a service it injects (file order otherwise kept; a cycle keeps
/// the rest in file order).
fn providers_first(mut new: Vec<(Entry, Prepared)>) -> Vec<(Entry, Prepared)> {
    let provides = |p: &Prepared| -> Vec<String> {
        p.library.provides.iter().filter(|(plugin, _)| *plugin == p.picked.decl.name.as_str()).map(|(_, s)| s.clone()).collect()
    };
    let mut ordered = Vec::with_capacity(new.len());
    while !new.is_empty() {
        let ready = new
            .iter()
            .position(|(_, p)| !new.iter().any(|(_, other)| !std::ptr::eq(other, p) && provides(other).iter().any(|s| p.inject.contains(s))));
        ordered.push(new.remove(ready.unwrap_or(0)));
    }
    ordered
}

/// The enabled non-container entries among `entries` (groups and includes
/// searched, disabled ones skipped, `!!js` switches evaluated without
/// services) whose name `builtin` accepts: how boot finds the one store and
/// the one compaction entry before any plugin loads.
///
/// # Errors
/// A `disabled` expression of a group, an include or an accepted entry
/// that fails, naming file, line and entry.
pub(crate) fn enabled_builtin(entries: &[Entry], builtin: fn(&str) -> bool) -> Result<Vec<&Entry>, Vec<String>> {
    let mut found = Vec::new();
    collect_enabled(entries, builtin, &mut found)?;
    Ok(found)
}

/// The one enabled entry among `entries` that `builtin` names (groups and
/// includes searched, disabled ones skipped); `None` when there is none.
/// `what` names the kind in the error (`a second {what}`).
///
/// # Errors
/// As [`enabled_builtin`], and a second enabled such entry, naming both.
pub(crate) fn one_builtin<'a>(entries: &'a [Entry], builtin: fn(&str) -> bool, what: &str) -> Result<Option<&'a Entry>, Vec<String>> {
    match enabled_builtin(entries, builtin)?.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        [first, second, ..] => Err(vec![format!(
            "{}: entry {}: a second {what}; {} (entry {}) is one already. Disable one of them",
            second.locate(),
            second.id,
            first.locate(),
            first.id
        )]),
    }
}

fn collect_enabled<'a>(entries: &'a [Entry], builtin: fn(&str) -> bool, found: &mut Vec<&'a Entry>) -> Result<(), Vec<String>> {
    for entry in entries {
        // A plugin entry of another kind cannot matter here: its switch is
        // left to the loader, which evaluates it once, with services.
        if !entry.is_container() && !builtin(&entry.name) {
            continue;
        }
        let disabled = match &entry.disabled {
            Switch::Fixed(b) => *b,
            Switch::Expr(source) => expr::truthy(source, &serde_json::Map::new())
                .map_err(|e| vec![format!("{}: entry {}: `disabled`: {e}", entry.locate_key("disabled"), entry.id)])?,
        };
        if disabled {
            continue;
        }
        if entry.is_container() {
            collect_enabled(&entry.children, builtin, found)?;
        } else if builtin(&entry.name) {
            found.push(entry);
        }
    }
    Ok(())
}

/// The config's violations of `checker`'s schema, one message each naming
/// the file and line of the offending value, the entry and what was
/// expected (empty when the config is valid).
pub fn config_violations(entry: &Entry, checker: &Checker, config: &Value) -> Vec<String> {
    let violations = checker.violations(config);
    violations
        .iter()
        .map(|v| {
            let steps: Vec<Step> = v
                .segments
                .iter()
                .map(|s| match s {
                    Segment::Key(k) => Step::Key(k.clone()),
                    Segment::Index(i) => Step::Index(*i),
                })
                .collect();
            // The config object itself is `config` to an operator.
            let shown = if v.path == "$" { format!("`config` {}", v.message.replace("an object", "a mapping")) } else { v.to_string() };
            let mut text = format!("{}: entry {}: {shown}", entry.locate_config(&steps), entry.id);
            let pointer: String = v
                .segments
                .iter()
                .map(|s| match s {
                    Segment::Key(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
                    Segment::Index(i) => format!("/{i}"),
                })
                .collect();
            if let (true, Some(Value::String(given))) = (v.message.contains("must be a boolean"), config.pointer(&pointer)) {
                text.push_str(&format!(" ({})", composition::bool_hint(given)));
            }
            text
        })
        .collect()
}
