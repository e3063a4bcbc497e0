//! `cordis session ls`: the stored sessions.

use std::process::ExitCode;

use crate::cli::boot::boot_for_sessions;
use crate::cli::{render, Cli, CliError};

/// Lists the store's sessions; a session that cannot be read is a warning.
///
/// # Errors
/// Exit 2 when the store cannot be opened or listed.
pub fn run(cli: &Cli) -> Result<ExitCode, CliError> {
    let host = boot_for_sessions(cli)?;
    let (list, skipped) = host.services.sessions.list().map_err(|e| e.to_string())?;
    for s in &skipped {
        eprintln!("warning: {s}");
    }
    let mut out = std::io::stdout().lock();
    let place = host.services.sessions.store().map_or_else(|| host.state_dir.display().to_string(), |s| s.location());
    render::session_list(&mut out, &list, &place);
    Ok(ExitCode::SUCCESS)
}
