//! Which plugin libraries this host binary has already found compatible,
//! so that an unchanged library is not put through abi_stable's layout
//! check at every start.
//!
//! The layout check walks every type reachable from a library's root
//! module and compares it with the host's; on the default composition it
//! is about 40 % of the instructions of `cordis check`. Its verdict
//! depends only on the bytes of the host binary, the bytes of the library
//! and, through abi_stable's cross-library checks of prefix types and
//! non-exhaustive enums, on the libraries checked before it in the same
//! process. So a pass is remembered for a *sequence*: the running
//! executable's file identity and the file identities of the libraries
//! loaded in this process, in order, up to and including the one checked.
//! A later process that loads the same files in the same order skips the
//! check for each of them (abi_stable's `init_root_module_with_unchecked_layout`,
//! which still checks the abi_stable version). At the first library that
//! does not continue a remembered sequence, every library skipped so far is
//! checked after all, in order, before that one is, so abi_stable's
//! cross-library state is what it would have been without skipping.
//!
//! A file identity ([`FileKey`]) is the device, inode, size, modification
//! time and status-change time (nanoseconds) of a file. No program can set
//! a file's status-change time: any write, truncation, rename onto the
//! path or change of mode sets it to the current time, so a library that
//! changes gets a new identity. File times come from a coarse clock (a few
//! milliseconds per tick), so a change in the same tick as the identity
//! read could keep it; a pass is therefore remembered only when every file
//! of the sequence last changed at least [`SETTLED`] before the check. A
//! library loaded in place is identified by `stat` before and after
//! `dlopen` (both must agree); a sealed private copy by its source's
//! identity while it was copied.
//!
//! The record is a text file, one remembered sequence per line (`HOST
//! SEQUENCE`, the host's identity and a 64-bit hash of the sequence), at
//! `$CORDIS_CACHE_DIR/verified-layouts`, else
//! `$XDG_CACHE_HOME/cordis/verified-layouts`, else
//! `$HOME/.cache/cordis/verified-layouts`. `CORDIS_CACHE_DIR=off` turns it
//! off (every library is checked). The file keeps at most
//! [`MAX_LINES`] lines. Nothing here is an error: a record that cannot be
//! read or written means the check runs, as without it.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use abi_stable::library::{LibHeader, LibraryError};
use cordis_abi::PluginLibraryRef;
use cordis_sync::LockExt;

/// How long before a check every file of a sequence must have last
/// changed for a pass to be remembered.
pub const SETTLED: Duration = Duration::from_secs(2);

/// Lines the record keeps; past twice this, it is rewritten with the
/// newest [`MAX_LINES`].
pub const MAX_LINES: usize = 512;

/// The environment variable naming the folder of the record (`off`: no
/// record).
pub const CACHE_DIR_VAR: &str = "CORDIS_CACHE_DIR";

const RECORD: &str = "verified-layouts";

/// A file's identity: device, inode, size, modification and status-change
/// times (seconds and nanoseconds since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileKey {
    /// The identity `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> FileKey {
        use std::os::unix::fs::MetadataExt;
        FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The identity of the file at `path` (links followed), if it can be
    /// read.
    pub fn of_path(path: &Path) -> Option<FileKey> {
        std::fs::metadata(path).ok().map(|m| FileKey::of(&m))
    }

    /// Whether the file last changed at least [`SETTLED`] before `now`.
    pub fn settled(&self, now: SystemTime) -> bool {
        let Ok(since_epoch) = now.duration_since(SystemTime::UNIX_EPOCH) else { return false };
        let Some(limit) = since_epoch.checked_sub(SETTLED) else { return false };
        let (secs, nanos) = self.ctime;
        let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else { return false };
        nanos < 1_000_000_000 && Duration::new(secs, nanos) <= limit
    }
}

impl std::fmt::Display for FileKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}:{}.{}:{}.{}", self.dev, self.ino, self.size, self.mtime.0, self.mtime.1, self.ctime.0, self.ctime.1)
    }
}

/// What became of one library's layout check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Checked now, and it passed.
    Checked,
    /// Skipped: this sequence passed in an earlier process.
    Remembered,
}

