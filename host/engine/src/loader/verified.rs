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
//! executable's build ID and the contents of the libraries loaded in
//! this process, in order, up to and including the one checked. A later
//! process that loads the same contents in the same order skips the check
//! for each of them (abi_stable's `init_root_module_with_unchecked_layout`,
//! which still checks the abi_stable version). At the first library that
//! does not continue a remembered sequence, every library skipped so far is
//! checked after all, in order, before that one is, so abi_stable's
//! cross-library state is what it would have been without skipping.
//!
//! A library's content ([`ContentKey`]) is its length and a 64-bit hash
//! (foldhash's quality hasher, a fixed seed) of the bytes the dynamic
//! loader maps: the ELF header, the program headers and every loadable
//! segment, read from the very file that is then loaded (in place, a file
//! checked to be the one `dlopen` opened; else the sealed private copy).
//! For libtool_todo.so (1.7 MB) the hash itself takes about 0.07 ms once
//! the pages are in memory, and about 0.2 ms at a start with mapping and
//! reading them, against about 0.45 ms for the check it replaces. Only
//! libraries that need no shared library besides the C runtime's (libc,
//! libm, libgcc_s, the dynamic loader) are remembered: types laid out in
//! another library would not be covered by the hash.
//!
//! The host is identified by its executable's build ID: the
//! `.note.gnu.build-id` the linker writes (a hash of the linked file; GNU
//! ld, gold, lld and mold write one when asked, and rustc's usual `cc`
//! asks), read from the running program's own headers in memory, so it
//! names the code running even under valgrind or an explicit
//! `ld-linux.so` start. A host with no build ID remembers nothing.
//!
//! The record is a text file, one remembered sequence per line (`HOST
//! SEQUENCE`, the host's identity and a 64-bit hash of the sequence), at
//! `$CORDIS_CACHE_DIR/verified-layouts`, else
//! `$XDG_CACHE_HOME/cordis/verified-layouts`, else
//! `$HOME/.cache/cordis/verified-layouts` (relative folders are ignored).
//! `CORDIS_CACHE_DIR=off` turns it off (every library is checked). The
//! record is read and written only when it and its folder belong to this
//! user (or root) and no one else may write them, and never through a
//! symbolic link; it keeps at most [`MAX_LINES`] lines. Nothing here is an
//! error: a record that cannot be read or written, or is not trusted,
//! means the check runs, as without it.

use std::collections::HashSet;
use std::fs::File;
use std::hash::{BuildHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use abi_stable::library::{LibHeader, LibraryError};
use cordis_abi::PluginLibraryRef;
use cordis_sync::LockExt;

/// Lines the record keeps; past twice this, it is rewritten with the
/// newest [`MAX_LINES`].
pub const MAX_LINES: usize = 512;

/// A record larger than this (bytes) is not read, and is emptied.
pub const MAX_BYTES: u64 = 256 * 1024;

/// The environment variable naming the folder of the record (`off`: no
/// record).
pub const CACHE_DIR_VAR: &str = "CORDIS_CACHE_DIR";

const RECORD: &str = "verified-layouts";

/// Shared libraries a remembered library may need: the C runtime's, which
/// hold no abi_stable type.
const SYSTEM_LIBRARIES: [&str; 9] = [
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
];

/// A file's identity: device, inode, size, modification and status-change
/// times (seconds and nanoseconds since the epoch); two equal identities
/// read before and after `dlopen` mean the path named the same file.
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
}

/// A library's content: the length and a 64-bit hash of the bytes the
/// dynamic loader maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentKey {
    len: u64,
    hash: u64,
}

impl ContentKey {
    /// The content key of the first `extent` bytes of `file` (the ELF
    /// header, program headers and loadable segments: what
    /// [`super::library`] calls the loaded extent), or `None` when they
    /// cannot be mapped, or when the library needs a shared library other
    /// than the C runtime's.
    pub fn of(file: &File, extent: u64) -> Option<ContentKey> {
        let len = usize::try_from(extent).ok().filter(|&n| n > 0)?;
        // SAFETY: a private read-only mapping of `len` bytes of an open
        // file, unmapped below; it is read only through `image`.
        let map = unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, rustix::mm::ProtFlags::READ, rustix::mm::MapFlags::PRIVATE, file, 0).ok()? };
        // SAFETY: `map` is `len` readable bytes until the `munmap` below.
        let image = unsafe { std::slice::from_raw_parts(map.cast::<u8>(), len) };
        let key = needs_only_system_libraries(image).then(|| ContentKey { len: extent, hash: hash_of(image) });
        // SAFETY: `map` came from `mmap` with this length and is no longer read.
        let _ = unsafe { rustix::mm::munmap(map, len) };
        key
    }
}

