//! Reloading the composition: entries diffed by `id`, changed rows
//! applied again, new ones added, removed ones disposed, and a change that
//! fails leaving the running fiber as it was.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use cordis_sync::LockExt;

use crate::loader::{Composition, Entry, EntryState, Prepared};

use super::libraries::lead;
use super::{collect_enabled, enabled_rows, leaves, DevHost, Outcome};

impl DevHost {
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
    pub(super) fn retry_refused_builds(&self, outcome: Outcome, edited: &HashSet<String>) -> Outcome {
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
    pub(super) fn refresh_library(&self, entry: &Entry) -> Result<(), String> {
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
    pub(super) fn resolves_elsewhere(&self, id: &str, entry: &Entry) -> bool {
        let loader = &self.host.loader;
        let Some(running) = loader.with_active(id, |a| a.library.source.clone()) else { return false };
        lead(entry, loader.plugin_path()).is_some_and(|lead| lead.target != running)
    }

    /// Applies the composition as it reads now; `edited` gets the ids of
    /// the running entries whose row changed in this edit and is not the
    /// one they run.
    pub(super) fn apply_composition(&self, edited: &mut HashSet<String>) -> Outcome {
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
}