/// The record of this process: the remembered sequences of this host, and
/// the sequence loaded so far.
struct Record {
    /// The record's file, `None` when there is none.
    file: Option<PathBuf>,
    /// The running executable's identity, as written in the record.
    host: Option<String>,
    /// The sequences remembered for this host (hashes).
    known: HashSet<u64>,
    /// The identities of the libraries loaded so far, in order.
    loaded: Vec<FileKey>,
    /// Headers of libraries loaded without their check, in order, until a
    /// check runs.
    skipped: Vec<&'static LibHeader>,
    /// The sequence can no longer be remembered or continued (a library
    /// with no identity or not settled, or one refused).
    broken: bool,
    /// Every identity of the sequence was settled when it was checked.
    all_settled: bool,
}

fn record() -> &'static Mutex<Record> {
    static RECORD_STATE: OnceLock<Mutex<Record>> = OnceLock::new();
    RECORD_STATE.get_or_init(|| Mutex::new(Record::open(record_file(|k| std::env::var_os(k)))))
}

/// The record's file from the environment (`var` reads a variable), `None`
/// when it is turned off or no folder is known.
fn record_file(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.is_empty());
    if let Some(dir) = set(CACHE_DIR_VAR) {
        return (dir != "off").then(|| PathBuf::from(dir).join(RECORD));
    }
    if let Some(dir) = set("XDG_CACHE_HOME").map(PathBuf::from).filter(|d| d.is_absolute()) {
        return Some(dir.join("cordis").join(RECORD));
    }
    set("HOME").map(|home| PathBuf::from(home).join(".cache").join("cordis").join(RECORD))
}

impl Record {
    fn open(file: Option<PathBuf>) -> Record {
        let now = SystemTime::now();
        let host = file.as_ref().and_then(|_| FileKey::of_path(Path::new("/proc/self/exe"))).filter(|k| k.settled(now));
        let host = host.map(|k| k.to_string());
        let mut known = HashSet::new();
        if let (Some(path), Some(host)) = (&file, &host) {
            if let Ok(text) = std::fs::read_to_string(path) {
                known = text
                    .lines()
                    .filter_map(|line| line.split_once(' '))
                    .filter(|(h, _)| h == host)
                    .filter_map(|(_, seq)| u64::from_str_radix(seq.trim(), 16).ok())
                    .collect();
                if text.lines().count() > 2 * MAX_LINES {
                    trim(path, &text);
                }
            }
        }
        let broken = file.is_none() || host.is_none();
        Record { file, host, known, loaded: Vec::new(), skipped: Vec::new(), broken, all_settled: true }
    }

    fn sequence_with(&self, key: &FileKey) -> u64 {
        let mut hasher = std::hash::DefaultHasher::new();
        self.loaded.len().hash(&mut hasher);
        for k in &self.loaded {
            k.hash(&mut hasher);
        }
        key.hash(&mut hasher);
        hasher.finish()
    }

    fn remember(&mut self, sequence: u64) {
        let (Some(path), Some(host)) = (&self.file, &self.host) else { return };
        if !self.known.insert(sequence) {
            return;
        }
        let line = format!("{host} {sequence:016x}\n");
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::OpenOptions::new().create(true).append(true).open(path)?.write_all(line.as_bytes()));
        if let Err(e) = written {
            tracing::debug!("cannot write {}: {e}", path.display());
        }
    }
}

