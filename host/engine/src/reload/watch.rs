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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;

use notify::{RecursiveMode, Watcher};

use super::libraries::{canonical_even_if_gone as canonical, targets, wait_until_complete};
use super::{Awaited, DevHost, Outcome};

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
    let mut watched = Watched::new();
    // What was awaited after the last batch: a file awaited anew (a row or
    // a link now names it) may be there already, with no event to come.
    let (_, mut awaited) = sync_watches(&dev, &mut watcher, &mut watched);
    dev.hold_sources();
    std::thread::Builder::new()
        .name("cordis-dev-watch".into())
        .spawn(move || {
            let (debounce, settle) = (dev.options.debounce, dev.options.settle);
            while let Ok(first) = rx.recv() {
                let mut changed: HashSet<PathBuf> = HashSet::new();
                let mut next = Some(first);
                // A change to a composition file waits until every watched
                // file has been quiet for the settle time, so a file saved
                // in parts is applied once, whole.
                let composition: HashSet<PathBuf> = dev.composition_files().iter().map(|p| canonical(p)).collect();
                let mut quiet = debounce;
                while let Some((path, handled)) = next.take() {
                    if composition.contains(&path) || composition.contains(&canonical(&path)) {
                        quiet = quiet.max(settle);
                    }
                    if handled {
                        changed.remove(&path);
                    } else {
                        changed.insert(path);
                    }
                    next = rx.recv_timeout(quiet).ok();
                }
                handle(&dev, &changed, true);
                // Each awaited set is checked for files already in place
                // once it is computed, before it becomes `awaited`; a
                // check that finds some handles them and looks again
                // (bounded: handling one can await another).
                for _ in 0..8 {
                    let (newly, now) = sync_watches(&dev, &mut watcher, &mut watched);
                    let (landed, present) = landed_unseen(&dev, &newly, &now, &awaited);
                    awaited = now;
                    if landed.is_empty() && present.is_empty() {
                        break;
                    }
                    if !landed.is_empty() {
                        handle(&dev, &landed, true);
                    }
                    if !present.is_empty() {
                        handle(&dev, &present, false);
                    }
                }
                dev.hold_sources();
                dev.release_replaced();
            }
        })
        .map_err(|e| format!("cannot start the watcher thread: {e}"))?;
    Ok(())
}

/// Whether an event can change a file's content, presence or whether it
/// may be loaded.
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    use notify::EventKind;
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        // Metadata counts: a library's permissions (or its folder's)
        // decide whether it may be loaded.
        _ => true,
    }
}

/// Whether an event says a writer is done with the file: closed after
/// writing, renamed into place, or created (a hard link to a finished file).
fn writer_finished(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, ModifyKind};
    use notify::EventKind;
    matches!(kind, EventKind::Access(AccessKind::Close(AccessMode::Write)) | EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(_)))
}

/// Reloads `path` at once if it is a watched library and a complete ELF
/// file; returns whether it was handled.
fn reload_finished_library(dev: &DevHost, path: &Path) -> bool {
    // The watched folders are canonical, so an event's path usually is
    // too: resolving it again is skipped when it names a library as is.
    // A symlink made or re-pointed is a change of the entries naming it,
    // which the debounced check finds; here it would read as the file it
    // points to, which may be another entry's library and unchanged.
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return false;
    }
    let sources = dev.library_sources();
    let path = if sources.iter().any(|s| s == path) { path.to_path_buf() } else { canonical(path) };
    if !sources.contains(&path) {
        return false;
    }
    if crate::loader::library::check_elf(&path).is_err() {
        return false;
    }
    // Being written still (or its times set just after, `cp -p`): the
    // debounced check takes it once it has settled.
    !matches!(dev.library_changed(&path), Outcome::Unsettled)
}

/// Handles the files of one batch: `raw` as the events named them. `seen`:
/// they come from file events (not from a look for files that may have
/// landed unseen), so a library an entry waits for is told as appeared.
fn handle(dev: &DevHost, raw: &HashSet<PathBuf>, seen: bool) {
    let changed: HashSet<PathBuf> = raw.iter().map(|p| canonical(p)).collect();
    let targets = targets(dev);
    // A symlink an entry names, created, re-pointed or removed: the entry
    // may now resolve to another file, which a composition reload finds.
    let named = dev.named_libraries();
    let mut composition = raw.iter().any(|p| named.contains(p));
    let mut libraries = Vec::new();
    for (path, is_composition) in &targets {
        // A file changed, or its folder's metadata (permissions fixed).
        if changed.contains(path) || path.parent().is_some_and(|folder| changed.contains(folder)) {
            if *is_composition {
                composition = true;
            } else {
                libraries.push(path.clone());
            }
        }
    }
    // A library an entry waits for has appeared (the entry named it
    // before it was first built): loading it is a composition reload.
    if !composition {
        let awaited_by = dev.awaited_entries();
        let awaited: Vec<&Awaited> = awaited_by.iter().map(|(_, a)| a).collect();
        // As named (a symlink made where an entry looks) or as resolved.
        // Each file once, as resolved.
        let appeared: HashSet<PathBuf> = raw.iter().chain(&changed).filter(|p| awaited.iter().any(|a| a.matches(p))).map(|p| canonical(p)).collect();
        let mut ready = Vec::new();
        for path in &appeared {
            if std::fs::metadata(path).is_err() {
                // A symlink pointing where nothing is yet (what it points to
                // is awaited too), or a file gone again.
                if let Some(to) = crate::loader::resolve::dangling_end(path) {
                    dev.note(format!(
                        "{} links to {}, which is not there yet; the entries waiting for it load when it is",
                        path.display(),
                        to.display()
                    ));
                }
                continue;
            }
            match wait_until_complete(path, dev.options.debounce, dev.options.settle_timeout) {
                Ok(()) => ready.push(path.display().to_string()),
                Err(e) => dev.note(format!("{e}; the entries waiting for it stay unloaded")),
            }
        }
        if !ready.is_empty() {
            if seen {
                dev.note(format!("{} appeared; loading the entries waiting for it", ready.join(", ")));
                // A new build: what comes of it is told, even if the last
                // one failed the same way.
                let ids: Vec<String> = awaited_by.iter().filter(|(_, a)| appeared.iter().any(|p| a.matches(p))).map(|(id, _)| id.clone()).collect();
                dev.forget_problems(&ids);
            }
            composition = true;
        }
    }
    if composition {
        dev.composition_changed();
    }
    for lib in libraries {
        // A file still moving as it is copied is waited on again, a few
        // times; a writer that goes on brings more events.
        for _ in 0..3 {
            match wait_until_complete(&lib, dev.options.debounce, dev.options.settle_timeout) {
                Ok(()) if matches!(dev.library_changed(&lib), Outcome::Unsettled) => continue,
                Ok(()) => {}
                Err(e) => dev.note(format!("{e}; the previous version keeps serving")),
            }
            break;
        }
    }
}