fn hash_of(bytes: &[u8]) -> u64 {
    let mut hasher = foldhash::quality::FixedState::with_seed(0x0c0d_1a7e).build_hasher();
    hasher.write(bytes);
    hasher.finish()
}

/// Whether the ELF image (the loaded extent of a 64-bit little-endian
/// shared object) names no needed library besides [`SYSTEM_LIBRARIES`].
/// `false` for an image that cannot be read as one.
fn needs_only_system_libraries(image: &[u8]) -> bool {
    let u16_at = |o: usize| image.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at = |o: usize| image.get(o..o + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    let as_usize = |v: u64| usize::try_from(v).ok();
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(32).and_then(as_usize), u16_at(54), u16_at(56)) else { return false };
    let (phentsize, phnum) = (usize::from(phentsize), usize::from(phnum));
    if phentsize < 56 {
        return false;
    }
    // (type, offset, vaddr, filesz) of each program header.
    let headers: Option<Vec<(u32, u64, u64, u64)>> = (0..phnum)
        .map(|i| {
            let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
            let kind = image.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes)?;
            Some((kind, u64_at(at + 8)?, u64_at(at + 16)?, u64_at(at + 32)?))
        })
        .collect();
    let Some(headers) = headers else { return false };
    let Some(&(_, dyn_offset, _, dyn_size)) = headers.iter().find(|h| h.0 == 2) else {
        return true; // no dynamic section: nothing needed
    };
    let (mut needed, mut strtab) = (Vec::new(), None);
    let mut at = dyn_offset;
    while at.saturating_add(16) <= dyn_offset.saturating_add(dyn_size) {
        let (Some(tag), Some(value)) = (as_usize(at).and_then(u64_at), as_usize(at + 8).and_then(u64_at)) else { return false };
        match tag {
            0 => break,
            1 => needed.push(value),
            5 => strtab = Some(value),
            _ => {}
        }
        at += 16;
    }
    if needed.is_empty() {
        return true;
    }
    let Some(strtab) = strtab else { return false };
    // The string table's address, as an offset in the file.
    let Some(table) = headers.iter().find_map(|&(kind, offset, vaddr, filesz)| {
        (kind == 1 && vaddr <= strtab && strtab < vaddr.saturating_add(filesz)).then(|| offset + (strtab - vaddr))
    }) else {
        return false;
    };
    needed.iter().all(|&name| {
        let Some(start) = table.checked_add(name).and_then(as_usize) else { return false };
        let Some(rest) = image.get(start..) else { return false };
        let Some(end) = rest.iter().position(|&b| b == 0) else { return false };
        std::str::from_utf8(&rest[..end]).is_ok_and(|n| SYSTEM_LIBRARIES.contains(&n))
    })
}

