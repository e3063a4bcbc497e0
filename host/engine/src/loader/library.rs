//! Loading plugin libraries through the stable ABI, and unwrapping their
//! exports to the plugin an entry names.
//!
//! Before `dlopen`, the file is checked as an ELF shared object whose
//! program headers and loadable segments fit inside the file: mapping a
//! truncated library succeeds, and the process then dies with `SIGBUS` on the
//! first touch of the missing pages. Then the library is opened with
//! `abi_stable::library::lib_header_from_path` and its root module
//! initialised with `init_root_module` (which checks the abi_stable version,
//! the crate version of `cordis-abi`, and the layout of every type reachable
//! from the root module). The cached `RootModule::load_from*` is never used:
//! it returns the first module ever loaded for the type, whatever the path.
//! Libraries are never unloaded.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use abi_stable::library::{lib_header_from_path, LibraryError};
use cordis_abi::{PluginDecl, PluginLibraryRef};

use super::verified::{ContentKey, FileKey};
use cordis_sync::LockExt;
use serde_json::Value;

/// A loaded plugin library and its declarations.
pub struct Library {
    /// The file it was loaded from (in `cordis dev`, a private copy).
    pub path: PathBuf,
    /// The file the composition names (canonical).
    pub source: PathBuf,
    /// The sealed in-memory copy it was loaded from (private copies only).
    pub copy: Option<SealedCopy>,
    /// The library's own name (`tool-todo`).
    pub name: String,
    /// Its plugin declarations, in the order the library lists them.
    pub plugins: Vec<PluginDecl>,
    /// Each declaration's config schema parsed (same order as `plugins`),
    /// once per load rather than once per entry; `None` when it is not
    /// JSON.
    pub config_schemas: Vec<Option<Arc<Value>>>,
    /// Package names the library implements, each with the plugin it
    /// selects (empty for a library built before packages were declared).
    pub packages: Vec<(String, String)>,
    /// Services each plugin declares it provides: `(plugin, service)`.
    pub provides: Vec<(String, String)>,
    /// The cordis-abi version the library was built against.
    pub abi: cordis_abi::AbiVersion,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.plugins.iter().map(|p| p.name.as_str()).collect();
        f.debug_struct("Library").field("path", &self.path).field("plugins", &names).finish()
    }
}

/// Why a library could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The file cannot be read.
    #[error("cannot read plugin library {path}: {detail}")]
    Unreadable {
        /// The file.
        path: String,
        /// The cause.
        detail: String,
    },
    /// Not an ELF shared object.
    #[error("{path} is not a loadable shared library: {detail}")]
    NotSharedObject {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// An ELF shared object cut short (empty, or a header, table or
    /// segment ending past the end of the file), or one that changed while
    /// it was copied: truncated, or a build still writing it.
    #[error("{path} is not a loadable shared library: {detail}")]
    Incomplete {
        /// The file.
        path: String,
        /// Where it ends too early.
        detail: String,
    },
    /// `dlopen` refused it.
    #[error("cannot open plugin library {path}: {detail}")]
    Open {
        /// The file.
        path: String,
        /// The dynamic loader's message.
        detail: String,
    },
    /// A shared library without a cordis root module.
    #[error("{path} is a shared library but not a cordis plugin library (it exports no cordis root module)")]
    NotAPlugin {
        /// The file.
        path: String,
    },
    /// Exports abi_stable's root-module symbol over data that is no
    /// abi_stable header (another toolkit's library, or a damaged one).
    #[error("{path} is not a cordis plugin library (no cordis ABI header: it exports the root module's symbol over other data): rebuild it against cordis-abi {major} with `cordis_abi::export_library!()`")]
    NoHeader {
        /// The file.
        path: String,
        /// The ABI major this host loads.
        major: u32,
    },
    /// Built against an incompatible ABI.
    #[error("plugin library {path} was built against an incompatible plugin ABI: {detail}")]
    IncompatibleAbi {
        /// The file.
        path: String,
        /// A one-line summary (the full layout report is logged at debug
        /// level).
        detail: String,
    },
    /// A library anyone could have replaced.
    #[error("refusing plugin library {path}: {detail}; fix the permissions, or pass --allow-writable-plugins if you accept the risk")]
    Insecure {
        /// The file.
        path: String,
        /// What is writable.
        detail: String,
    },
    /// The library's root module failed to initialise.
    #[error("plugin library {path} failed to initialise: {detail}")]
    Init {
        /// The file.
        path: String,
        /// The cause.
        detail: String,
    },
}

/// Loads libraries, once per canonical path.
///
/// With private copies (the commands that keep running: `cordis run`,
/// `cordis dev`), every library runs from a sealed in-memory copy of its
/// file (a `memfd` sealed against writing, shrinking and growing), never
/// from the file itself: a library file rewritten in place under a running
/// process can crash it, and nobody, not even its owner, can change a sealed
/// copy. Each load is a new copy, so `dlopen` never returns an image it
/// mapped before for the same path.
#[derive(Default)]
pub struct LibraryCache {
    loaded: Mutex<HashMap<PathBuf, Arc<Library>>>,
    /// Copies handed over by the process this one replaced (`cordis dev`
    /// re-executing itself), by source: loaded instead of a new copy.
    adopted: Mutex<HashMap<PathBuf, SealedCopy>>,
    /// Files the package search found unloadable, with their identity then.
    unloadable: Mutex<HashMap<PathBuf, FileIdentity>>,
    /// Per source, an empty memfd whose memory is already allocated for
    /// the next private copy (see [`LibraryCache::prepare_spare`]).
    spares: Mutex<HashMap<PathBuf, File>>,
    private: bool,
    allow_writable: bool,
}

/// A sealed in-memory copy of a library file: a `memfd` sealed against
/// writing, shrinking and growing, so its bytes can never change. It stays
/// open for the life of the process (the library mapped from it is never
/// unloaded), and can be handed to a `cordis dev` that re-executes itself
/// (see [`LibraryCache::adopt`]).
#[derive(Clone)]
pub struct SealedCopy {
    file: Arc<File>,
    len: u64,
}

