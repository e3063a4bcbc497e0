//! What every command shares: the host options from the global flags,
//! booting with a verdict on entries that did not load, `--strict`, and
//! how to tell the user to run `cordis` again.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use cordis_engine::agent::Quiet;
use cordis_engine::runtime::{Host, HostOptions};
use cordis_session::{Durability, LineProblem, ProblemKind, Session};

use crate::cli::{render, Cli, CliError, Command, SessionCommand};

/// The host options for `composition` from the global flags.
pub(crate) fn options(cli: &Cli, composition: &Path, in_memory: bool) -> HostOptions {
    HostOptions {
        composition: composition.to_path_buf(),
        state_dir: cli.state_dir.clone(),
        plugin_dirs: cli.plugin_dir.clone(),
        durability: cli.durability,
        in_memory,
        private_copies: false,
        allow_writable_plugins: cli.allow_writable_plugins,
        layers: cordis_composition::composition::layers(&cli.patches, cli.no_user_patch),
        session_root: match &cli.command {
            Command::Session { root, .. } => root.clone(),
            _ => None,
        },
        adopted_copies: Vec::new(),
    }
}

/// How to run `cordis` again the way it was run: the program as invoked and
/// every global option that changes what the next command sees (`-c`,
/// `--state-dir`, each `--plugin-dir` and `--patch`, `--no-user-patch`,
/// `--durability`, `--allow-writable-plugins`, `--strict`), each word quoted
/// for a POSIX shell when it needs it, followed by `rest`.
pub(crate) fn invocation(cli: &Cli, rest: &str) -> String {
    let program = std::env::args().next().unwrap_or_else(|| "cordis".into());
    let mut words = vec![shell_word(&program)];
    let mut option = |flag: &str, value: &Path| {
        words.push(flag.to_string());
        words.push(shell_word(&value.display().to_string()));
    };
    if cli.composition != Path::new("cordis.yml") {
        option("-c", &cli.composition);
    }
    if let Some(dir) = &cli.state_dir {
        option("--state-dir", dir);
    }
    for dir in &cli.plugin_dir {
        option("--plugin-dir", dir);
    }
    for layer in &cli.patches {
        option("--patch", layer);
    }
    if cli.no_user_patch {
        words.push("--no-user-patch".into());
    }
    if cli.durability != Durability::default() {
        let mode = match cli.durability {
            Durability::Event => "event",
            Durability::Turn => "turn",
            Durability::None => "none",
        };
        words.push(format!("--durability {mode}"));
    }
    if cli.allow_writable_plugins {
        words.push("--allow-writable-plugins".into());
    }
    if cli.strict {
        words.push("--strict".into());
    }
    format!("{} {rest}", words.join(" "))
}

/// `word` as one word for a POSIX shell: as it is when it holds only safe
/// characters, else in single quotes.
fn shell_word(word: &str) -> String {
    let safe = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Under `--strict`, a session log with a skipped line or a broken rule
/// is refused (as the harness refuses a log its invariants reject): each
/// such problem is printed, and the command fails with exit code 2.
pub(crate) fn refuse_under_strict(what: &str, problems: &[LineProblem]) -> Result<(), CliError> {
    let bad: Vec<&LineProblem> = problems.iter().filter(|p| p.kind != ProblemKind::Note).collect();
    if bad.is_empty() {
        return Ok(());
    }
    for p in &bad {
        eprintln!("error: session {what}: {}", render::printable(&p.to_string()));
    }
    Err(CliError {
        code: 2,
        message: format!(
            "session {what} has {} (lines not read, or breaks of the log's rules); --strict refuses it",
            render::count(bad.len(), "problem", "problems")
        ),
    })
}

/// Boots for a session command: like [`boot_for_use`], but a missing default
/// `cordis.yml` is not an error (reading or importing a log needs no
/// plugins; events of plugin-owned types then show as opaque).
pub(crate) fn boot_for_sessions(cli: &Cli) -> Result<Host, CliError> {
    // `--root` names a store to read; only `import` may start a new one.
    if let Command::Session { root: Some(root), command } = &cli.command {
        if !matches!(command, SessionCommand::Import { .. }) && !root.is_dir() {
            return Err(format!("--root {}: no such folder (a harness session store is a folder)", root.display()).into());
        }
    }
    if cli.composition == Path::new("cordis.yml") && !cli.composition.exists() {
        let host = Host::boot_without_composition(&options(cli, &cli.composition, false)).map_err(|e| e.to_string())?;
        eprintln!("note: no cordis.yml here; no plugins are loaded, so their events show as opaque");
        return Ok(host);
    }
    boot_for_use(cli, false)
}

/// Boots for a command that inspects the host (`tools`, `session`):
/// entries that did not load are warnings, fatal under `--strict` (exit 1).
pub(crate) fn boot_for_use(cli: &Cli, in_memory: bool) -> Result<Host, CliError> {
    boot_with(cli, options(cli, &cli.composition, in_memory), Verdict::Inspect)
}

/// What a command does with entries that did not load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An inspection (`tools`, `session`): warnings, unless `--strict`.
    Inspect,
    /// A command that serves the composition (`run`, `dev`, `mcp`): a
    /// failed entry refuses the start (exit 1), as it refuses the
    /// reference's boot; missing and waiting entries are warnings with a
    /// summary line, unless `--strict`.
    Serve,
}

