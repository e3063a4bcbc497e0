//! `cordis session show ID|PATH`: a session's transcript and plan.

use std::process::ExitCode;

use cordis_session::core_type_or_owned;

use crate::cli::boot::boot_for_sessions;
use crate::cli::{render, Cli, CliError};

/// Prints session `session` (an id, or a path to a session file).
///
/// # Errors
/// Exit 2 when the session cannot be found or read.
pub fn run(cli: &Cli, session: &str) -> Result<ExitCode, CliError> {
    let host = boot_for_sessions(cli)?;
    let (s, problems) = host.services.sessions.view(session).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    render::session_show(&mut out, &s, &problems, &|kind| core_type_or_owned(&host.services.events, kind));
    Ok(ExitCode::SUCCESS)
}