impl std::fmt::Debug for SealedCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedCopy").field("fd", &self.fd()).field("len", &self.len).finish()
    }
}

impl SealedCopy {
    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it is empty (never, for a copy that loaded).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its file descriptor number in this process.
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }

    /// The path the dynamic loader knows it by, `/proc/self/fd/N`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd()))
    }

    /// Whether both copies hold the same bytes: different sizes differ at
    /// once; equal sizes are compared until the first difference (a build
    /// with the same content is the only case read to the end).
    pub fn same_content(&self, other: &SealedCopy) -> bool {
        use std::os::unix::fs::FileExt;
        if self.len != other.len {
            return false;
        }
        if Arc::ptr_eq(&self.file, &other.file) {
            return true;
        }
        let (mut a, mut b) = (vec![0u8; 256 * 1024], vec![0u8; 256 * 1024]);
        let mut at = 0u64;
        while at < self.len {
            let n = usize::try_from((self.len - at).min(a.len() as u64)).unwrap_or(a.len());
            if self.file.read_exact_at(&mut a[..n], at).is_err() || other.file.read_exact_at(&mut b[..n], at).is_err() {
                return false;
            }
            if a[..n] != b[..n] {
                return false;
            }
            at += n as u64;
        }
        true
    }

    /// Lets the copy's descriptor survive `exec` (it is close-on-exec
    /// otherwise), for a process that re-executes itself and adopts it.
    ///
    /// # Errors
    /// The `fcntl` error.
    pub fn keep_across_exec(&self) -> std::io::Result<()> {
        rustix::io::fcntl_setfd(&*self.file, rustix::io::FdFlags::empty()).map_err(std::io::Error::from)
    }

    /// Takes over descriptor `fd`, inherited across `exec`, if it is a
    /// memfd sealed against writing, shrinking and growing; it is made
    /// close-on-exec again.
    ///
    /// # Safety
    /// `fd` must be open and owned by nobody else in this process.
    pub unsafe fn adopt(fd: i32) -> Option<SealedCopy> {
        use rustix::fs::{fcntl_get_seals, SealFlags};
        use std::os::fd::FromRawFd;
        if fd < 0 {
            return None;
        }
        // SAFETY: the caller hands over `fd`, open and owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        let seals = fcntl_get_seals(&file).ok()?;
        if !seals.contains(SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW) {
            return None;
        }
        rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::CLOEXEC).ok()?;
        let len = file.metadata().ok()?.len();
        Some(SealedCopy { file: Arc::new(file), len })
    }
}

impl LibraryCache {
    /// A cache that loads every library from a sealed private copy.
    pub fn private_copies() -> LibraryCache {
        LibraryCache { private: true, ..LibraryCache::default() }
    }

    /// Accepts libraries that every user may write (or that sit in a folder
    /// every user may write), which are refused by default.
    pub fn allow_writable(mut self, allow: bool) -> LibraryCache {
        self.allow_writable = allow;
        self
    }

    /// Loads each library named by `copies` (canonical source, sealed copy)
    /// from that copy rather than from its file, the first time it is
    /// loaded: a `cordis dev` that re-executes itself keeps running the very
    /// builds it ran.
    pub fn adopt(&self, copies: Vec<(PathBuf, SealedCopy)>) {
        self.adopted.lock_or_recover().extend(copies);
    }

