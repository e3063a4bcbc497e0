//! Booting a host: a composition, its services and its applied entries.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::compaction::Compactor;
use crate::context::Services;
use crate::loader::persistence::{self, Persistence};
use crate::loader::{Composition, CompositionError, EntryReport, EntryState, Layer, LibraryCache, Loader, PluginPath};
use cordis_session::store::UnusableStore;
#[cfg(feature = "postgres")]
use cordis_session::PostgresStore;
use cordis_session::{Durability, FlatStore, HarnessStore, Store, StoreError};

/// How to boot.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// The composition file.
    pub composition: PathBuf,
    /// Where sessions live; default `.cordis/` beside the composition.
    pub state_dir: Option<PathBuf>,
    /// Extra plugin folders searched first (`--plugin-dir`).
    pub plugin_dirs: Vec<PathBuf>,
    /// When appended events are synced.
    pub durability: Durability,
    /// Keep sessions in memory (no state directory is created).
    pub in_memory: bool,
    /// Run every library from a sealed private copy, never from its file
    /// (`cordis run`, `cordis dev`: commands that keep running).
    pub private_copies: bool,
    /// Load libraries that every user may write (refused by default).
    pub allow_writable_plugins: bool,
    /// Patch layers applied to the composition, in order (the user layer,
    /// then `--patch` files).
    pub layers: Vec<Layer>,
    /// A harness store root to keep sessions in (`--root`), over the
    /// composition's persistence entry and the state directory; its
    /// encoding is detected from the logs in it.
    pub session_root: Option<PathBuf>,
    /// Sealed copies to load libraries from instead of their files, by
    /// canonical source (handed over by a `cordis dev` that re-executed
    /// itself; see [`crate::reload::restart`]).
    pub adopted_copies: Vec<(PathBuf, crate::loader::library::SealedCopy)>,
}

/// Booting failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The composition could not be read.
    #[error(transparent)]
    Composition(#[from] CompositionError),
    /// The session store (state directory, `--root`) could not be opened.
    #[error("session store: {0}")]
    Store(#[from] StoreError),
}

/// A booted host.
pub struct Host {
    /// The composition it booted from.
    pub composition: Composition,
    /// Its services.
    pub services: Arc<Services>,
    /// The loader holding the applied entries.
    pub loader: Loader,
    /// One report per entry.
    pub reports: Vec<EntryReport>,
    /// The state directory (even when sessions are in memory).
    pub state_dir: PathBuf,
    /// The compaction the composition configured (its `compaction-basic`
    /// entry), if any.
    pub compaction: Option<Arc<Compactor>>,
}

impl Host {
    /// Reads the composition and applies its entries.
    ///
    /// # Errors
    /// [`BootError`] when the composition as a whole is unusable or the state
    /// directory cannot be created; entry failures are in `reports`.
    pub fn boot(options: &HostOptions) -> Result<Host, BootError> {
        let composition = Composition::compose(&options.composition, &options.layers)?;
        let state_dir = options.state_dir.clone().unwrap_or_else(|| composition.dir.join(".cordis"));
        let store = open_store(options, &state_dir, chosen_persistence(&composition))?;
        let services = Arc::new(Services::new(store, options.durability));
        let plugin_path = PluginPath::standard(&options.plugin_dirs, &composition.dir);
        let cache = if options.private_copies { LibraryCache::private_copies() } else { LibraryCache::default() }
            .allow_writable(options.allow_writable_plugins);
        cache.adopt(options.adopted_copies.clone());
        let loader = Loader::with_cache(services.clone(), plugin_path, cache);
        let mut reports = loader.load(&composition);
        // A refused compaction config is reported by the loader as a failed
        // entry; two enabled compaction entries fail the second, as two
        // stores do; the host then runs without compaction.
        let compaction = match crate::loader::compaction::select(&composition.entries) {
            Ok(chosen) => chosen.map(|c| Arc::new(Compactor::new(c))),
            Err(messages) => {
                let compacting: Vec<usize> = reports
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| {
                        crate::loader::compaction::is_compaction(&r.name) && !matches!(r.state, EntryState::Disabled | EntryState::Failed(_))
                    })
                    .map(|(i, _)| i)
                    .collect();
                for i in compacting.into_iter().skip(1) {
                    reports[i].state = EntryState::Failed(messages.clone());
                }
                None
            }
        };
        // Two enabled ACP entries fail the second, as `cordis acp` refuses them.
        if let Err(messages) = crate::loader::acp::select(&composition.entries) {
            let acps: Vec<usize> = reports
                .iter()
                .enumerate()
                .filter(|(_, r)| crate::loader::acp::is_acp(&r.name) && !matches!(r.state, EntryState::Disabled | EntryState::Failed(_)))
                .map(|(i, _)| i)
                .collect();
            for i in acps.into_iter().skip(1) {
                reports[i].state = EntryState::Failed(messages.clone());
            }
        }
        if compaction.is_some() {
            let carried = crate::loader::compaction::carried(&services.projections);
            for r in reports.iter_mut().filter(|r| crate::loader::compaction::is_compaction(&r.name) && !r.notes.is_empty()) {
                if let Some(note) = r.notes.last_mut() {
                    note.push_str("; ");
                    note.push_str(&carried);
                }
            }
        }
        Ok(Host { composition, services, loader, reports, state_dir, compaction })
    }

    /// A host with no entries (no composition file), for commands that only
    /// read or copy session logs. The state directory is `.cordis/` in the
    /// current folder unless given.
    ///
    /// # Errors
    /// [`BootError::Store`].
    pub fn boot_without_composition(options: &HostOptions) -> Result<Host, BootError> {
        let composition = Composition::parse(&options.composition.display().to_string(), PathBuf::from("."), "[]".into())?;
        let state_dir = options.state_dir.clone().unwrap_or_else(|| PathBuf::from(".cordis"));
        let store = open_store(options, &state_dir, Ok(None))?;
        let services = Arc::new(Services::new(store, options.durability));
        let loader = Loader::new(services.clone(), PluginPath::standard(&options.plugin_dirs, Path::new(".")));
        Ok(Host { composition, services, loader, reports: Vec::new(), state_dir, compaction: None })
    }

    /// The store the composition keeps its sessions in, opened for
    /// reading on its own (for a host booted with `in_memory`, such as
    /// `cordis check`'s): `--root`, else the composition's persistence
    /// entry, else the flat store in the state directory. Nothing is
    /// created: `Ok(None)` when that is the flat store and nothing is at
    /// the state directory's `sessions/` yet. A PostgreSQL database that
    /// cannot be reached gives a store whose every call says why.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be opened (a harness root that
    /// is a file, a refused persistence entry).
    pub fn open_session_store(&self, options: &HostOptions) -> Result<Option<Store>, StoreError> {
        let chosen = chosen_persistence(&self.composition);
        if options.session_root.is_none() && matches!(chosen, Ok(None)) && !self.state_dir.join("sessions").exists() {
            return Ok(None);
        }
        if let Err(reasons) = &chosen {
            return Err(StoreError::Unusable(reasons.join("; ")));
        }
        let reading = HostOptions { in_memory: false, ..options.clone() };
        open_store(&reading, &self.state_dir, chosen)
    }

    /// Reports of entries that failed (under `strict`, also those missing
    /// or waiting).
    pub fn failures(&self, strict: bool) -> Vec<&EntryReport> {
        self.reports.iter().filter(|r| r.state.fails(strict)).collect()
    }

    /// The composition's folder.
    pub fn dir(&self) -> &Path {
        &self.composition.dir
    }
}