/// The running executable's GNU build ID as hex, read from its program
/// headers in memory (`__ehdr_start`, which every ELF linker defines);
/// `None` when it has none.
fn build_id() -> Option<String> {
    extern "C" {
        static __ehdr_start: u8;
    }
    // `__ehdr_start` is the executable's ELF header, mapped readable with
    // its program headers (the first loadable segment holds both); only
    // the bytes those headers describe are read below.
    let base = std::ptr::addr_of!(__ehdr_start);
    // SAFETY: as above: an ELF header is 64 bytes.
    let header = unsafe { std::slice::from_raw_parts(base, 64) };
    if header[..4] != *b"\x7fELF" || header[4] != 2 {
        return None;
    }
    let phoff = usize::try_from(u64::from_le_bytes(header[32..40].try_into().ok()?)).ok()?;
    let phentsize = usize::from(u16::from_le_bytes([header[54], header[55]]));
    let phnum = usize::from(u16::from_le_bytes([header[56], header[57]]));
    if phentsize < 56 {
        return None;
    }
    // SAFETY: the program header table, `phnum` entries at `phoff`.
    let table = unsafe { std::slice::from_raw_parts(base.add(phoff), phentsize.checked_mul(phnum)?) };
    let field = |entry: &[u8], at: usize| entry.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    let kind = |entry: &[u8]| entry.get(0..4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    let entries: Vec<&[u8]> = table.chunks_exact(phentsize).collect();
    // The address the executable was loaded at, less its link address.
    let first = entries.iter().find(|e| kind(e) == Some(1) && field(e, 8) == Some(0))?;
    let bias = (base as usize).wrapping_sub(usize::try_from(field(first, 16)?).ok()?);
    for note in entries.iter().filter(|e| kind(e) == Some(4)) {
        let start = bias.wrapping_add(usize::try_from(field(note, 16)?).ok()?);
        let size = usize::try_from(field(note, 32)?).ok()?;
        // SAFETY: a PT_NOTE segment of the running executable, inside a
        // loaded segment, `size` bytes.
        let notes = unsafe { std::slice::from_raw_parts(start as *const u8, size) };
        let mut at = 0;
        while at + 12 <= notes.len() {
            let word = |o: usize| notes.get(o..o + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
            let (namesz, descsz, note_type) = (word(at)? as usize, word(at + 4)? as usize, word(at + 8)?);
            let name_at = at + 12;
            let desc_at = name_at + namesz.next_multiple_of(4);
            let next = desc_at + descsz.next_multiple_of(4);
            if note_type == 3 && notes.get(name_at..name_at + namesz) == Some(b"GNU\0".as_slice()) {
                let desc = notes.get(desc_at..desc_at + descsz)?;
                return (!desc.is_empty()).then(|| desc.iter().map(|b| format!("{b:02x}")).collect());
            }
            at = next;
        }
    }
    None
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
    /// The record's file, `None` when there is none or it is not trusted.
    file: Option<PathBuf>,
    /// The running executable's build ID, as written in the record.
    host: Option<String>,
    /// The sequences remembered for this host (hashes).
    known: HashSet<u64>,
    /// The contents of the libraries loaded so far, in order.
    loaded: Vec<ContentKey>,
    /// Headers of libraries loaded without their check, in order, until a
    /// check runs.
    skipped: Vec<&'static LibHeader>,
    /// The sequence can no longer be remembered or continued (a library
    /// with no content key, or one refused).
    broken: bool,
}

fn record() -> &'static Mutex<Record> {
    static RECORD_STATE: OnceLock<Mutex<Record>> = OnceLock::new();
    RECORD_STATE.get_or_init(|| Mutex::new(Record::open(record_file(|k| std::env::var_os(k)))))
}

/// The record's file from the environment (`var` reads a variable), `None`
/// when it is turned off or no folder is known. Relative folders are
/// ignored.
fn record_file(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let absolute = |k: &str| var(k).map(PathBuf::from).filter(|d| d.is_absolute());
    if var(CACHE_DIR_VAR).is_some_and(|v| v == "off") {
        return None;
    }
    if let Some(dir) = absolute(CACHE_DIR_VAR) {
        return Some(dir.join(RECORD));
    }
    if let Some(dir) = absolute("XDG_CACHE_HOME") {
        return Some(dir.join("cordis").join(RECORD));
    }
    absolute("HOME").map(|home| home.join(".cache").join("cordis").join(RECORD))
}

/// Whether `meta` belongs to this user (or root) and only its owner may
/// write it.
fn trusted(meta: &std::fs::Metadata) -> bool {
    let me = rustix::process::geteuid().as_raw();
    (meta.uid() == me || meta.uid() == 0) && meta.mode() & 0o022 == 0
}

/// The record's folder, if it exists and is trusted.
fn trusted_folder(path: &Path) -> bool {
    path.parent().and_then(|d| std::fs::metadata(d).ok()).is_some_and(|m| m.is_dir() && trusted(&m))
}

/// Opens the record at `path` (never through a symbolic link, and without
/// waiting on a FIFO or device put there), if it is a trusted regular file.
fn open_trusted(path: &Path, options: &mut std::fs::OpenOptions) -> Option<File> {
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = options.custom_flags(flags.bits() as i32).open(path).ok()?;
    let meta = file.metadata().ok()?;
    (meta.is_file() && trusted(&meta)).then_some(file)
}

impl Record {
    fn open(file: Option<PathBuf>) -> Record {
        let host = file.as_ref().and_then(|_| build_id());
        let mut known = HashSet::new();
        let mut usable = file.clone();
        if let (Some(path), Some(host)) = (&file, &host) {
            if path.parent().is_some_and(Path::exists) && !trusted_folder(path) {
                tracing::debug!("not using {}: its folder is not this user's alone", path.display());
                usable = None;
            } else if let Some(mut record) = open_trusted(path, std::fs::OpenOptions::new().read(true)) {
                let mut bytes = Vec::new();
                let size = record.metadata().map_or(0, |m| m.len());
                if size <= MAX_BYTES && record.read_to_end(&mut bytes).is_ok() {
                    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
                    known = lines
                        .iter()
                        .filter_map(|line| std::str::from_utf8(line).ok()?.split_once(' '))
                        .filter(|(h, _)| h == host)
                        .filter_map(|(_, seq)| u64::from_str_radix(seq.trim(), 16).ok())
                        .collect();
                    if lines.len() > 2 * MAX_LINES {
                        trim(path, &lines[lines.len() - MAX_LINES..]);
                    }
                } else {
                    trim(path, &[]);
                }
            } else if path.exists() {
                tracing::debug!("not using {}: not a file of this user's alone", path.display());
                usable = None;
            }
        }
        let broken = usable.is_none() || host.is_none();
        Record { file: usable, host, known, loaded: Vec::new(), skipped: Vec::new(), broken }
    }

    fn sequence_with(&self, key: &ContentKey) -> u64 {
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
        if let Some(dir) = path.parent().filter(|d| !d.exists()) {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
        }
        let opened = trusted_folder(path).then(|| open_trusted(path, std::fs::OpenOptions::new().create(true).append(true).mode(0o600))).flatten();
        match opened.map(|mut f| f.write_all(line.as_bytes())) {
            Some(Ok(())) => {}
            Some(Err(e)) => tracing::debug!("cannot write {}: {e}", path.display()),
            None => tracing::debug!("not writing {}: missing, or not a file of this user's alone", path.display()),
        }
    }
}

/// Rewrites the record with `lines` (a new file renamed over it).
fn trim(path: &Path, lines: &[&[u8]]) {
    let mut kept = Vec::new();
    for line in lines {
        kept.extend_from_slice(line);
        kept.push(b'\n');
    }
    let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut f| f.write_all(&kept))
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

/// Initialises the root module of `header`, the library whose loaded
/// bytes have content `key` (`None`: unknown, or not to be remembered),
/// checking its layout unless the sequence of libraries loaded in this
/// process, ending with this one, passed before with this host binary.
///
/// # Errors
/// abi_stable's [`LibraryError`]: a version or layout refused, or the
/// root module failing to initialise. A refused library leaves the rest of
/// this process's libraries checked in full.
pub fn init_root_module(header: &'static LibHeader, key: Option<ContentKey>) -> Result<(PluginLibraryRef, Verdict), LibraryError> {
    let mut rec = record().lock_or_recover();
    let sequence = key.filter(|_| !rec.broken).map(|k| rec.sequence_with(&k));
    if let (Some(key), Some(sequence)) = (key, sequence) {
        if rec.known.contains(&sequence) {
            // SAFETY: this host binary checked a library of these very
            // bytes, with libraries of the same bytes before it in the same
            // order, and found every layout compatible.
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
            tracing::error!("a plugin library loaded earlier without its layout check fails it now (a damaged record?): {e}");
            rec.broken = true;
        }
    }
    let module = header.init_root_module::<PluginLibraryRef>();
    match (&module, key, sequence) {
        // Not after a skipped library failed its check above: the
        // sequence that holds it is not one to remember.
        (Ok(_), Some(key), Some(sequence)) if !rec.broken => {
            rec.loaded.push(key);
            rec.remember(sequence);
        }
        _ => rec.broken = true,
    }
    module.map(|m| (m, Verdict::Checked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn this_process_has_a_build_id() {
        let id = build_id().expect("rustc's linker writes a GNU build ID");
        assert!(id.len() >= 16 && id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_eq!(build_id(), Some(id), "the same every time");
    }

    #[test]
    fn the_record_is_where_the_environment_says() {
        let env = |pairs: &'static [(&'static str, &'static str)]| move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| OsString::from(v));
        let at = |p: Option<PathBuf>| p.map(|p| p.display().to_string());
        assert_eq!(at(record_file(env(&[("CORDIS_CACHE_DIR", "/c"), ("HOME", "/h")]))).as_deref(), Some("/c/verified-layouts"));
        assert_eq!(at(record_file(env(&[("CORDIS_CACHE_DIR", "off"), ("HOME", "/h")]))), None);
        assert_eq!(at(record_file(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]))).as_deref(), Some("/x/cordis/verified-layouts"));
        for relative in [("CORDIS_CACHE_DIR", "rel"), ("XDG_CACHE_HOME", "rel"), ("CORDIS_CACHE_DIR", "")] {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([relative, ("HOME", "/h")]));
            assert_eq!(at(record_file(env(pairs))).as_deref(), Some("/h/.cache/cordis/verified-layouts"), "{relative:?} is ignored");
        }
        assert_eq!(at(record_file(env(&[]))), None);
    }

    #[test]
    fn a_long_record_keeps_its_newest_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECORD);
        let text: Vec<String> = (0..2 * MAX_LINES + 10).map(|i| format!("h {i:016x}")).collect();
        let lines: Vec<&[u8]> = text.iter().map(|l| l.as_bytes()).collect();
        trim(&path, &lines[lines.len() - MAX_LINES..]);
        let kept = std::fs::read_to_string(&path).unwrap();
        assert_eq!(kept.lines().count(), MAX_LINES);
        assert_eq!(kept.lines().last(), Some(format!("h {:016x}", 2 * MAX_LINES + 9).as_str()));
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_fifo_where_the_record_should_be_is_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let path = dir.path().join(RECORD);
        rustix::fs::mknodat(rustix::fs::CWD, &path, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        let opened = path.clone();
        std::thread::spawn(move || {
            let record = Record::open(Some(opened));
            let _ = done.send(record.known.len());
        });
        let known = finished.recv_timeout(std::time::Duration::from_secs(5)).expect("Record::open returns within 5 s");
        assert_eq!(known, 0);
        assert!(open_trusted(&path, std::fs::OpenOptions::new().read(true)).is_none(), "a FIFO is not a record");
    }

    #[test]
    fn a_sequence_depends_on_the_libraries_before_it_and_their_order() {
        let mut rec = Record::open(None);
        let (a, b) = (ContentKey { len: 10, hash: 1 }, ContentKey { len: 10, hash: 3 });
        let alone = rec.sequence_with(&b);
        rec.loaded.push(a);
        let after_a = rec.sequence_with(&b);
        assert_ne!(alone, after_a);
        let mut other = Record::open(None);
        other.loaded.push(b);
        assert_ne!(other.sequence_with(&a), after_a, "the same two libraries in the other order");
    }

    /// A minimal shared object image: one loadable segment, a dynamic
    /// section needing `needed`.
    fn image(needed: &[&str]) -> Vec<u8> {
        let mut image = vec![0u8; 0x400];
        image[..4].copy_from_slice(b"\x7fELF");
        image[4] = 2;
        image[5] = 1;
        image[32..40].copy_from_slice(&64u64.to_le_bytes());
        image[54..56].copy_from_slice(&56u16.to_le_bytes());
        image[56..58].copy_from_slice(&2u16.to_le_bytes());
        let header = |image: &mut Vec<u8>, at: usize, kind: u32, offset: u64, vaddr: u64, size: u64| {
            image[at..at + 4].copy_from_slice(&kind.to_le_bytes());
            image[at + 8..at + 16].copy_from_slice(&offset.to_le_bytes());
            image[at + 16..at + 24].copy_from_slice(&vaddr.to_le_bytes());
            image[at + 32..at + 40].copy_from_slice(&size.to_le_bytes());
        };
        header(&mut image, 64, 1, 0, 0x1000, 0x400);
        header(&mut image, 120, 2, 0x200, 0x1200, 0x100);
        let mut strings = vec![0u8];
        let mut at = 0x200;
        for name in needed {
            image[at..at + 8].copy_from_slice(&1u64.to_le_bytes());
            image[at + 8..at + 16].copy_from_slice(&(strings.len() as u64).to_le_bytes());
            strings.extend_from_slice(name.as_bytes());
            strings.push(0);
            at += 16;
        }
        image[at..at + 8].copy_from_slice(&5u64.to_le_bytes());
        image[at + 8..at + 16].copy_from_slice(&0x1300u64.to_le_bytes());
        image[0x300..0x300 + strings.len()].copy_from_slice(&strings);
        image
    }

    #[test]
    fn only_libraries_needing_the_c_runtime_alone_are_remembered() {
        assert!(needs_only_system_libraries(&image(&[])));
        assert!(needs_only_system_libraries(&image(&["libc.so.6", "libgcc_s.so.1"])));
        assert!(!needs_only_system_libraries(&image(&["libc.so.6", "libplugin_types.so"])));
        assert!(!needs_only_system_libraries(&image(&["libc.so.6"])[..0x250]), "a cut image is not read");
        assert!(!needs_only_system_libraries(b"\x7fELF"));
    }

    #[test]
    fn a_content_key_changes_with_any_byte_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        let mut bytes = image(&["libc.so.6"]);
        std::fs::write(&path, &bytes).unwrap();
        let first = ContentKey::of(&File::open(&path).unwrap(), 0x400).unwrap();
        bytes[0x3ff] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let second = ContentKey::of(&File::open(&path).unwrap(), 0x400).unwrap();
        assert_ne!(first, second);
        assert_eq!(ContentKey::of(&File::open(&path).unwrap(), 0), None);
    }
}