/// Rewrites the record with its newest [`MAX_LINES`] lines (a new file
/// renamed over it).
fn trim(path: &Path, text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    let kept = lines[lines.len().saturating_sub(MAX_LINES)..].join("\n") + "\n";
    let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
    if std::fs::write(&temporary, kept).and_then(|()| std::fs::rename(&temporary, path)).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

/// Initialises the root module of `header`, the library whose file has
/// identity `key` (`None`: unknown), checking its layout unless the
/// sequence of libraries loaded in this process, ending with this one,
/// passed before with this host binary.
///
/// # Errors
/// abi_stable's [`LibraryError`]: a version or layout refused, or the
/// root module failing to initialise. A refused library leaves the rest of
/// this process's libraries checked in full.
pub fn init_root_module(header: &'static LibHeader, key: Option<FileKey>) -> Result<(PluginLibraryRef, Verdict), LibraryError> {
    let mut rec = record().lock_or_recover();
    let sequence = key.filter(|_| !rec.broken).map(|k| rec.sequence_with(&k));
    if let (Some(key), Some(sequence)) = (key, sequence) {
        if rec.known.contains(&sequence) {
            // SAFETY: this host binary checked this library file, unchanged
            // since (same identity, settled), with the same libraries before
            // it in the same order, and found every layout compatible.
            let module = unsafe { header.init_root_module_with_unchecked_layout::<PluginLibraryRef>() };
            if module.is_ok() {
                rec.loaded.push(key);
                rec.skipped.push(header);
            } else {
                rec.broken = true;
            }
            return module.map(|m| (m, Verdict::Remembered));
        }
    }
    // abi_stable's cross-library state must hold every library loaded
    // before this one: check the skipped ones now, in their order (each
    // passed in this order before, so they pass again).
    for skipped in std::mem::take(&mut rec.skipped) {
        if let Err(e) = skipped.ensure_layout::<PluginLibraryRef>() {
            tracing::warn!("a plugin library loaded earlier without its layout check fails it now: {e}");
            rec.broken = true;
        }
    }
    let module = header.init_root_module::<PluginLibraryRef>();
    match (&module, key, sequence) {
        (Ok(_), Some(key), Some(sequence)) => {
            rec.all_settled &= key.settled(SystemTime::now());
            rec.loaded.push(key);
            if rec.all_settled {
                rec.remember(sequence);
            }
        }
        _ => rec.broken = true,
    }
    module.map(|m| (m, Verdict::Checked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn key(ctime: i64) -> FileKey {
        FileKey { dev: 1, ino: 2, size: 3, mtime: (ctime, 0), ctime: (ctime, 5) }
    }

    #[test]
    fn a_file_is_settled_two_seconds_after_it_last_changed() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        assert!(key(997).settled(now));
        assert!(!key(998).settled(now), "998.000000005 is less than 2 s before 1000");
        assert!(!key(1_000).settled(now));
        assert!(!key(2_000).settled(now), "a time in the future is not settled");
        assert!(!key(-5).settled(now), "a time before the epoch is not trusted");
    }

    #[test]
    fn the_record_is_where_the_environment_says() {
        let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| OsString::from(v));
        let at = |p: Option<PathBuf>| p.map(|p| p.display().to_string());
        assert_eq!(at(record_file(env(&[("CORDIS_CACHE_DIR", "/c"), ("HOME", "/h")]))).as_deref(), Some("/c/verified-layouts"));
        assert_eq!(at(record_file(env(&[("CORDIS_CACHE_DIR", "off"), ("HOME", "/h")]))), None);
        assert_eq!(at(record_file(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]))).as_deref(), Some("/x/cordis/verified-layouts"));
        assert_eq!(
            at(record_file(env(&[("XDG_CACHE_HOME", "relative"), ("HOME", "/h")]))).as_deref(),
            Some("/h/.cache/cordis/verified-layouts"),
            "a relative XDG_CACHE_HOME is ignored, as the XDG spec says"
        );
        assert_eq!(at(record_file(env(&[]))), None);
    }

    #[test]
    fn a_long_record_keeps_its_newest_lines() {
        let dir = std::env::temp_dir().join(format!("cordis-verified-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(RECORD);
        let text: String = (0..2 * MAX_LINES + 10).map(|i| format!("h {i:016x}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        trim(&path, &text);
        let kept = std::fs::read_to_string(&path).unwrap();
        assert_eq!(kept.lines().count(), MAX_LINES);
        assert_eq!(kept.lines().last(), Some(format!("h {:016x}", 2 * MAX_LINES + 9).as_str()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_sequence_depends_on_the_libraries_before_it_and_their_order() {
        let mut rec = Record::open(None);
        let (a, b) = (key(10), key(20));
        let alone = rec.sequence_with(&b);
        rec.loaded.push(a);
        let after_a = rec.sequence_with(&b);
        assert_ne!(alone, after_a);
        let mut other = Record::open(None);
        other.loaded.push(b);
        assert_ne!(other.sequence_with(&a), after_a, "the same two libraries in the other order");
    }
}
