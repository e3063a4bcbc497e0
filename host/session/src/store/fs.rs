//! Filesystem helpers every file-backed store shares: private folders and
//! files, folder syncs, and the exclusive lock a writer holds.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

use super::{io, StoreError};

/// Creates `dir` and any missing parents with mode `0700` (every folder the
/// host creates is private to its user: the state directory, `sessions/`,
/// `hmr/`). A folder that exists already is left as it is.
///
/// # Errors
/// [`StoreError::NotADirectory`] when `dir` is a file, [`StoreError::Io`].
pub fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.exists() && !dir.is_dir() {
        return Err(StoreError::NotADirectory(dir.display().to_string()));
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(io(dir))
}

pub(crate) fn set_private_mode(options: &mut OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
}

pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// How long a busy session lock is retried before the session counts as
/// open in another process.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(300);

/// Takes the exclusive lock (`flock`) of the file of session `id`.
///
/// A lock can be held for an instant by a process that is being started
/// from this one (between fork and exec it shares our open files), so a busy
/// lock is tried again for a short while before the session counts as open
/// elsewhere.
///
/// # Errors
/// [`StoreError::Locked`], [`StoreError::Io`].
pub(crate) fn lock_exclusive(file: &File, path: &Path, id: &str) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + LOCK_PATIENCE;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(fs::TryLockError::WouldBlock) => return Err(StoreError::Locked { id: id.to_string(), path: path.display().to_string() }),
            Err(fs::TryLockError::Error(e)) => return Err(StoreError::Io { path: path.display().to_string(), source: e }),
        }
    }
}