/// The persistence the composition chooses: its persistence entry, else an
/// ACP entry's `persistenceRoot` (the harness's row), else none (the flat
/// store); the reasons when its persistence entries are refused.
fn chosen_persistence(composition: &Composition) -> Result<Option<Persistence>, Vec<String>> {
    // A refused store entry is reported by the loader as a failed entry;
    // sessions are then refused rather than kept somewhere else.
    match persistence::select(&composition.entries).map(|c| c.map(|(_, p)| p)) {
        Ok(None) => match crate::loader::acp::select(&composition.entries) {
            Ok(Some(acp)) => Ok(acp.store(&composition.dir).map(Persistence::Harness)),
            _ => Ok(None),
        },
        other => other,
    }
}

/// The store sessions go to: `--root` (a harness root, encoding detected),
/// else the composition's persistence entry, else the flat store in
/// `state_dir`; none when sessions stay in memory.
fn open_store(options: &HostOptions, state_dir: &Path, chosen: Result<Option<Persistence>, Vec<String>>) -> Result<Option<Store>, StoreError> {
    if options.in_memory {
        return Ok(None);
    }
    let store: Store = match (&options.session_root, chosen) {
        (Some(root), _) => Arc::new(HarnessStore::detect(root)?),
        (None, Err(reasons)) => Arc::new(UnusableStore { reason: reasons.join("; ") }),
        (None, Ok(Some(Persistence::Harness(c)))) => Arc::new(HarnessStore::new(&c.root, c.compression, c.pack_chunks)?),
        // A database that cannot be reached leaves the host running (so
        // `check` reports everything else) with every session refused.
        #[cfg(feature = "postgres")]
        (None, Ok(Some(Persistence::Postgres(c)))) => {
            match c
                .resolve_url()
                .map_err(StoreError::Unusable)
                .and_then(|url| PostgresStore::connect(&url, &c.schema, std::time::Duration::from_secs(c.lease_seconds)))
            {
                Ok(store) => Arc::new(store),
                Err(StoreError::Unusable(reason)) => Arc::new(UnusableStore { reason }),
                Err(e) => Arc::new(UnusableStore { reason: e.to_string() }),
            }
        }
        (None, Ok(None)) => Arc::new(FlatStore::open(state_dir)?),
    };
    Ok(Some(store))
}