    /// Every library loaded now, by source, with the sealed copy it runs
    /// from (private copies only).
    pub fn copies(&self) -> Vec<(PathBuf, SealedCopy)> {
        let loaded = self.loaded.lock_or_recover();
        let mut out: Vec<(PathBuf, SealedCopy)> = loaded.iter().filter_map(|(s, l)| Some((s.clone(), l.copy.clone()?))).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Loads the library at `path` (or returns the one already loaded).
    ///
    /// # Errors
    /// [`LoadError`] naming the path and what is wrong.
    ///
    /// The permission check ([`check_not_writable_by_all`]) is made on a
    /// fresh load, on `path` and on the file it resolves to: a library
    /// already loaded runs the code that was checked when it was loaded,
    /// so another entry naming it is not checked again.
    pub fn load(&self, path: &Path) -> Result<Arc<Library>, LoadError> {
        let source = canonical(path)?;
        if let Some(lib) = self.loaded.lock_or_recover().get(&source) {
            return Ok(lib.clone());
        }
        if !self.allow_writable && source != path {
            check_not_writable_by_all(path)?;
        }
        self.load_fresh(&source)
    }

    /// Finds the library on `plugin_path` that declares package `name`
    /// (`@scope/pkg`, or `@scope/pkg/export` for a named export): folders in
    /// order; in a folder, libraries whose own name ends the package name
    /// first, then the others by file name. Each library's
    /// declarations are read once (loading it runs no `apply`); files that
    /// are not loadable plugin libraries are skipped, and remembered by file
    /// identity (device, inode, size, modification time) so they are not
    /// tried again. Returns the library and the plugin (export) selected.
    pub fn find_package(&self, name: &str, plugin_path: &super::PluginPath) -> Option<(Arc<Library>, String)> {
        let readings = super::resolve::package_readings(name);
        for (dir, _) in &plugin_path.dirs {
            let mut files = super::resolve::library_files(dir);
            // Libraries whose own name ends the package's name are tried
            // first (`libtool_todo.so` for `@deepseek-ai/dsh-tool-todo`), so
            // the usual lookup loads one library; the declarations decide.
            let stems: Vec<&str> = readings.iter().map(|(p, _)| p.rsplit('/').next().unwrap_or(p)).collect();
            files.sort_by_key(|f| {
                let own = super::resolve::library_name_of(f);
                (!stems.iter().any(|s| s.ends_with(own.as_str())), f.clone())
            });
            for file in files {
                let Some(lib) = self.declarations(&file) else { continue };
                for (package, export) in &readings {
                    if let Some((_, plugin)) = lib.packages.iter().find(|(p, _)| p == package) {
                        return Some((lib.clone(), export.clone().unwrap_or_else(|| plugin.clone())));
                    }
                }
            }
        }
        None
    }

    /// The loaded library at `file`, or `None` when it is not a loadable
    /// plugin library (remembered until the file changes).
    fn declarations(&self, file: &Path) -> Option<Arc<Library>> {
        let identity = file_identity(file)?;
        if self.unloadable.lock_or_recover().get(file) == Some(&identity) {
            return None;
        }
        match self.load(file) {
            Ok(lib) => Some(lib),
            Err(e) => {
                tracing::debug!("package search skips {}: {e}", file.display());
                self.unloadable.lock_or_recover().insert(file.to_path_buf(), identity);
                None
            }
        }
    }

    /// Loads the current content of `source` again, if it changed: returns
    /// `None` when it holds the same bytes as the loaded copy.
    ///
    /// # Errors
    /// [`LoadError`]; the library loaded before stays in the cache.
    pub fn reload(&self, source: &Path) -> Result<Option<Arc<Library>>, LoadError> {
        let source = canonical(source)?;
        if !self.private {
            return self.load_fresh(&source).map(Some);
        }
        match self.changed_copy(&source)? {
            Some(sealed) => self.load_copy(&source, sealed).map(Some),
            None => Ok(None),
        }
    }

    /// A sealed private copy of the current content of `source` (canonical),
    /// checked to be a complete shared object, or `None` when it holds the
    /// same bytes as the copy loaded now. Nothing is loaded.
    ///
    /// # Errors
    /// [`LoadError`].
    pub fn changed_copy(&self, source: &Path) -> Result<Option<SealedCopy>, LoadError> {
        let current = self.loaded.lock_or_recover().get(source).cloned();
        let sealed = self.seal(source)?;
        if current.is_some_and(|c| c.copy.as_ref().is_some_and(|copy| copy.same_content(&sealed))) {
            return Ok(None);
        }
        Ok(Some(sealed))
    }

    /// Loads `sealed`, a copy made by [`LibraryCache::changed_copy`], as the
    /// library of `source` (canonical).
    ///
    /// # Errors
    /// [`LoadError`] naming `source`; the library loaded before stays in
    /// the cache.
    pub fn load_copy(&self, source: &Path, sealed: SealedCopy) -> Result<Arc<Library>, LoadError> {
        self.load_sealed(source, sealed)
    }

    /// Allocates now the memory of the next private copy of `source`
    /// (canonical), as much as the loaded copy's segments take, in an
    /// empty memfd that the next [`LibraryCache::changed_copy`] of it
    /// fills instead of a new one. A copy into memory allocated ahead
    /// skips the kernel's allocating and zeroing of each page while the
    /// developer waits: about 0.2 ms of a 0.8 ms copy of a 1.4 MB library
    /// after an idle pause, measured on this project's machine. The spare
    /// costs that memory until the next reload takes it (it is in no
    /// process's resident set until then). Does nothing when libraries are
    /// loaded in place, when one is ready already, or when `source` has no
    /// loaded copy; a spare that cannot be made is left out (the next copy
    /// then allocates as it goes).
    pub fn prepare_spare(&self, source: &Path) {
        if !self.private || self.spares.lock_or_recover().contains_key(source) {
            return;
        }
        let Some(lib) = self.loaded.lock_or_recover().get(source).cloned() else { return };
        let Some(copy) = &lib.copy else { return };
        let Some(extent) = loaded_extent(&copy.file, copy.len) else { return };
        self.add_spare(source, extent);
    }

    /// Lets go of the spares made for libraries other than `sources` (those
    /// that left the composition).
    pub fn keep_spares_of(&self, sources: &[PathBuf]) {
        self.spares.lock_or_recover().retain(|source, _| sources.contains(source));
    }

    /// Makes the spare of `source`: `len` bytes allocated in an empty memfd.
    fn add_spare(&self, source: &Path, len: u64) {
        let Ok(spare) = new_memfd() else { return };
        if rustix::fs::fallocate(&spare, rustix::fs::FallocateFlags::empty(), 0, len).is_ok() {
            self.spares.lock_or_recover().insert(source.to_path_buf(), spare);
        }
    }

    /// The loaded library for `source` (canonical, as [`Library::source`]
    /// holds it), if any.
    pub fn get(&self, source: &Path) -> Option<Arc<Library>> {
        self.loaded.lock_or_recover().get(source).cloned()
    }

    /// Forgets `source`'s entry and records `lib` as its loaded library.
    pub fn set(&self, lib: Arc<Library>) {
        self.loaded.lock_or_recover().insert(lib.source.clone(), lib);
    }

    fn load_fresh(&self, source: &Path) -> Result<Arc<Library>, LoadError> {
        if self.private {
            let adopted = self.adopted.lock_or_recover().remove(source);
            let sealed = match adopted {
                Some(copy) => copy,
                None => self.seal(source)?,
            };
            return self.load_sealed(source, sealed);
        }
        if !self.allow_writable {
            check_not_writable_by_all(source)?;
        }
        let lib = Arc::new(load_library_named(source, &super::resolve::library_name_of(source))?);
        self.loaded.lock_or_recover().insert(source.to_path_buf(), lib.clone());
        Ok(lib)
    }

    /// Copies what the dynamic loader reads of `source` into a new memfd
    /// (or the spare made for it by [`LibraryCache::prepare_spare`]), in
    /// the kernel: the bytes never pass through this process; seals it, and checks the
    /// copy is a complete shared object: the bytes checked are the bytes
    /// loaded, whatever happens to `source` meanwhile.
    fn seal(&self, source: &Path) -> Result<SealedCopy, LoadError> {
        if !self.allow_writable {
            check_not_writable_by_all(source)?;
        }
        let shown = source.display().to_string();
        let failed = |what: &str, e: std::io::Error| LoadError::Unreadable {
            path: shown.clone(),
            detail: format!("cannot make the private copy ({what}): {e}"),
        };
        // A spare holds zeros only, so whatever its size, the copy below
        // ends as the same bytes as in a new memfd.
        let spare = self.spares.lock_or_recover().remove(source);
        let mut copy = match spare {
            Some(spare) => spare,
            None => new_memfd().map_err(|e| failed("memfd_create", e))?,
        };
        let unreadable = |e: std::io::Error| LoadError::Unreadable { path: shown.clone(), detail: e.to_string() };
        let mut input = open_without_waiting(source).map_err(unreadable)?;
        let meta = input.metadata().map_err(unreadable)?;
        if !meta.is_file() {
            return Err(LoadError::NotSharedObject { path: shown, detail: "not a regular file".into() });
        }
        let size = meta.len();
        // Only the bytes the dynamic loader reads (ELF header, program
        // headers, loadable segments) are copied; the rest (symbol tables,
        // section headers, debug sections) is left a hole of the same size,
        // so the copy keeps the file's layout and its checks. std's copy
        // between two files stays in the kernel (`copy_file_range`, else
        // `sendfile`). A file that is not a complete shared object is
        // copied whole, for the check below to say what is wrong with it.
        let wanted = loaded_extent(&input, size).unwrap_or(size);
        std::io::copy(&mut (&mut input).take(wanted), &mut copy).map_err(|e| failed("copy", e))?;
        // A writer that started again while the bytes were copied (builds
        // copied over the file one after another) leaves a copy mixing two
        // builds, which can pass every check and crash when run: refuse it,
        // and the writer's next close brings the file back.
        let after = input.metadata().map_err(unreadable)?;
        if changed_since(&meta, &after) {
            return Err(LoadError::Incomplete {
                path: shown,
                detail: "it changed while the private copy was being made (a build still writing it?); the next complete write is loaded".into(),
            });
        }
        copy.set_len(size).map_err(|e| failed("size", e))?;
        seal_for_good(&copy).map_err(|e| failed("seal", e))?;
        let len = copy.metadata().map_err(|e| failed("size", e))?.len();
        let sealed = SealedCopy { file: Arc::new(copy), len };
        check_elf(&sealed.path()).map_err(|e| e.shown_as(&shown))?;
        Ok(sealed)
    }

    /// Loads the sealed copy of `source`.
    fn load_sealed(&self, source: &Path, sealed: SealedCopy) -> Result<Arc<Library>, LoadError> {
        let name = super::resolve::library_name_of(source);
        // Kept open before `dlopen` sees it, whatever comes of the load: a
        // copy refused after `dlopen` mapped it (an incompatible ABI, no
        // root module) stays mapped under its `/proc/self/fd/N` name too,
        // and a later copy given the same number would get its image.
        keep_open(sealed.file.clone());
        let content = loaded_extent(&sealed.file, sealed.len).and_then(|extent| ContentKey::of(&sealed.file, extent));
        let mut lib = load_library_identified(&sealed.path(), &name, Identity::Known(content), source)
            .map_err(|e| e.shown_as(&source.display().to_string()))?;
        lib.source = source.to_path_buf();
        lib.copy = Some(sealed);
        let lib = Arc::new(lib);
        self.loaded.lock_or_recover().insert(source.to_path_buf(), lib.clone());
        Ok(lib)
    }
}

/// Opens `path` for reading without waiting on it: a FIFO (or a device)
/// put where a library was expected would otherwise block `open` until
/// some writer came, and with it the thread watching for new builds.
/// Reading a regular file is not changed by it.
///
/// # Errors
/// As [`File::open`].
pub fn open_without_waiting(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32).open(path)
}

