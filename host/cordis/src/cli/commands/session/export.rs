//! `cordis session export ID|PATH [-o FILE]`: a session's whole log,
//! packed chunk rows expanded.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::boot::boot_for_sessions;
use crate::cli::{Cli, CliError};

/// Writes session `session`'s log to `output`, or to stdout.
///
/// # Errors
/// Exit 2 when the session cannot be read, or `output` exists (without
/// `force`), lies inside the store, or cannot be written.
pub fn run(cli: &Cli, session: &str, output: Option<&Path>, force: bool) -> Result<ExitCode, CliError> {
    let host = boot_for_sessions(cli)?;
    if let Some(file) = output {
        if let (Some(store), Ok(target)) = (host.services.sessions.store(), file.canonicalize()) {
            if store.contains(&target) {
                return Err(format!("refusing to write {}: it is inside the session store", file.display()).into());
            }
        }
        if file.exists() && !force {
            return Err(format!("{} exists; pass --force to overwrite it", file.display()).into());
        }
    }
    let (s, problems) = host.services.sessions.view(session).map_err(|e| e.to_string())?;
    for p in &problems {
        eprintln!("warning: {session}: {p}");
    }
    let mut text = serde_json::to_string(&s.header()).map_err(|e| e.to_string())?;
    text.push('\n');
    s.with_events(|events| events.iter().for_each(|e| text.push_str(&e.to_line())));
    match output {
        Some(file) => std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?,
        None => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
    }
    Ok(ExitCode::SUCCESS)
}
