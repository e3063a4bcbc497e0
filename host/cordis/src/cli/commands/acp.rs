//! `cordis acp [--script FILE]`: the agent served to an editor over the
//! Agent Client Protocol on stdio.

use std::path::Path;
use std::process::ExitCode;

use cordis_engine::runtime::HostOptions;

use crate::cli::boot::{boot_with, options, Verdict};
use crate::cli::{Cli, CliError};

/// Serves ACP until the editor closes stdin.
///
/// # Errors
/// Exit 2 when stdout cannot be set aside, the composition or its ACP
/// entry is refused, or the script cannot be read; exit 1 when an entry
/// failed.
pub fn run(cli: &Cli, script: Option<&Path>) -> Result<ExitCode, CliError> {
    // Stdout is the protocol's alone from here on: what the host or a
    // plugin prints goes to stderr.
    let protocol = cordis_engine::stdio::isolate_stdout().map_err(|e| format!("cannot set stdout aside for the protocol: {e}"))?;
    // Plugin code keeps running while the editor is open: sealed private copies.
    let host = boot_with(cli, HostOptions { private_copies: true, ..options(cli, &cli.composition, false) }, Verdict::Serve)?;
    let config = cordis_engine::loader::acp::select(&host.composition.entries).map_err(|m| m.join("\n"))?.unwrap_or_default();
    if let Some(path) = script {
        // A script that cannot be read is refused now, not at the first prompt.
        cordis_engine::agent::ScriptedModel::from_file(path).map_err(|e| e.to_string())?;
    } else if config.provider.is_some() || config.model.is_some() {
        // The harness's row names its model; here the composition's model
        // service answers, and a different one is said.
        if let Ok(Some(model)) = cordis_engine::agent::ServiceModel::from_composition(&host.services.registry) {
            use cordis_engine::agent::Model as _;
            let differs = |wanted: &Option<String>, got: &str| wanted.as_deref().is_some_and(|w| w != got);
            if differs(&config.provider, model.provider()) || differs(&config.model, model.name()) {
                eprintln!(
                    "note: the ACP entry names {}/{}, but the composition's model service is {}/{}; {} answers",
                    config.provider.as_deref().unwrap_or("-"),
                    config.model.as_deref().unwrap_or("-"),
                    model.provider(),
                    model.name(),
                    model.name()
                );
            }
        }
    }
    let options = cordis_acp::AcpOptions { script: script.map(Path::to_path_buf), config, version: env!("CARGO_PKG_VERSION").to_string() };
    let stdin = std::io::stdin().lock();
    cordis_acp::serve(&host, &options, stdin, Box::new(protocol)).map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}