/// A new empty memfd that can be sealed, closed on `exec`.
/// Seals `file` (a memfd made with `ALLOW_SEALING`) against writing,
/// shrinking, growing and further seals.
///
/// The kernel refuses the write seal with `EBUSY` while a page of the
/// file is held beyond its mappings; seen once during a `cordis dev`
/// restart in place. Such holds are brief, so the seal is tried again, 5
/// times at most, 10 ms then 20, 40 and 80 ms later.
///
/// # Errors
/// The last error; `EBUSY` after the fifth try, or any other error at once.
pub fn seal_for_good(file: &File) -> std::io::Result<()> {
    use rustix::fs::{fcntl_add_seals, SealFlags};
    const LAST_WAIT: std::time::Duration = std::time::Duration::from_millis(80);
    let mut wait = std::time::Duration::from_millis(10);
    loop {
        match fcntl_add_seals(file, SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL) {
            Err(rustix::io::Errno::BUSY) if wait <= LAST_WAIT => {
                std::thread::sleep(wait);
                wait *= 2;
            }
            other => return other.map_err(Into::into),
        }
    }
}

fn new_memfd() -> std::io::Result<File> {
    use rustix::fs::{memfd_create, MemfdFlags};
    Ok(File::from(memfd_create(c"cordis-plugin", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?))
}

/// Keeps a sealed copy's file open for the life of the process, once it
/// has been handed to `dlopen`. The library mapped from it is never
/// unloaded (nor is one `dlopen` mapped and the loader then refused), and
/// the dynamic loader knows it by its path, `/proc/self/fd/N`: were the
/// descriptor closed, the next copy could get the same number, and
/// `dlopen` would hand back the old image for the new path.
fn keep_open(file: Arc<File>) {
    static KEPT: Mutex<Vec<Arc<File>>> = Mutex::new(Vec::new());
    KEPT.lock_or_recover().push(file);
}

impl LoadError {
    /// The same error naming `shown` (the user's file) instead of the
    /// private copy it was read from.
    pub fn shown_as(self, shown: &str) -> LoadError {
        match self {
            LoadError::Unreadable { detail, .. } => LoadError::Unreadable { path: shown.into(), detail },
            LoadError::NotSharedObject { detail, .. } => LoadError::NotSharedObject { path: shown.into(), detail },
            LoadError::Incomplete { detail, .. } => LoadError::Incomplete { path: shown.into(), detail },
            LoadError::Open { detail, .. } => LoadError::Open { path: shown.into(), detail },
            LoadError::NotAPlugin { .. } => LoadError::NotAPlugin { path: shown.into() },
            LoadError::NoHeader { major, .. } => LoadError::NoHeader { path: shown.into(), major },
            LoadError::IncompatibleAbi { detail, .. } => LoadError::IncompatibleAbi { path: shown.into(), detail },
            LoadError::Insecure { detail, .. } => LoadError::Insecure { path: shown.into(), detail },
            LoadError::Init { detail, .. } => LoadError::Init { path: shown.into(), detail },
        }
    }
}

/// Refuses a library file, or a library in a folder, that every user may
/// write: anyone on the machine could replace the code the host runs.
///
/// # Errors
/// [`LoadError::Insecure`].
pub fn check_not_writable_by_all(path: &Path) -> Result<(), LoadError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let insecure = |detail: String| LoadError::Insecure { path: path.display().to_string(), detail };
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o002 != 0 {
                return Err(insecure("the file is writable by every user".into()));
            }
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(meta) = std::fs::metadata(dir) {
                if meta.permissions().mode() & 0o002 != 0 {
                    return Err(insecure(format!("its folder {} is writable by every user", dir.display())));
                }
            }
        }
    }
    Ok(())
}

