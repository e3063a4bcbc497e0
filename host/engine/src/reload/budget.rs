//! The memory budget of a dev host: replaced libraries stay mapped (a
//! library is never unloaded), so their bytes are counted, and past
//! [`DevOptions::memory_budget`](super::DevOptions::memory_budget) the host
//! restarts itself in place ([`super::restart`]) instead of loading more.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use cordis_sync::LockExt;

use crate::loader::library;

use super::{restart, DevHost};

impl DevHost {
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
    pub(super) fn over_budget(&self, len: u64) -> Option<String> {
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
    pub(super) fn hold_source(&self, source: &Path) {
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
}