/// Boots with `options`; entries that did not load as `verdict` says.
pub(crate) fn boot_with(cli: &Cli, options: HostOptions, verdict: Verdict) -> Result<Host, CliError> {
    let host = Host::boot(&options).map_err(|e| e.to_string())?;
    judge(cli, &host, verdict, true)?;
    Ok(host)
}

/// Prints what did not load in `host` (each entry's messages when
/// `details`, then a summary line) and refuses the command when `verdict`
/// (or `--strict`) says so.
///
/// # Errors
/// Exit 1 naming the entries: a failed entry under [`Verdict::Serve`], any
/// entry that did not load under `--strict`.
pub(crate) fn judge(cli: &Cli, host: &Host, verdict: Verdict, details: bool) -> Result<(), CliError> {
    if details {
        for w in &host.composition.warnings {
            eprintln!("warning: {}", render::printable(w));
        }
    }
    let not = render::NotRunning::of(host);
    let Some(summary) = not.summary(host.reports.len()) else { return Ok(()) };
    let refuse = cli.strict || (verdict == Verdict::Serve && not.failed > 0);
    let mut err = std::io::stderr().lock();
    for r in host.failures(true).into_iter().filter(|_| details) {
        let label = if refuse && (cli.strict || r.state.is_failure()) { "error" } else { "warning" };
        for line in r.state.messages() {
            let _ = writeln!(err, "{label}: {}", render::printable(line));
        }
    }
    if !refuse {
        let _ = writeln!(err, "warning: {summary}; starting without them (`{}` tells why)", invocation(cli, "check"));
        return Ok(());
    }
    let failed: Vec<&str> = host.reports.iter().filter(|r| r.state.fails(cli.strict)).map(|r| r.id.as_str()).collect();
    // The ids named are those the verdict is about: the failed entries,
    // or under --strict every entry that did not load.
    let (which, why) =
        if cli.strict { ("not loaded", "--strict refuses any entry that did not load") } else { ("failed", "a failed entry refuses the start") };
    Err(CliError { code: 1, message: format!("{summary}; {which}: {}; {why}; run `{}` for details", failed.join(", "), invocation(cli, "check")) })
}

/// Closes a compaction of `session` that a stopped process cut short (a
/// `compaction/start` with no `compaction/end`; see
/// [`cordis_engine::agent::compaction::recover`]) before anything else is
/// written, and says so on stderr.
///
/// # Errors
/// When the log refuses the closing events.
pub(crate) fn close_cut_short(id: &str, session: &Arc<Session>) -> Result<(), CliError> {
    match cordis_engine::agent::compaction::close_cut_short(session, &mut Quiet) {
        Ok(Some(cut)) => {
            eprintln!("note: session {}: {}", render::printable(id), cut.describe());
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(e) => Err(format!("session {}: a compaction that was cut short cannot be closed: {e}", render::printable(id)).into()),
    }
}
