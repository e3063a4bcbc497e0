//! `cordis config [FILE] [--show-values]`: the composed tree (patch layers
//! applied, includes expanded as groups) printed as one loadable YAML
//! document; the current value of a `!!js` expression that reads
//! `process.env` only with `--show-values`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::{render, Cli, CliError};

/// Prints the composed tree of `file` (with the values of expressions
/// reading `process.env` when `show_values`); exit 1 when a row could not
/// be mounted (it is printed as far as it was read).
///
/// # Errors
/// Exit 2 when the composition cannot be read.
pub fn run(cli: &Cli, file: &Path, show_values: bool) -> Result<ExitCode, CliError> {
    let layers = cordis_composition::composition::layers(&cli.patches, cli.no_user_patch);
    let composition = cordis_engine::loader::Composition::compose(file, &layers).map_err(|e| e.to_string())?;
    for w in &composition.warnings {
        eprintln!("warning: {}", render::printable(w));
    }
    let text = cordis_composition::render::composed_yaml_with(&composition, show_values);
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    // An entry the composition cannot mount (an include cycle, a
    // missing included file, a malformed row) is printed as written;
    // say so, and fail, as `check` would.
    let problems: Vec<&String> = composition.walk().into_iter().flat_map(|e| &e.problems).collect();
    for p in &problems {
        eprintln!("error: {}", render::printable(p));
    }
    if problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        let counted = if problems.len() == 1 { "1 problem".to_string() } else { format!("{} problems", problems.len()) };
        eprintln!("cordis config: {counted} above; those rows are printed as far as they could be read and will fail to load");
        Ok(ExitCode::from(1))
    }
}
