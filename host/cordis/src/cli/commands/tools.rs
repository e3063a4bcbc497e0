//! `cordis tools [--json]`: the tool catalog the composition registers,
//! with each tool's JSON Schema.

use std::io::Write;
use std::process::ExitCode;

use crate::cli::boot::boot_for_use;
use crate::cli::{render, Cli, CliError};

/// Prints the catalog, as a table or as JSON when `json`.
///
/// # Errors
/// Exit 2 when the composition cannot be booted; exit 1 under `--strict`
/// when an entry did not load.
pub fn run(cli: &Cli, json: bool) -> Result<ExitCode, CliError> {
    let host = boot_for_use(cli, true)?;
    let schemas = host.services.tools.schemas();
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string_pretty(&schemas).map_err(|e| e.to_string())?;
        let _ = writeln!(out, "{text}");
    } else {
        render::tools(&mut out, &schemas);
    }
    Ok(ExitCode::SUCCESS)
}
