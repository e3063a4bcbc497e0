//! `cordis plugins [--json]`: the libraries on the plugin path and what
//! each declares, without running any plugin's `apply`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::{render, Cli, CliError};

/// Lists the plugin path's libraries, as a table or as JSON when `json`.
///
/// # Errors
/// Exit 2 when the listing cannot be serialized.
pub fn run(cli: &Cli, json: bool) -> Result<ExitCode, CliError> {
    let dir = cli.composition.parent().map(Path::to_path_buf).filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| PathBuf::from("."));
    let plugin_path = cordis_engine::loader::PluginPath::standard(&cli.plugin_dir, &dir);
    let libraries = cordis_engine::loader::catalog::catalog(&plugin_path);
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string_pretty(&serde_json::json!({"libraries": libraries})).map_err(|e| e.to_string())?;
        let _ = writeln!(out, "{text}");
    } else {
        render::plugins(&mut out, &libraries, &plugin_path);
    }
    Ok(ExitCode::SUCCESS)
}
