//! The loader: from a composition to applied fibers.
//!
//! For each entry (DESIGN §5): resolve its `name` → load the library through
//! the stable ABI → unwrap the library's exports to the named plugin →
//! validate `config` against the plugin's JSON Schema (every violation with
//! its `$.path` and YAML line) → check `inject` → run `apply` in a fresh
//! fiber, disposing everything it registered if it fails. One bad entry does
//! not stop the others.

pub mod composition;
pub mod library;
pub mod positions;
pub mod resolve;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use abi_stable::sabi_trait::TD_Opaque;
use cordis_abi::ffi::HostContext_TO;
use cordis_abi::schema::{Checker, Segment};
use serde_json::Value;

pub use composition::{Composition, CompositionError, Entry};
pub use library::{Library, LibraryCache, LoadError, Picked, UnwrapError};
pub use resolve::{PluginPath, ResolveError, Target};

use crate::context::{Fiber, FiberContext, Services};
use positions::Step;

/// What became of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryState {
    /// Applied; its fiber is live.
    Loaded,
    /// `disabled: true`.
    Disabled,
    /// A group; see its children.
    Group,
    /// Not applied; each message names file, line and entry.
    Failed(Vec<String>),
    /// Waiting for services nothing provides.
    Waiting(Vec<String>),
}

impl EntryState {
    /// Whether the entry failed or waits.
    pub fn is_failure(&self) -> bool {
        matches!(self, EntryState::Failed(_) | EntryState::Waiting(_))
    }

    /// A one-word label: `loaded`, `disabled`, `group`, `failed`, `waiting`.
    pub fn label(&self) -> &'static str {
        match self {
            EntryState::Loaded => "loaded",
            EntryState::Disabled => "disabled",
            EntryState::Group => "group",
            EntryState::Failed(_) => "failed",
            EntryState::Waiting(_) => "waiting",
        }
    }
}

/// The outcome for one entry.
#[derive(Debug, Clone)]
pub struct EntryReport {
    /// The entry's id.
    pub id: String,
    /// Its `name`.
    pub name: String,
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
}

/// Everything checked about an entry before `apply`: resolved, loaded,
/// unwrapped, config validated, `inject` satisfied.
pub struct Prepared {
    library: Arc<Library>,
    picked: Picked,
    export: Option<String>,
    config: Value,
}

/// Applies composition entries against the host's services.
pub struct Loader {
    services: Arc<Services>,
    libraries: LibraryCache,
    plugin_path: PluginPath,
    active: Mutex<BTreeMap<String, Active>>,
}

impl Loader {
    /// A loader whose bare names search `plugin_path`.
    pub fn new(services: Arc<Services>, plugin_path: PluginPath) -> Loader {
        Loader::with_cache(services, plugin_path, LibraryCache::default())
    }