/// The folders under watch, each with the identity (device, inode) it had
/// when its watch was added: a folder deleted, renamed or made anew at the
/// same path no longer matches and is watched again.
type Watched = HashMap<PathBuf, (u64, u64)>;

fn folder_identity(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()))
}

/// Brings the watches in line with the folders a change could come from:
/// each watched file's folder, or while that folder is missing (a
/// `cargo clean`, a deleted `target`), its nearest folder that exists, so
/// that the folders below it are watched as they come back. Folders that
/// are gone, were replaced, or are no longer needed lose their watch.
/// Repeats until nothing changes, since a folder can appear between a
/// look and its watch. Returns the folders newly watched, and the
/// awaited libraries as the last look found them.
fn sync_watches(dev: &DevHost, watcher: &mut notify::RecommendedWatcher, watched: &mut Watched) -> (Vec<PathBuf>, BTreeSet<Awaited>) {
    let mut added = Vec::new();
    let mut failed: HashSet<PathBuf> = HashSet::new();
    loop {
        let awaited: BTreeSet<Awaited> = dev.awaited_libraries().into_iter().collect();
        let mut wanted: HashSet<PathBuf> =
            targets(dev).into_keys().chain(dev.named_libraries()).filter_map(|path| path.parent().map(Path::to_path_buf)).collect();
        wanted.extend(awaited.iter().map(|a| a.folder.clone()));
        let wanted: HashSet<PathBuf> = wanted.iter().filter_map(|f| f.ancestors().find(|a| a.is_dir()).map(canonical)).collect();
        let stale: Vec<PathBuf> =
            watched.iter().filter(|(dir, id)| !wanted.contains(*dir) || folder_identity(dir) != Some(**id)).map(|(dir, _)| dir.clone()).collect();
        for dir in stale {
            // A deleted folder's watch is gone already; an error says so.
            let _ = watcher.unwatch(&dir);
            watched.remove(&dir);
        }
        let mut more = false;
        for dir in wanted {
            if watched.contains_key(&dir) || failed.contains(&dir) {
                continue;
            }
            let Some(id) = folder_identity(&dir) else { continue };
            match watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    watched.insert(dir.clone(), id);
                    added.push(dir);
                    more = true;
                }
                Err(e) => {
                    dev.note(format!("cannot watch {}: {e}", dir.display()));
                    failed.insert(dir);
                }
            }
        }
        if !more {
            return (added, awaited);
        }
    }
}

/// The files that may have landed unseen: (in the folders just watched,
/// libraries awaited already, which can land in a folder in the moment
/// between the folder appearing and its watch being added, and watched
/// files, a library rebuilt into a re-created `target`; libraries awaited
/// anew, `now` but not `before`, that are there already).
fn landed_unseen(
    dev: &DevHost,
    newly_watched: &[PathBuf],
    now: &BTreeSet<Awaited>,
    before: &BTreeSet<Awaited>,
) -> (HashSet<PathBuf>, HashSet<PathBuf>) {
    let is_new = |folder: &Path| newly_watched.iter().any(|n| n == folder);
    let mut landed: HashSet<PathBuf> = targets(dev).into_keys().filter(|p| p.parent().is_some_and(is_new) && p.is_file()).collect();
    let mut present = HashSet::new();
    for awaited in now.iter().filter(|a| is_new(&a.folder) || !before.contains(*a)) {
        let found: Vec<PathBuf> = match &awaited.file {
            Some(file) => Some(awaited.folder.join(file)).filter(|p| p.is_file()).into_iter().collect(),
            None => {
                let Ok(list) = std::fs::read_dir(&awaited.folder) else { continue };
                list.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file() && awaited.matches(&canonical(p))).collect()
            }
        };
        // Awaited before, in a folder just watched: it landed in the
        // moment the folder had no watch. Awaited only now: it was there.
        if before.contains(awaited) {
            landed.extend(found);
        } else {
            present.extend(found);
        }
    }
    (landed, present)
}