fn canonical(path: &Path) -> Result<PathBuf, LoadError> {
    path.canonicalize().map_err(|e| LoadError::Unreadable { path: path.display().to_string(), detail: e.to_string() })
}

/// Loads one library file, named after its file (`libtool_todo.so` →
/// `tool-todo`). The dynamic loader maps a path once: loading a path it has
/// seen returns the image already mapped.
///
/// # Errors
/// See [`LoadError`].
pub fn load_library(path: &Path) -> Result<Library, LoadError> {
    load_library_named(path, &super::resolve::library_name_of(path))
}

/// Loads one library file; `name` is the library's own name, which picks its
/// default export.
///
/// # Errors
/// See [`LoadError`].
pub fn load_library_named(path: &Path, name: &str) -> Result<Library, LoadError> {
    load_library_identified(path, name, Identity::OfPath, path)
}

/// How the content of the file a library is loaded from is known, for
/// remembering its layout check ([`super::verified`]).
enum Identity {
    /// Read from the file at the path loaded, checked to be the file
    /// `dlopen` opened.
    OfPath,
    /// Given (a sealed copy, which cannot change).
    Known(Option<ContentKey>),
}

/// The content key of the file at `path`, and its identity while read.
fn content_of(path: &Path) -> Option<(ContentKey, FileKey)> {
    let file = open_without_waiting(path).ok()?;
    let meta = file.metadata().ok()?;
    let extent = loaded_extent(&file, meta.len())?;
    Some((ContentKey::of(&file, extent)?, FileKey::of(&meta)))
}

fn load_library_identified(path: &Path, name: &str, identity: Identity, source: &Path) -> Result<Library, LoadError> {
    let shown = path.display().to_string();
    check_elf(path)?;
    let read = match &identity {
        Identity::OfPath => content_of(path),
        Identity::Known(_) => None,
    };
    let header = lib_header_from_path(path).map_err(|e| match e {
        LibraryError::OpenError { err, .. } => LoadError::Open { path: shown.clone(), detail: err.to_string() },
        LibraryError::GetSymbolError { .. } => LoadError::NotAPlugin { path: shown.clone() },
        other => abi_error(&shown, other, None),
    })?;
    // Loaded in place, the bytes hashed are the library's only if the file
    // at the path is still the one read (nothing replaced it while
    // `dlopen` opened it).
    let key = match identity {
        Identity::OfPath => read.filter(|(_, file)| FileKey::of_path(path).as_ref() == Some(file)).map(|(content, _)| content),
        Identity::Known(key) => key,
    };
    let (module, verdict) = super::verified::init_root_module(header, key).map_err(|e| abi_error(&shown, e, header.layout()))?;
    tracing::debug!(library = %source.display(), "layout check: {verdict:?}");
    let abi = (module.abi())();
    if abi.major != crate::capabilities::HOST_ABI.major {
        return Err(LoadError::IncompatibleAbi { path: shown, detail: rebuild_message(&format!("{abi}")) });
    }
    let plugins: Vec<PluginDecl> = (module.plugins())().into_iter().collect();
    let config_schemas = plugins.iter().map(|p| serde_json::from_str(p.config_schema.as_str()).ok().map(Arc::new)).collect();
    let packages = (module.packages())().into_iter().map(|p| (p.package.into_string(), p.plugin.into_string())).collect();
    let provides = (module.provides())().into_iter().map(|p| (p.plugin.into_string(), p.service.into_string())).collect();
    Ok(Library {
        path: path.to_path_buf(),
        source: path.to_path_buf(),
        copy: None,
        name: name.to_string(),
        plugins,
        config_schemas,
        packages,
        provides,
        abi,
    })
}

/// Why a library of another ABI major is refused, and what to do.
fn rebuild_message(theirs: &str) -> String {
    let ours = crate::capabilities::HOST_ABI;
    format!(
        "it was built against cordis-abi {theirs}, and this host speaks cordis-abi {ours} (any {}.x library loads): rebuild it against cordis-abi {}",
        ours.major, ours.major
    )
}

