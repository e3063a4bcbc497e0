//! Stdout set aside for a protocol (`cordis mcp`, `cordis acp`): whatever
//! the host or a plugin prints must never land between protocol messages.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsFd as _;

/// Gives the protocol a descriptor of its own and points descriptor 1
/// (what `println!` in the host or in any plugin writes to) at stderr.
/// Call it before any plugin is loaded; the returned file is where
/// protocol messages go.
///
/// # Errors
/// When the descriptors cannot be duplicated.
pub fn isolate_stdout() -> std::io::Result<File> {
    // Whatever was buffered for the old stdout goes out first.
    std::io::stdout().flush()?;
    let protocol = rustix::io::fcntl_dupfd_cloexec(std::io::stdout().as_fd(), 3)?;
    rustix::stdio::dup2_stdout(std::io::stderr().as_fd())?;
    Ok(File::from(protocol))
}
