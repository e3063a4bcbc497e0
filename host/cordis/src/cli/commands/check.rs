//! `cordis check [FILE] [--json] [--sessions]`: loads every entry of a
//! composition and reports its state; exit 1 when an entry failed or names
//! a plugin nobody provides. With `--sessions`, also reads the
//! composition's session store and reports the sessions holding a
//! compaction cut short (which never changes the exit code).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use cordis_engine::runtime::{Host, HostOptions};
use cordis_session::StoreError;

use crate::cli::boot::options;
use crate::cli::{render, Cli, CliError};

/// Runs `check` on `file`, printing a table, or JSON when `json`; with
/// `sessions`, then the sessions of the composition's store that hold a
/// compaction cut short ([`render::SessionsCheck`]).
///
/// # Errors
/// Exit 2 when the composition cannot be read (with `{"error"}` on stdout
/// under `--json`).
pub fn run(cli: &Cli, file: &Path, json: bool, sessions: bool) -> Result<ExitCode, CliError> {
    let options = options(cli, file, true);
    let host = match Host::boot(&options) {
        Ok(host) => host,
        Err(e) => {
            let message = e.to_string();
            if json {
                println!("{}", serde_json::json!({ "error": message }));
            }
            return Err(message.into());
        }
    };
    let sessions = sessions.then(|| read_sessions(&host, &options));
    let mut out = std::io::stdout().lock();
    if json {
        let mut value = render::check_json(&host);
        if let Some(s) = &sessions {
            value["sessions"] = s.json();
        }
        let text = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
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
    if let (Some(s), false) = (&sessions, json) {
        s.print(&mut out);
    }
    if not.failed + not.missing > 0 || (cli.strict && not.waiting > 0) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads every session of the composition's store (opened on its own: the
/// host booted with sessions in memory) for the compactions cut short; a
/// store that cannot be opened or listed is a finding, not an error.
fn read_sessions(host: &Host, options: &HostOptions) -> render::SessionsCheck {
    let store = match host.open_session_store(options) {
        Ok(Some(store)) => store,
        Ok(None) => return render::SessionsCheck::NoFolder(host.state_dir.join("sessions").display().to_string()),
        Err(e) => return render::SessionsCheck::Unreadable { store: None, error: e.to_string() },
    };
    let place = store.location();
    match host.services.sessions.over(store).list() {
        Ok((list, skipped)) => render::SessionsCheck::Read {
            store: place,
            sessions: list.len(),
            cut_short: list.into_iter().filter_map(|s| Some((s.id, s.cut_short?))).collect(),
            skipped,
        },
        // An unusable store's place is its reason, said by the error.
        Err(e @ StoreError::Unusable(_)) => render::SessionsCheck::Unreadable { store: None, error: e.to_string() },
        Err(e) => render::SessionsCheck::Unreadable { store: Some(place), error: e.to_string() },
    }
}