/// The first place abi_stable's layout check found a difference, in one
/// line: the path from the root module through fields and methods, then
/// what differs there, the library's first (`at PluginLibrary.plugins →
/// PluginDecl: 8 fields, expected 7`). `None` when the report is not a
/// layout report.
///
/// abi_stable's own error is a formatted text by then, so the check is run
/// again here on the library's layout to read its structured report.
fn layout_difference(library: Option<&'static abi_stable::type_layout::TypeLayout>) -> Option<String> {
    use abi_stable::abi_stability::abi_checking::{check_layout_compatibility, AbiInstability as AI};
    use abi_stable::type_layout::TLFieldOrFunction;
    use abi_stable::StableAbi;
    let errors = check_layout_compatibility(<PluginLibraryRef as StableAbi>::LAYOUT, library?).err()?;
    let first = errors.errors.iter().find(|e| !e.errs.is_empty())?;
    // The path through the root module: `Type.field → FieldType`, a
    // wrapper's numbered field shown as its type alone.
    let mut path = String::new();
    for step in first.stack_trace.iter() {
        match &step.expected {
            TLFieldOrFunction::Field(field) if field.name().chars().all(|c| c.is_ascii_digit()) => {
                path.push_str(if path.is_empty() { "" } else { " → " });
                path.push_str(field.layout().name());
            }
            TLFieldOrFunction::Field(field) => {
                if path.is_empty() {
                    path.push_str(errors.interface.name());
                }
                path.push_str(&format!(".{} → {}", field.name(), field.layout().name()));
            }
            TLFieldOrFunction::Function(function) => path.push_str(&format!(".{}()", function.name)),
        }
    }
    if path.is_empty() {
        path.push_str(errors.interface.name());
    }
    let what = first.errs.first().map(|e| match e {
        AI::FieldCountMismatch(v) => format!("{} fields, expected {}", v.found, v.expected),
        AI::UnexpectedField(v) => format!("field `{}`, expected `{}`", v.found.name(), v.expected.name()),
        AI::Name(v) => format!("type `{}`, expected `{}`", v.found, v.expected),
        AI::Package(v) => format!("type from package `{}`, expected `{}`", v.found, v.expected),
        AI::Size(v) => format!("{} bytes, expected {}", v.found, v.expected),
        AI::Alignment(v) => format!("alignment {}, expected {}", v.found, v.expected),
        AI::TooManyVariants(v) => format!("{} variants, expected {}", v.found, v.expected),
        AI::UnexpectedVariant(v) => format!("variant `{}`, expected `{}`", v.found, v.expected),
        AI::MismatchedPrefixSize(v) => format!("a prefix of {} fields, expected {}", v.found, v.expected),
        other => {
            let debug = format!("{other:?}");
            let kind = debug.split(|c: char| !c.is_alphanumeric()).next().unwrap_or("a difference").to_string();
            format!("{kind} differs")
        }
    })?;
    Some(format!("at {path}: {what}"))
}

fn abi_error(path: &str, e: LibraryError, layout: Option<&'static abi_stable::type_layout::TypeLayout>) -> LoadError {
    let full = e.to_string();
    tracing::debug!(library = path, "full ABI report:\n{full}");
    match e {
        LibraryError::IncompatibleVersionNumber { actual_version, .. } => {
            let theirs = format!("{}.{}", actual_version.major, actual_version.minor);
            LoadError::IncompatibleAbi { path: path.to_string(), detail: rebuild_message(&theirs) }
        }
        LibraryError::AbiInstability(_) => {
            let at = layout_difference(layout).map_or_else(String::new, |d| format!(" {d}"));
            LoadError::IncompatibleAbi {
                path: path.to_string(),
                detail: format!(
                    "its layout differs from this host's{at}; rebuild it against cordis-abi {} (RUST_LOG=debug: the full report)",
                    crate::capabilities::HOST_ABI.major
                ),
            }
        }
        LibraryError::InvalidAbiHeader(_) => LoadError::NoHeader { path: path.to_string(), major: crate::capabilities::HOST_ABI.major },
        LibraryError::InvalidCAbi { .. } => LoadError::IncompatibleAbi {
            path: path.to_string(),
            detail: "it was built for another C ABI than this host's (another compiler target or calling convention)".into(),
        },
        LibraryError::RootModule { .. } => LoadError::Init { path: path.to_string(), detail: full.lines().next().unwrap_or("").to_string() },
        _ => LoadError::Init { path: path.to_string(), detail: full.lines().next().unwrap_or("").to_string() },
    }
}

const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
const PT_LOAD: u32 = 1;
const ET_DYN: u16 = 3;

/// Checks that `path` is a 64-bit little-endian ELF shared object whose
/// program header table and every loadable segment lie inside the file.
///
/// # Errors
/// [`LoadError::Incomplete`] for a file cut short, else
/// [`LoadError::NotSharedObject`] or [`LoadError::Unreadable`].
pub fn check_elf(path: &Path) -> Result<(), LoadError> {
    let shown = path.display().to_string();
    let bad = |detail: String| LoadError::NotSharedObject { path: shown.clone(), detail };
    let short = |detail: String| LoadError::Incomplete { path: shown.clone(), detail };
    let unreadable = |e: std::io::Error| LoadError::Unreadable { path: shown.clone(), detail: e.to_string() };
    let mut file = open_without_waiting(path).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    let size = meta.len();
    if size == 0 {
        return Err(short("the file is empty (a build may still be writing it)".into()));
    }
    let mut head = [0u8; 64];
    let n = read_up_to(&mut file, &mut head).map_err(unreadable)?;
    if n < 4 || head[..4] != ELF_MAGIC {
        return Err(bad("it does not start with the ELF magic bytes".into()));
    }
    if n < 64 {
        return Err(short(format!("the file is {size} bytes, too short for an ELF header (truncated?)")));
    }
    if head[4] != 2 || head[5] != 1 {
        return Err(bad("only 64-bit little-endian ELF libraries are supported".into()));
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
    let u64_at = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().unwrap_or([0; 8]));
    if u16_at(16) != ET_DYN {
        return Err(bad("it is an ELF file but not a shared object".into()));
    }
    let phoff = u64_at(32);
    let shoff = u64_at(40);
    let phentsize = u64::from(u16_at(54));
    let phnum = u64::from(u16_at(56));
    let shentsize = u64::from(u16_at(58));
    let shnum = u64::from(u16_at(60));
    // Linkers write the section header table last: a file cut anywhere
    // before its end (a build still writing it) fails here.
    let sections_end = shoff.saturating_add(shentsize.saturating_mul(shnum));
    if shoff != 0 && sections_end > size {
        return Err(short(format!(
            "its section headers end at byte {sections_end}, past the end of the {size}-byte file (truncated, or still being written?)"
        )));
    }
    let table_end = phoff.saturating_add(phentsize.saturating_mul(phnum));
    if phentsize < 56 || table_end > size {
        return Err(if phentsize < 56 {
            bad(format!("its program header entries are {phentsize} bytes, less than the 56 of a 64-bit ELF file"))
        } else {
            short(format!("its program headers end at byte {table_end}, past the end of the {size}-byte file (truncated?)"))
        });
    }
    let mut table = vec![0u8; (phentsize * phnum) as usize];
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(phoff)).map_err(unreadable)?;
    file.read_exact(&mut table).map_err(unreadable)?;
    for i in 0..phnum as usize {
        let e = &table[i * phentsize as usize..];
        let p_type = u32::from_le_bytes(e[0..4].try_into().unwrap_or([0; 4]));
        if p_type != PT_LOAD {
            continue;
        }
        let p_offset = u64::from_le_bytes(e[8..16].try_into().unwrap_or([0; 8]));
        let p_filesz = u64::from_le_bytes(e[32..40].try_into().unwrap_or([0; 8]));
        let end = p_offset.saturating_add(p_filesz);
        if end > size {
            return Err(short(format!("loadable segment {i} ends at byte {end}, past the end of the {size}-byte file (truncated?)")));
        }
    }
    Ok(())
}

