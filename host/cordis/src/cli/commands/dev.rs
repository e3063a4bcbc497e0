//! `cordis dev [FILE] [--session ID]`: the composition started, then
//! reloaded with its plugin libraries as they change, driven from stdin.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::cli::boot::{close_cut_short, judge, options, refuse_under_strict, Verdict};
use crate::cli::{render, Cli, CliError};

/// Runs the dev host until stdin ends or `quit`.
///
/// # Errors
/// Exit 2 when the composition or the session cannot be used; exit 1
/// when an entry failed.
pub fn run(cli: &Cli, file: Option<&Path>, session_id: Option<&str>, memory_budget_mib: u64, settle: Duration) -> Result<ExitCode, CliError> {
    // Before any thread starts: a restart in place hands its state over in
    // the environment.
    let handover = cordis_engine::reload::restart::take();
    let file = file.map(Path::to_path_buf).unwrap_or_else(|| cli.composition.clone());
    let dev_options = cordis_engine::reload::DevOptions {
        memory_budget: memory_budget_mib.saturating_mul(1024 * 1024),
        handover: handover.clone(),
        restart_in_place: true,
        settle,
        ..cordis_engine::reload::DevOptions::default()
    };
    let dev = cordis_engine::reload::DevHost::boot(options(cli, &file, false), dev_options).map_err(|e| e.to_string())?;
    if handover.is_none() || !dev.host.failures(false).is_empty() {
        let mut err = std::io::stderr().lock();
        render::check(&mut err, &dev.host);
    }
    // A restart in place carries on the host that was running.
    if handover.is_none() {
        judge(cli, &dev.host, Verdict::Serve, false)?;
    }
    let sessions = &dev.host.services.sessions;
    let session = match (&handover, session_id) {
        // The session the replaced process ran; its lock goes with that
        // process's descriptors, which a database may notice a moment late.
        (Some(h), _) => {
            let start = std::time::Instant::now();
            loop {
                match sessions.open(&h.session) {
                    Ok((s, _)) => {
                        close_cut_short(&h.session, &s)?;
                        break s;
                    }
                    Err(e) if start.elapsed() > std::time::Duration::from_secs(10) => return Err(e.to_string().into()),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        }
        (None, Some(id)) => {
            let (s, problems) = sessions.open(id).map_err(|e| e.to_string())?;
            if cli.strict {
                refuse_under_strict(id, &problems)?;
            }
            for p in &problems {
                eprintln!("warning: session {id}: {p}");
            }
            close_cut_short(id, &s)?;
            s
        }
        (None, None) => sessions.create(std::env::current_dir().ok().map(|p| p.display().to_string())).map_err(|e| e.to_string())?,
    };
    let dev = Arc::new(dev);
    cordis_engine::reload::watch(dev.clone()).map_err(CliError::from)?;
    let pending = match &handover {
        Some(h) => {
            // What changed while the restart was made, the change that
            // asked for it included.
            dev.catch_up();
            h.take_input()
        }
        None => {
            eprintln!(
                "cordis dev: watching {} and {}; session {}; commands on stdin (`help`)",
                dev.composition_path().display(),
                libraries(&dev),
                session.id()
            );
            Vec::new()
        }
    };
    cordis_engine::reload::console::run_stdio(&dev, &session, pending);
    Ok(ExitCode::SUCCESS)
}

/// `1 plugin library`, `3 plugin libraries`, and `; 2 entries not running`
/// when enabled entries are not running (`status` lists them and why).
pub(crate) fn libraries(dev: &cordis_engine::reload::DevHost) -> String {
    let n = dev.library_sources().len();
    let loaded = if n == 1 { "1 plugin library".to_string() } else { format!("{n} plugin libraries") };
    match dev.status()["notRunning"].as_array().map_or(0, Vec::len) {
        0 => loaded,
        1 => format!("{loaded}; 1 entry not running (`status` says why)"),
        m => format!("{loaded}; {m} entries not running (`status` says why)"),
    }
}
