//! `cordis session import PATH [--id ID]`: a session log (ours or the
//! harness's) copied into the store as a new session.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use cordis_session::ProblemKind;

use crate::cli::boot::{boot_for_sessions, invocation, refuse_under_strict};
use crate::cli::{render, Cli, CliError};

/// Imports `path` as session `id` (default: the log's own id when valid).
///
/// # Errors
/// Exit 2 when the log cannot be read, the id is taken, or `--strict`
/// refuses a damaged log.
pub fn run(cli: &Cli, path: &Path, id: Option<&str>) -> Result<ExitCode, CliError> {
    let host = boot_for_sessions(cli)?;
    if cli.strict {
        let (_, problems) = host.services.sessions.view(&path.display().to_string()).map_err(|e| e.to_string())?;
        refuse_under_strict(&path.display().to_string(), &problems)?;
    }
    let report = host.services.sessions.import(path, id).map_err(|e| match e {
        cordis_session::StoreError::Exists(id) => {
            format!("session `{id}` already exists; pass --id NEW_ID to import this log under another id")
        }
        other => other.to_string(),
    })?;
    let mut out = std::io::stdout().lock();
    for p in &report.problems {
        let _ = writeln!(out, "{}:{}: {}", path.display(), p.line, p.message);
    }
    let skipped = cordis_session::skipped_lines(&report.problems);
    let broken = report.problems.iter().filter(|p| p.kind == ProblemKind::Broken).count();
    let _ = writeln!(
        out,
        "imported {} as session {}: {} ({} opaque), {} skipped, {} of the log's rules (imported as written); continue with: {}",
        path.display(),
        report.id,
        render::count(report.events, "event", "events"),
        report.opaque,
        render::count(skipped, "line", "lines"),
        render::count(broken, "break", "breaks"),
        invocation(cli, &format!("run --session {} --script FILE PROMPT", report.id))
    );
    Ok(ExitCode::SUCCESS)
}