/// Where the last byte the dynamic loader reads of a 64-bit little-endian
/// ELF file of `size` bytes ends: the end of its ELF header, program header
/// table and loadable segments, whichever is last; `None` when the headers
/// do not read as such (or point past `size`).
fn loaded_extent(file: &File, size: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; 64];
    file.read_exact_at(&mut head, 0).ok()?;
    if head[..4] != ELF_MAGIC || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let phoff = u64::from_le_bytes(head[32..40].try_into().ok()?);
    let phentsize = u64::from(u16::from_le_bytes([head[54], head[55]]));
    let phnum = u64::from(u16::from_le_bytes([head[56], head[57]]));
    let table_end = phoff.checked_add(phentsize.checked_mul(phnum)?)?;
    if phentsize < 56 || table_end > size {
        return None;
    }
    let mut table = vec![0u8; usize::try_from(table_end - phoff).ok()?];
    file.read_exact_at(&mut table, phoff).ok()?;
    let mut end = table_end.max(64);
    for entry in table.chunks_exact(usize::try_from(phentsize).ok()?) {
        if u32::from_le_bytes(entry[0..4].try_into().ok()?) != PT_LOAD {
            continue;
        }
        let offset = u64::from_le_bytes(entry[8..16].try_into().ok()?);
        let filesz = u64::from_le_bytes(entry[32..40].try_into().ok()?);
        end = end.max(offset.checked_add(filesz)?);
    }
    (end <= size).then_some(end)
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Why no declaration could be picked from a library.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UnwrapError {
    /// The library lists no plugins.
    #[error("plugin library {path} exports no plugins")]
    Empty {
        /// The library file.
        path: String,
    },
    /// Several declarations share a name.
    #[error("plugin library {path} exports {count} plugins named `{name}`; export names must be unique, so none of them is loaded")]
    Ambiguous {
        /// The library file.
        path: String,
        /// The repeated name.
        name: String,
        /// How many share it.
        count: usize,
    },
    /// The named export does not exist.
    #[error("plugin library {path} has no export `{export}` (it exports: {available})")]
    NoSuchExport {
        /// The library file.
        path: String,
        /// The export asked for.
        export: String,
        /// What it has.
        available: String,
    },
    /// Several exports and none named like the library.
    #[error("plugin library {path} exports several plugins ({available}) and none is named `{library}`; pick one with `{library}/<export>`")]
    Unspecified {
        /// The library file.
        path: String,
        /// The library's name.
        library: String,
        /// Its exports.
        available: String,
    },
    /// The picked declaration is incomplete.
    #[error("plugin `{name}` in {path} has an incomplete declaration: {detail}")]
    Incomplete {
        /// The plugin.
        name: String,
        /// The library file.
        path: String,
        /// What is missing.
        detail: String,
    },
}

/// Device, inode, size, modification time (seconds, nanoseconds) and
/// mode: a file's content, or whether it may be loaded (a library writable
/// by every user is refused), may have changed when any of them did.
pub type FileIdentity = (u64, u64, u64, i64, i64, u32);

/// Whether a file's size or its modification or change time differ between
/// two reads of its metadata. The kernel stamps times from a coarse clock
/// (a few milliseconds), so two writes very close together can carry the
/// same time; the size of a file rewritten by truncation differs while it
/// is written.
fn changed_since(before: &std::fs::Metadata, after: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (before.len(), before.mtime(), before.mtime_nsec(), before.ctime(), before.ctime_nsec())
        != (after.len(), after.mtime(), after.mtime_nsec(), after.ctime(), after.ctime_nsec())
}

/// The [`FileIdentity`] of `path`, if it can be read.
pub fn file_identity(path: &Path) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.dev(), meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec(), meta.mode()))
}

/// A declaration picked from a library, with its parsed config schema.
#[derive(Clone)]
pub struct Picked {
    /// The declaration.
    pub decl: PluginDecl,
    /// `decl.config_schema` parsed (shared with the library).
    pub config_schema: Arc<Value>,
}

