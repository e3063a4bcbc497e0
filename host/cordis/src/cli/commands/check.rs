//! `cordis check [FILE] [--json]`: loads every entry of a composition and
//! reports its state; exit 1 when an entry failed or names a plugin nobody
//! provides.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use cordis_engine::runtime::Host;

use crate::cli::boot::options;
use crate::cli::{render, Cli, CliError};

/// Runs `check` on `file`, printing a table, or JSON when `json`.
///
/// # Errors
/// Exit 2 when the composition cannot be read (with `{"error"}` on stdout
/// under `--json`).
pub fn run(cli: &Cli, file: &Path, json: bool) -> Result<ExitCode, CliError> {
    let host = match Host::boot(&options(cli, file, true)) {
        Ok(host) => host,
        Err(e) => {
            let message = e.to_string();
            if json {
                println!("{}", serde_json::json!({ "error": message }));
            }
            return Err(message.into());
        }
    };
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string_pretty(&render::check_json(&host)).map_err(|e| e.to_string())?;
        let _ = writeln!(out, "{text}");
    } else {
        render::check(&mut out, &host);
    }
    // Exit 1 when an entry failed or names a plugin nobody
    // provides; a waiting entry may yet start (a provider added
    // later), so it fails the check only under --strict.
    let not = render::NotRunning::of(&host);
    if !json {
        if let Some(summary) = not.summary(host.reports.len()) {
            let _ = writeln!(out, "{summary}");
        }
    }
    if not.failed + not.missing > 0 || (cli.strict && not.waiting > 0) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
