//! `cordis dev` re-executing itself in place, to let go of the plugin
//! libraries its reloads replaced.
//!
//! A library can never be unloaded (`abi_stable` leaks it, and code from it
//! may still be referenced), so every reload keeps the replaced copy mapped.
//! When the memory they keep would pass the budget
//! ([`super::DevOptions::memory_budget`]), the host restarts in place
//! instead of loading one more: between two console commands (so no call is
//! in flight and none is half-logged), it `exec`s its own binary with the
//! same arguments and the same process id. What carries over:
//!
//! - the session, by id: the new process opens it again (the log is
//!   durable; projections fold again from it), an open turn stays open;
//! - the sealed copies of the libraries running now, as inherited file
//!   descriptors: the new process runs exactly the builds that were
//!   running, then handles the change that asked for the restart (and any
//!   other change made meanwhile) as an ordinary reload, with its checks;
//! - console input read but not yet answered, through a sealed memfd;
//! - the reload and restart counts.
//!
//! All of it travels in one environment variable ([`HANDOVER_VAR`]), read
//! and removed by the new process before it starts any thread. Every other
//! descriptor (the session's lock, the watcher, the replaced copies) is
//! close-on-exec and released by the `exec`.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::loader::library::SealedCopy;

/// The environment variable a restarting `cordis dev` hands its state over
/// in (JSON, [`Handover`]).
pub const HANDOVER_VAR: &str = "CORDIS_DEV_HANDOVER";

/// What a restarting `cordis dev` passes to the process that replaces it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Handover {
    /// The dev session's id.
    pub session: String,
    /// Reloads applied so far (composition and library).
    pub reloads: u64,
    /// Library reloads applied so far.
    pub library_reloads: u64,
    /// Restarts so far, this one included.
    pub restarts: u64,
    /// Sealed copies of the libraries running: canonical source and the
    /// inherited descriptor.
    pub copies: Vec<(PathBuf, i32)>,
    /// A sealed memfd holding console input read but not yet answered.
    pub input: Option<i32>,
}

/// The state handed over by the process this one replaced, if it is a
/// restart; the variable is removed from the environment so that nothing
/// this process starts inherits it. Call before starting any thread.
pub fn take() -> Option<Handover> {
    let text = std::env::var_os(HANDOVER_VAR)?;
    std::env::remove_var(HANDOVER_VAR);
    match serde_json::from_str(&text.to_string_lossy()) {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("cordis dev: ignoring {HANDOVER_VAR}: {e}");
            None
        }
    }
}

impl Handover {
    /// Takes over the inherited library copies (those that are not sealed
    /// memfds are ignored, and their libraries loaded from their files).
    pub fn adopt_copies(&self) -> Vec<(PathBuf, SealedCopy)> {
        // SAFETY: the descriptors were inherited for this purpose and
        // nothing else in this process knows them.
        self.copies.iter().filter_map(|(source, fd)| Some((source.clone(), unsafe { SealedCopy::adopt(*fd) }?))).collect()
    }

    /// The console input the previous process had read and not answered.
    pub fn take_input(&self) -> Vec<u8> {
        let Some(fd) = self.input.filter(|fd| *fd >= 0) else { return Vec::new() };
        // SAFETY: inherited for this purpose; owned by nobody else.
        let mut file = unsafe { File::from_raw_fd(fd) };
        let mut bytes = Vec::new();
        let _ = file.rewind().and_then(|()| file.read_to_end(&mut bytes));
        bytes
    }
}

/// Replaces this process with a new run of its own binary (same arguments,
/// same process id), handing `handover`, the `copies` and the unanswered
/// `input` over. Returns only when that fails.
pub fn exec(mut handover: Handover, copies: &[(PathBuf, SealedCopy)], input: &[u8]) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    handover.copies.clear();
    for (source, copy) in copies {
        if let Err(e) = copy.keep_across_exec() {
            return e;
        }
        handover.copies.push((source.clone(), copy.fd()));
    }
    if !input.is_empty() {
        match input_file(input) {
            // Leaked on purpose: the new process owns it.
            Ok(file) => handover.input = Some(std::mem::ManuallyDrop::new(file).as_raw_fd()),
            Err(e) => return e,
        }
    }
    let text = match serde_json::to_string(&handover) {
        Ok(t) => t,
        Err(e) => return std::io::Error::other(e),
    };
    let mut args = std::env::args_os();
    let program: OsString = args.next().unwrap_or_else(|| "cordis".into());
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // `/proc/self/exe` is the binary this process runs, even when a build
    // has replaced the file since.
    std::process::Command::new("/proc/self/exe").arg0(program).args(args).env(HANDOVER_VAR, text).exec()
}

/// `bytes` in a sealed memfd that survives `exec`.
fn input_file(bytes: &[u8]) -> std::io::Result<File> {
    use rustix::fs::{memfd_create, MemfdFlags};
    let mut file = File::from(memfd_create(c"cordis-dev-input", MemfdFlags::ALLOW_SEALING)?);
    file.write_all(bytes)?;
    crate::loader::library::seal_for_good(&file)?;
    Ok(file)
}

/// This process's resident memory (`VmRSS`), in bytes: the second field of
/// `/proc/self/statm` (pages), which the kernel writes more cheaply than
/// `status`.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}
