//! The watcher thread of `cordis dev`: file events → debounced changes →
//! reloads.
//!
//! Folders are watched rather than files, since builds delete and recreate
//! library files (cargo links a fresh file, then hard-links it into place).
//!
//! A library whose writer has finished with it (closed after writing,
//! renamed or linked into place) and that checks out as a complete ELF file
//! is reloaded at once, on the thread that reads the file events. Any other
//! change waits for the debounce on our own thread: the file must stop
//! changing first.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use notify::{RecursiveMode, Watcher};

use super::{targets, wait_until_complete, DevHost};

/// Starts watching the composition and every loaded library; changes are
/// handled on a background thread until the process exits.
///
/// # Errors
/// When the watcher cannot be created.
pub fn watch(dev: Arc<DevHost>) -> Result<(), String> {
    // (path, whether it was reloaded already)
    let (tx, rx) = mpsc::channel::<(PathBuf, bool)>();
    let on_event = dev.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res {
            // Reads (our own included: copying a library, reading the
            // composition) are not changes.
            if !is_change(&event.kind) {
                return;
            }
            let finished = writer_finished(&event.kind);
            for path in event.paths {
                // A finished library is reloaded here, on the watcher's
                // own thread, without a hand-over to ours: the reload
                // starts as soon as the event is read.
                let handled = finished && reload_finished_library(&on_event, &path);
                let _ = tx.send((path, handled));
            }
        }
    })
    .map_err(|e| format!("cannot watch files: {e}"))?;
    let mut watched: HashSet<PathBuf> = HashSet::new();
    sync_watches(&dev, &mut watcher, &mut watched);
    dev.hold_sources();
    std::thread::Builder::new()
        .name("cordis-dev-watch".into())
        .spawn(move || {
            let debounce = dev.options.debounce;
            while let Ok(first) = rx.recv() {
                let mut changed: HashSet<PathBuf> = HashSet::new();
                let mut next = Some(first);
                while let Some((path, handled)) = next.take() {
                    if handled {
                        changed.remove(&path);
                    } else {
                        changed.insert(path);
                    }
                    next = rx.recv_timeout(debounce).ok();
                }
                handle(&dev, &changed);
                sync_watches(&dev, &mut watcher, &mut watched);
                dev.hold_sources();
                dev.release_replaced();
            }
        })
        .map_err(|e| format!("cannot start the watcher thread: {e}"))?;
    Ok(())
}

/// Whether an event can change a file's content or presence.
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    use notify::EventKind;
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(notify::event::ModifyKind::Metadata(_)) => false,
        _ => true,
    }
}

/// Whether an event says a writer is done with the file: closed after
/// writing, renamed into place, or created (a hard link to a finished file).
fn writer_finished(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, ModifyKind};
    use notify::EventKind;
    matches!(
        kind,
        EventKind::Access(AccessKind::Close(AccessMode::Write)) | EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(_))
    )
}

/// Reloads `path` at once if it is a watched library and a complete ELF
/// file; returns whether it was handled.
fn reload_finished_library(dev: &DevHost, path: &Path) -> bool {
    // The watched folders are canonical, so an event's path usually is
    // too: resolving it again is skipped when it names a library as is.
    let sources = dev.library_sources();
    let path = if sources.iter().any(|s| s == path) { path.to_path_buf() } else { canonical(path) };
    if !sources.contains(&path) {
        return false;
    }
    if crate::loader::library::check_elf(&path).is_err() {
        return false;
    }
    dev.library_changed(&path);
    true
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

fn handle(dev: &DevHost, changed: &HashSet<PathBuf>) {
    let changed: HashSet<PathBuf> = changed.iter().map(|p| canonical(p)).collect();
    let targets = targets(dev);
    let mut composition = false;
    let mut libraries = Vec::new();
    for (path, is_composition) in &targets {
        if changed.contains(path) {
            if *is_composition {
                composition = true;
            } else {
                libraries.push(path.clone());
            }
        }
    }
    if composition {
        dev.composition_changed();
    }
    for lib in libraries {
        match wait_until_complete(&lib, dev.options.debounce, dev.options.settle_timeout) {
            Ok(()) => {
                dev.library_changed(&lib);
            }
            Err(e) => dev.note(format!("{e}; the previous version keeps serving")),
        }
    }
}

fn sync_watches(dev: &DevHost, watcher: &mut notify::RecommendedWatcher, watched: &mut HashSet<PathBuf>) {
    for (path, _) in targets(dev) {
        let Some(dir) = path.parent().map(Path::to_path_buf) else { continue };
        if watched.insert(dir.clone()) {
            if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
                dev.note(format!("cannot watch {}: {e}", dir.display()));
                watched.remove(&dir);
            }
        }
    }
}