/// Unwraps a library's exports to one plugin: the export named `export` when
/// given, else the one named after the library, else the only one. Refuses
/// libraries that export two plugins under one name (a stripped decoy beside
/// the real declaration), and declarations without a name or config schema.
///
/// # Errors
/// [`UnwrapError`].
pub fn unwrap_export(library: &Library, export: Option<&str>) -> Result<Picked, UnwrapError> {
    // The user's file, not the private copy it runs from.
    let path = || library.source.display().to_string();
    if library.plugins.is_empty() {
        return Err(UnwrapError::Empty { path: path() });
    }
    let available = || library.plugins.iter().map(|p| format!("`{}`", p.name)).collect::<Vec<_>>().join(", ");
    let wanted = export.unwrap_or(&library.name);
    let mut matching = library.plugins.iter().enumerate().filter(|(_, p)| p.name.as_str() == wanted);
    let (index, decl) = match (matching.next(), matching.count(), export) {
        (Some(found), 0, _) => found,
        (Some(_), more, _) => return Err(UnwrapError::Ambiguous { path: path(), name: wanted.to_string(), count: more + 1 }),
        (None, _, Some(export)) => return Err(UnwrapError::NoSuchExport { path: path(), export: export.to_string(), available: available() }),
        (None, _, None) if library.plugins.len() == 1 => (0, &library.plugins[0]),
        (None, _, None) => return Err(UnwrapError::Unspecified { path: path(), library: library.name.clone(), available: available() }),
    };
    let same_name = library.plugins.iter().filter(|p| p.name == decl.name).count();
    if same_name > 1 {
        return Err(UnwrapError::Ambiguous { path: path(), name: decl.name.to_string(), count: same_name });
    }
    let incomplete = |detail: &str| UnwrapError::Incomplete { name: decl.name.to_string(), path: path(), detail: detail.to_string() };
    if decl.name.trim().is_empty() {
        return Err(incomplete("it has no name"));
    }
    let config_schema = match library.config_schemas.get(index) {
        Some(Some(schema)) => schema.clone(),
        _ => return Err(incomplete("its config schema is not JSON")),
    };
    if !config_schema.is_object() {
        return Err(incomplete("its config schema is not a JSON Schema object"));
    }
    Ok(Picked { decl: decl.clone(), config_schema })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memfd with one page written, and that page mapped shared and
    /// writable: while the mapping lasts, the kernel refuses the write seal
    /// with `EBUSY`, as it does while a page is held elsewhere.
    fn memfd_mapped_writable() -> (File, usize) {
        use std::io::Write;
        let mut file = new_memfd().unwrap();
        file.write_all(&[7u8; 4096]).unwrap();
        let map = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                4096,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                &file,
                0,
            )
        }
        .unwrap();
        (file, map as usize)
    }

    #[test]
    fn a_busy_seal_is_tried_again_until_the_hold_ends() {
        let (file, map) = memfd_mapped_writable();
        let unmapper = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(25));
            unsafe { rustix::mm::munmap(map as *mut std::ffi::c_void, 4096) }.unwrap();
        });
        seal_for_good(&file).unwrap();
        unmapper.join().unwrap();
        let seals = rustix::fs::fcntl_get_seals(&file).unwrap();
        assert!(seals.contains(rustix::fs::SealFlags::WRITE | rustix::fs::SealFlags::SEAL), "{seals:?}");
    }

    #[test]
    fn a_seal_busy_for_good_is_an_error_not_a_hang() {
        let (file, map) = memfd_mapped_writable();
        let started = std::time::Instant::now();
        let error = seal_for_good(&file).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(rustix::io::Errno::BUSY.raw_os_error()), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        unsafe { rustix::mm::munmap(map as *mut std::ffi::c_void, 4096) }.unwrap();
    }

    #[test]
    fn elf_checks_reject_non_libraries() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("libempty.so");
        std::fs::write(&empty, b"").unwrap();
        assert!(check_elf(&empty).unwrap_err().to_string().contains("empty"));
        let text = dir.path().join("libtext.so");
        std::fs::write(&text, b"this is not a library\n").unwrap();
        assert!(check_elf(&text).unwrap_err().to_string().contains("ELF magic"));
        let exe = std::env::current_exe().unwrap();
        // The test binary is a PIE (ET_DYN) on most Linux toolchains; either
        // way the check must not report truncation for a complete file.
        if let Err(e) = check_elf(&exe) {
            assert!(!e.to_string().contains("truncated"), "{e}");
        }
        let bytes = std::fs::read(&exe).unwrap();
        // Cut one byte short of the end of the last loadable segment.
        let phoff = u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize;
        let phentsize = u16::from_le_bytes([bytes[54], bytes[55]]) as usize;
        let phnum = u16::from_le_bytes([bytes[56], bytes[57]]) as usize;
        let load_end = (0..phnum)
            .map(|i| &bytes[phoff + i * phentsize..])
            .filter(|e| u32::from_le_bytes(e[0..4].try_into().unwrap()) == PT_LOAD)
            .map(|e| u64::from_le_bytes(e[8..16].try_into().unwrap()) + u64::from_le_bytes(e[32..40].try_into().unwrap()))
            .max()
            .unwrap() as usize;
        let cut = dir.path().join("libcut.so");
        std::fs::write(&cut, &bytes[..load_end - 1]).unwrap();
        let err = check_elf(&cut).unwrap_err().to_string();
        assert!(err.contains("past the end"), "{err}");
    }

    /// A private copy made in a spare, larger or smaller than the file's
    /// segments or with none, holds the same bytes: the file's loaded
    /// extent, then zeros, at the file's size, sealed.
    #[test]
    fn a_spare_makes_the_same_copy() {
        use rustix::fs::{fcntl_get_seals, SealFlags};
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("libexe.so");
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        std::fs::write(&source, &bytes).unwrap();
        let source = source.canonicalize().unwrap();
        let wanted = loaded_extent(&File::open(&source).unwrap(), bytes.len() as u64).unwrap() as usize;
        let cache = LibraryCache::private_copies().allow_writable(true);
        let mut copies = Vec::new();
        for spare in [None, Some(wanted as u64 + 65_536), Some(4096), Some(bytes.len() as u64 * 2)] {
            if let Some(len) = spare {
                cache.add_spare(&source, len);
                assert!(cache.spares.lock().unwrap().contains_key(&source));
            }
            let sealed = cache.changed_copy(&source).unwrap().expect("nothing is loaded, so the copy is new");
            assert!(cache.spares.lock().unwrap().is_empty(), "the copy takes the spare");
            assert_eq!(sealed.len(), bytes.len() as u64);
            let seals = fcntl_get_seals(&*sealed.file).unwrap();
            assert!(seals.contains(SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK), "{spare:?}: {seals:?}");
            let copied = std::fs::read(sealed.path()).unwrap();
            assert_eq!(copied.len(), bytes.len());
            assert!(copied[..wanted] == bytes[..wanted], "{spare:?}: the segments differ");
            assert!(copied[wanted..].iter().all(|b| *b == 0), "{spare:?}: past the segments, zeros");
            copies.push(copied);
        }
        assert!(copies.windows(2).all(|w| w[0] == w[1]));
    }
}
