//! `cordis run [--script FILE] [--session ID] [PROMPT]`: one agent turn,
//! printed as it streams.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use cordis_engine::agent::{Agent, Interrupt, Model, ScriptedModel, ServiceModel, TurnError};
use cordis_engine::runtime::HostOptions;
use cordis_session::Session;

use crate::cli::boot::{boot_with, close_cut_short, invocation, options, refuse_under_strict, Verdict};
use crate::cli::printer::Printer;
use crate::cli::{render, Cli, CliError, EXAMPLE_SCRIPT};

/// Runs one turn of `prompt` (default: the script's) in a new session, or
/// in session `session_id`; exit 130 when interrupted, 1 when the turn
/// failed.
///
/// # Errors
/// Exit 2 when the composition, the script or the session cannot be used;
/// exit 1 when an entry failed.
pub fn run(cli: &Cli, script: Option<&Path>, session_id: Option<&str>, prompt: Option<&str>) -> Result<ExitCode, CliError> {
    // `run` keeps running while plugin code runs: from sealed private copies.
    let host = boot_with(cli, HostOptions { private_copies: true, ..options(cli, &cli.composition, false) }, Verdict::Serve)?;
    // The model: the script given, else the composition's `model` service,
    // else the example script.
    let composed = match script {
        Some(_) => None,
        None => ServiceModel::from_composition(&host.services.registry).map_err(|e| e.to_string())?,
    };
    let (mut model, script_prompt, again): (Box<dyn Model>, Option<String>, &str) = match composed {
        Some(m) => (Box::new(m), None, "PROMPT"),
        None => {
            let script_path = match script {
                Some(p) => p.to_path_buf(),
                None => {
                    // With no model, the example script stands in; not when
                    // an entry did not load, which may be the model itself
                    // (a missing API key, a library not built).
                    if let Some(first) = host.failures(true).first() {
                        return Err(format!(
                            "no --script given and no entry provides a `model` service; entry {} did not load ({}), and it may be the model: fix it, or pass --script FILE to run a script",
                            first.id,
                            first.state.messages().first().map_or("see `cordis check`", |m| m.as_str())
                        )
                        .into());
                    }
                    let default = host.dir().join(EXAMPLE_SCRIPT);
                    if !default.is_file() {
                        return Err(format!(
                            "no --script given, no entry provides a `model` service, and the example script {} does not exist",
                            default.display()
                        )
                        .into());
                    }
                    default
                }
            };
            let m = ScriptedModel::from_file(&script_path).map_err(|e| e.to_string())?;
            let p = m.prompt().map(str::to_string);
            if p.is_none() && prompt.is_none() {
                return Err(format!("no PROMPT given and the script {} has no `prompt:`", script_path.display()).into());
            }
            (Box::new(m), p, "--script FILE PROMPT")
        }
    };
    let prompt = match prompt.map(str::to_string).or(script_prompt) {
        Some(p) => p,
        None => {
            return Err(format!("no PROMPT given: the composition's model ({}/{}) needs the user's message", model.provider(), model.name()).into())
        }
    };
    let sessions = &host.services.sessions;
    let mut out = std::io::stdout().lock();
    let session: Arc<Session> = match session_id {
        Some(id) => {
            let (s, problems) = sessions.open(id).map_err(|e| e.to_string())?;
            if cli.strict {
                refuse_under_strict(id, &problems)?;
            }
            for p in &problems {
                eprintln!("warning: session {id}: {p}");
            }
            close_cut_short(id, &s)?;
            let _ = writeln!(out, "session {} (continued, {} events)", s.id(), s.len());
            s
        }
        None => {
            let cwd = std::env::current_dir().ok().map(|p| p.display().to_string());
            let s = sessions.create(cwd).map_err(|e| e.to_string())?;
            let _ = writeln!(out, "session {} (new)", s.id());
            s
        }
    };
    let interrupt = Interrupt::new();
    if let Err(e) = interrupt.install_sigint() {
        eprintln!("warning: Ctrl-C cannot be caught ({e}); it will stop the process without closing the turn");
    }
    let mut observer = Printer::new(&mut out, &host);
    let tools = host.services.tools.clone();
    let mut agent = Agent::new(session.clone(), tools, model.as_mut())
        .with_turn_hooks(host.services.turn_hooks.clone())
        .with_interrupt(interrupt.clone())
        .with_compaction(host.compaction.clone());
    let result = {
        let _armed = interrupt.arm();
        agent.run_turn(&prompt, &mut observer)
    };
    observer.end_stream();
    let next = invocation(cli, &format!("run --session {} {again}", session.id()));
    match result {
        Ok(summary) => {
            let _ = writeln!(
                out,
                "\nturn {} completed: {}, {} ({} failed). Continue with: {next}",
                summary.turn,
                render::count(summary.steps as usize, "step", "steps"),
                render::count(summary.tool_calls as usize, "tool call", "tool calls"),
                summary.tool_errors,
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(TurnError::Interrupted) => {
            let _ = writeln!(out, "\nturn interrupted (Ctrl-C); the log records it as such. Continue with: {next}");
            Ok(ExitCode::from(130))
        }
        Err(e) => {
            let _ = writeln!(out, "\nturn failed: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
