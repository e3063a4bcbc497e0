//! `cordis session compact ID [--script FILE]`: a session's history
//! compacted now, between turns.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use cordis_engine::agent::{Model, ScriptedModel, ServiceModel};
use cordis_engine::runtime::Host;

use crate::cli::boot::{boot_for_sessions, close_cut_short};
use crate::cli::printer::Printer;
use crate::cli::{render, Cli, CliError};

/// Compacts session `session`, summarizing with `script` or the
/// composition's `model` service.
///
/// # Errors
/// Exit 2 when the composition has no compaction entry or model, the
/// session cannot be opened, or the compaction fails.
pub fn run(cli: &Cli, session: &str, script: Option<&Path>) -> Result<ExitCode, CliError> {
    let host = boot_for_sessions(cli)?;
    compact(&host, session, script)
}

/// `cordis session compact ID`: compacts the session now (see
/// [`cordis_engine::agent::compaction`]) and says what it did.
fn compact(host: &Host, id: &str, script: Option<&Path>) -> Result<ExitCode, CliError> {
    let Some(compactor) = host.compaction.clone() else {
        return Err("the composition has no compaction entry; add one (`- name: compaction-basic`), see docs/guide/sessions.md#compaction"
            .to_string()
            .into());
    };
    let mut model: Box<dyn Model> = match script {
        Some(path) => Box::new(ScriptedModel::from_file(path).map_err(|e| e.to_string())?),
        None => match ServiceModel::from_composition(&host.services.registry).map_err(|e| e.to_string())? {
            Some(m) => Box::new(m),
            None => return Err("no entry provides a `model` service to summarize with; add one, or pass --script FILE".to_string().into()),
        },
    };
    let (session, problems) = host.services.sessions.open(id).map_err(|e| e.to_string())?;
    for p in &problems {
        eprintln!("warning: {id}: {p}");
    }
    close_cut_short(id, &session)?;
    let mut out = std::io::stdout().lock();
    let mut printer = Printer::new(&mut out, host);
    // A turn left open by a process that stopped is closed first, as
    // `run --session` does: a compaction by hand is made between turns.
    if let Some(turn) = session.open_turn() {
        cordis_engine::agent::close_open_step(&session, &mut printer).map_err(|e| e.to_string())?;
        session
            .append_value("turn/end", &serde_json::json!({"turn": turn, "reason": {"kind": "interrupted"}}), cordis_session::Appender::Host)
            .map_err(|e| e.to_string())?;
    }
    let outcome = compactor.compact_now(&session, model.as_mut(), &host.services.tools.schemas(), None, &|| false, &mut printer);
    printer.end_stream();
    drop(printer);
    match outcome {
        Ok(Ok(o)) => {
            let _ = writeln!(out, "{}", o.describe());
            Ok(ExitCode::SUCCESS)
        }
        Ok(Err(skip)) => {
            let _ = writeln!(out, "nothing to compact: {skip}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(format!("session {}: {e}", render::printable(id)).into()),
    }
}