    /// A loader that loads libraries through `libraries` (e.g. from private
    /// copies, for hot reload).
    pub fn with_cache(services: Arc<Services>, plugin_path: PluginPath, libraries: LibraryCache) -> Loader {
        Loader { services, libraries, plugin_path, active: Mutex::new(BTreeMap::new()) }
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
    pub fn load(&self, composition: &Composition) -> Vec<EntryReport> {
        let mut reports = Vec::new();
        for entry in &composition.entries {
            self.load_entry(composition, entry, 0, false, &mut reports);
        }
        reports
    }

    fn load_entry(&self, c: &Composition, entry: &Entry, depth: usize, parent_disabled: bool, out: &mut Vec<EntryReport>) {
        let mut report = EntryReport {
            id: entry.id.clone(),
            name: entry.name.clone(),
            line: entry.position.line,
            depth,
            state: EntryState::Loaded,
            library: None,
            effects: Vec::new(),
        };
        if !entry.problems.is_empty() {
            report.state = EntryState::Failed(entry.problems.clone());
            out.push(report);
            return;
        }
        let disabled = parent_disabled || entry.disabled;
        if entry.group {
            report.state = if disabled { EntryState::Disabled } else { EntryState::Group };
            out.push(report);
            for child in &entry.children {
                self.load_entry(c, child, depth + 1, disabled, out);
            }
            return;
        }
        if disabled {
            report.state = EntryState::Disabled;
            out.push(report);
            return;
        }
        match self.apply(c, entry) {
            Ok(active) => {
                report.library = Some(active.library.source.clone());
                report.effects = active.fiber.effects();
                self.active.lock().unwrap_or_else(|e| e.into_inner()).insert(entry.id.clone(), active);
            }
            Err(state) => report.state = state,
        }
        out.push(report);
    }

    /// Resolves, loads, validates and applies one entry.
    ///
    /// # Errors
    /// The entry's failed or waiting state, with messages naming file, line
    /// and entry.
    pub fn apply(&self, c: &Composition, entry: &Entry) -> Result<Active, EntryState> {
        let prepared = self.prepare(c, entry, None)?;
        self.apply_prepared(c, entry, prepared)
    }

    /// Everything before `apply`: resolve the name, load the library (or use
    /// `library`, a freshly reloaded one), unwrap the export, validate the
    /// config, check `inject`.
    ///
    /// # Errors
    /// As [`Loader::apply`].
    pub fn prepare(&self, c: &Composition, entry: &Entry, library: Option<Arc<Library>>) -> Result<Prepared, EntryState> {
        let at = |path: &[Step]| format!("{}: entry {}", c.locate(path), entry.id);
        let mut name_path = entry.path.clone();
        name_path.push(Step::Key("name".into()));
        let fail = |path: &[Step], msg: String| EntryState::Failed(vec![format!("{}: {msg}", at(path))]);

        let target = resolve::resolve(&entry.name, &c.dir, &self.plugin_path).map_err(|e| fail(&name_path, e.to_string()))?;
        let (path, export) = match target {
            Target::Builtin(b) => {
                return Err(fail(&name_path, format!("the builtin `cordis:{b}` is a group container: add `group: true` and list entries in `config`")))
            }
            Target::Library { path, export, .. } => (path, export),
        };
        let library = match library {
            Some(lib) => lib,
            None => self.libraries.load(&path).map_err(|e| fail(&name_path, e.to_string()))?,
        };
        let picked = library::unwrap_export(&library, export.as_deref()).map_err(|e| fail(&name_path, e.to_string()))?;
        let decl_name = picked.decl.name.to_string();

        let config = entry.config.clone().unwrap_or_else(|| Value::Object(Default::default()));
        let checker = Checker::new(picked.config_schema.clone())
            .map_err(|e| fail(&name_path, format!("plugin {decl_name} declares a config schema that does not compile: {e}")))?;
        let violations = checker.violations(&config);
        if !violations.is_empty() {
            let messages = violations
                .iter()
                .map(|v| {
                    let mut p = entry.path.clone();
                    p.push(Step::Key("config".into()));
                    p.extend(v.segments.iter().map(|s| match s {
                        Segment::Key(k) => Step::Key(k.clone()),
                        Segment::Index(i) => Step::Index(*i),
                    }));
                    // The config object itself is `config` to an operator.
                    let shown = if v.path == "$" { format!("`config` {}", v.message.replace("an object", "a mapping")) } else { v.to_string() };
                    let mut text = format!("{}: {shown}", at(&p));
                    let pointer: String = v.segments.iter().map(|s| match s {
                        Segment::Key(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
                        Segment::Index(i) => format!("/{i}"),
                    }).collect();
                    if let (true, Some(Value::String(given))) = (v.message.contains("must be a boolean"), config.pointer(&pointer)) {
                        text.push_str(&format!(" ({})", composition::bool_hint(given)));
                    }
                    text
                })
                .collect();
            return Err(EntryState::Failed(messages));
        }

        let missing: Vec<String> = picked
            .decl
            .inject
            .iter()
            .filter(|s| !self.services.provides(s.as_str()))
            .map(|s| format!("{}: waiting for service `{s}`, which nothing provides (services: tools, sessions, projections)", at(&entry.path)))
            .collect();
        if !missing.is_empty() {
            return Err(EntryState::Waiting(missing));
        }
        Ok(Prepared { library, picked, export, config })
    }

    /// Runs a prepared entry's `apply` in a fresh fiber; on failure every
    /// effect it registered is disposed.
    ///
    /// # Errors
    /// The entry's failed state.
    pub fn apply_prepared(&self, c: &Composition, entry: &Entry, prepared: Prepared) -> Result<Active, EntryState> {
        let Prepared { library, picked, export, config } = prepared;
        self.run_apply(entry, library, picked, export, config)
            .map_err(|e| EntryState::Failed(vec![format!("{}: entry {}: {e}", c.locate(&entry.path), entry.id)]))
    }

    fn run_apply(&self, entry: &Entry, library: Arc<Library>, picked: Picked, export: Option<String>, config: Value) -> Result<Active, String> {
        let decl_name = picked.decl.name.to_string();
        let inject: Vec<String> = picked.decl.inject.iter().map(|s| s.to_string()).collect();
        let fiber = Arc::new(Fiber::new(&decl_name, &entry.id));
        let ctx = FiberContext { fiber: &fiber, services: &self.services, inject: &inject };
        let config_text = config.to_string();
        let outcome = (picked.decl.apply)(HostContext_TO::from_ptr(&ctx, TD_Opaque), config_text.as_str().into());
        if let Err(e) = outcome.into_result() {
            fiber.dispose();
            return Err(format!("plugin {decl_name} failed to apply: {e}"));
        }
        Ok(Active { entry: entry.clone(), fiber, library, picked, export, config })
    }

    /// Swaps live entries for new versions, atomically for tool calls: calls
    /// in flight finish first, calls arriving meanwhile wait. Every old fiber
    /// is disposed, then every new version applied; if any `apply` fails,
    /// the new fibers are disposed and the old versions applied again, so
    /// the old version keeps serving. Entries in `new` that were not live
    /// are added; ids in `remove` are disposed.
    ///
    /// # Errors
    /// The first failure, naming the entry; nothing changed.
    pub fn swap(&self, c: &Composition, new: Vec<(Entry, Prepared)>, remove: &[String]) -> Result<(), String> {
        let _calls = self.services.tools.exclusive();
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let mut old: Vec<Active> = Vec::new();
        for id in new.iter().map(|(e, _)| &e.id).chain(remove.iter()) {
            if let Some(a) = active.remove(id) {
                a.fiber.dispose();
                old.push(a);
            }
        }
        let mut applied: Vec<Active> = Vec::new();
        let mut failure = None;
        for (entry, prepared) in new {
            match self.apply_prepared(c, &entry, prepared) {
                Ok(a) => applied.push(a),
                Err(state) => {
                    failure = Some(match state {
                        EntryState::Failed(m) | EntryState::Waiting(m) => m.join("; "),
                        other => format!("entry {}: {}", entry.id, other.label()),
                    });
                    break;
                }
            }
        }
        if let Some(failure) = failure {
            for a in applied.into_iter().rev() {
                a.fiber.dispose();
            }
            for a in old {
                let id = a.entry.id.clone();
                match self.run_apply(&a.entry, a.library.clone(), a.picked.clone(), a.export.clone(), a.config.clone()) {
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
        Ok(())
    }

    /// Ids and libraries (source files) of the live entries.
    pub fn live_libraries(&self) -> Vec<(String, PathBuf)> {
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, a)| (id.clone(), a.library.source.clone()))
            .collect()
    }

    /// The entry as applied for live entry `id`.
    pub fn live_entry(&self, id: &str) -> Option<Entry> {
        self.with_active(id, |a| a.entry.clone())
    }

    /// Disposes the fiber of entry `id`; returns whether one was live.
    pub fn dispose(&self, id: &str) -> bool {
        let active = self.active.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
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
        self.active.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }

    /// Runs `f` on the live entry `id`.
    pub fn with_active<R>(&self, id: &str, f: impl FnOnce(&Active) -> R) -> Option<R> {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).get(id).map(f)
    }
}
