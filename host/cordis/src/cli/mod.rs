//! The `cordis` command line.
//!
//! ```text
//! cordis [OPTIONS] check [FILE] [--json] validate a composition, list entries
//! cordis [OPTIONS] config [FILE]        print the composed tree (layers, includes)
//! cordis [OPTIONS] plugins [--json]     the libraries on the plugin path and what they declare
//! cordis [OPTIONS] tools [--json]       the tool catalog with JSON Schemas
//! cordis [OPTIONS] run [--script FILE] [--session ID] [PROMPT]
//! cordis [OPTIONS] dev [FILE] [--session ID]
//! cordis [OPTIONS] mcp [--session ID] [--http ADDR [--token T] [--allow-origin O]...] [--watch]
//! cordis [OPTIONS] session ls
//! cordis [OPTIONS] session show ID|PATH
//! cordis [OPTIONS] session import PATH [--id ID]
//! cordis [OPTIONS] session export ID|PATH [-o FILE]
//! cordis [OPTIONS] session watch (ID | --all) [--resume-within SECS]
//! cordis [OPTIONS] session compact ID [--script FILE]
//! cordis [OPTIONS] web [--http ADDR] [--token T] [--allow-host H]... [--allow-origin O]...
//! ```
//!
//! Exit codes: 0 success; 1 a failed entry (`check`, or any command under
//! `--strict`) or a failed turn; 2 bad usage or an unusable composition,
//! script or session.

mod render;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

use cordis_engine::agent::{Agent, Interrupt, Model, ScriptedModel, ServiceModel, ToolCallRequest, TurnError, TurnObserver};
use cordis_engine::runtime::{Host, HostOptions};
use cordis_engine::tools::ToolResult;
use cordis_session::{core_type_or_owned, event_message, Durability, Event, LineProblem, ProblemKind, Session};

/// The example script `cordis run` uses when no `--script` is given,
/// relative to the composition's folder.
pub const EXAMPLE_SCRIPT: &str = "examples/plan-and-ship.script.yml";

/// The default `--settle-ms` of `dev` and `mcp --watch`.
const SETTLE_MS: u64 = cordis_engine::reload::DEFAULT_SETTLE.as_millis() as u64;

/// The cordis plugin host.
#[derive(Debug, Parser)]
#[command(name = "cordis", version, about = "A plugin host for agent tools, loaded through a stable ABI", long_about = None)]
pub struct Cli {
    /// The composition to load.
    #[arg(short = 'c', long, global = true, default_value = "cordis.yml", value_name = "FILE")]
    pub composition: PathBuf,
    /// Where sessions are stored [default: .cordis/ beside the composition].
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A folder searched first for plugin libraries (repeatable).
    #[arg(long, global = true, value_name = "DIR")]
    pub plugin_dir: Vec<PathBuf>,
    /// When appended events are forced to disk.
    #[arg(long, global = true, value_enum, default_value_t = Durability::Event)]
    pub durability: Durability,
    /// Refuse to run (exit 1) when any entry failed, is missing or is
    /// waiting.
    #[arg(long, global = true)]
    pub strict: bool,
    /// Load plugin libraries that every user may write, or that sit in a
    /// folder every user may write (refused by default).
    #[arg(long, global = true, env = "CORDIS_ALLOW_WRITABLE_PLUGINS")]
    pub allow_writable_plugins: bool,
    /// A patch layer applied to the composition after the user layer
    /// (repeatable; applied in order).
    #[arg(long = "patch", global = true, value_name = "FILE")]
    pub patches: Vec<PathBuf>,
    /// Skip the user patch layer ($XDG_CONFIG_HOME/cordis/cordis.patch.yml).
    #[arg(long, global = true)]
    pub no_user_patch: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// A `cordis` command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate a composition: load every entry and report its state.
    Check {
        /// The composition (overrides --composition).
        file: Option<PathBuf>,
        /// Print `{"entries": [{id, name, state, source, library?, status?, reason?}], "warnings": [...]}`,
        /// or `{"error": MESSAGE}` (exit 2) when the composition cannot be read.
        #[arg(long)]
        json: bool,
    },
    /// List the plugin libraries on the plugin path: their plugins, package
    /// names, config keys and services provided and injected (runs no
    /// `apply`).
    Plugins {
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the composed tree (patch layers applied, includes expanded as
    /// groups) as one loadable YAML document, `!!js` kept verbatim; loads
    /// nothing.
    Config {
        /// The composition (overrides --composition).
        file: Option<PathBuf>,
    },
    /// List the tools the composition registers, with their JSON Schemas.
    Tools {
        /// Print the catalog as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one agent turn, printing the answer as it streams and the plan
    /// after each todo_write. The model is the script's (`--script`), else
    /// the composition's `model` service (e.g. llm-openai), else the
    /// example script.
    Run {
        /// The model script [default: the composition's `model` service, else examples/plan-and-ship.script.yml beside the composition].
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
        /// Continue this session instead of starting a new one.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// The user's message [default: the script's `prompt`; required with the composition's model].
        prompt: Option<String>,
    },
    /// Start the composition, then reload it and its plugin libraries as
    /// they change; drive it with commands on stdin (`help` lists them).
    Dev {
        /// The composition (overrides --composition).
        file: Option<PathBuf>,
        /// Continue this session instead of starting a new one.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Memory, in MiB, that replaced plugin libraries may keep before
        /// `cordis dev` restarts itself in place (same process id, same
        /// session, same console) to let go of them.
        #[arg(long, value_name = "MIB", default_value_t = cordis_engine::reload::DEFAULT_MEMORY_BUDGET / (1024 * 1024), value_parser = clap::value_parser!(u64).range(1..))]
        memory_budget: u64,
        /// How long, in milliseconds, the composition's files must stop
        /// changing before a change is applied (a file saved in parts is
        /// applied once, whole).
        #[arg(long, value_name = "MS", default_value_t = SETTLE_MS, value_parser = clap::value_parser!(u64).range(0..=60_000))]
        settle_ms: u64,
    },
    /// Serve the composition's tools to MCP clients: over stdio (the
    /// default), or Streamable HTTP at http://ADDR/mcp with --http. Each
    /// connection is an agent session in the state directory.
    #[cfg(feature = "mcp")]
    Mcp {
        /// Attach connections to this stored session (its lock is taken at
        /// start; one connection at a time) instead of a new session per
        /// connection.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Serve Streamable HTTP at ADDR (`127.0.0.1:8765`, or a port alone,
        /// bound on 127.0.0.1; port 0 picks one) instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// Require `Authorization: Bearer TOKEN` on every HTTP request
        /// (required to bind an address other than loopback).
        #[arg(long, value_name = "TOKEN", env = "CORDIS_MCP_TOKEN", hide_env_values = true, requires = "http")]
        token: Option<String>,
        /// A browser origin allowed besides the server's own, as
        /// scheme://host:port (repeatable; HTTP only).
        #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
        allow_origins: Vec<String>,
        /// A name accepted in the `Host` header besides loopback and the
        /// bound address: the name or address remote clients connect to
        /// (repeatable; needed when binding 0.0.0.0; HTTP only).
        #[arg(long = "allow-host", value_name = "NAME", requires = "http")]
        allow_hosts: Vec<String>,
        /// Reload the composition and plugin libraries as they change, as
        /// `cordis dev` does; connected clients get
        /// `notifications/tools/list_changed` when the tool catalog changes.
        #[arg(long)]
        watch: bool,
        /// With --watch: how long, in milliseconds, the composition's files
        /// must stop changing before a change is applied.
        #[arg(long, value_name = "MS", default_value_t = SETTLE_MS, value_parser = clap::value_parser!(u64).range(0..=60_000), requires = "watch")]
        settle_ms: u64,
    },
    /// Serve the store's sessions and their plans, live, to a browser at
    /// http://ADDR/ (read-only; 127.0.0.1:8790 by default).
    Web {
        /// Listen on ADDR (`127.0.0.1:8790`, or a port alone, bound on
        /// 127.0.0.1; port 0 picks one).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8790")]
        http: String,
        /// Require this token on every request (required to bind an
        /// address other than loopback); open a page once with
        /// `?token=TOKEN` and the browser keeps it.
        #[arg(long, value_name = "TOKEN", env = "CORDIS_WEB_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// A name accepted in the `Host` header besides loopback and the
        /// bound address (repeatable; needed when binding 0.0.0.0).
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_hosts: Vec<String>,
        /// A browser origin allowed besides the server's own, as
        /// scheme://host:port (repeatable).
        #[arg(long = "allow-origin", value_name = "ORIGIN")]
        allow_origins: Vec<String>,
    },
    /// Inspect stored sessions.
    Session {
        /// Use the TypeScript harness's session store at DIR
        /// (`<DIR>/--<cwd>--/<id>/session.jsonl[.zstd]`; zstd or plain is
        /// detected) instead of the composition's store.
        #[arg(long, global = true, value_name = "DIR")]
        root: Option<PathBuf>,
        /// What to do.
        #[command(subcommand)]
        command: SessionCommand,
    },
}

/// `cordis session ...`.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// List stored sessions.
    Ls,
    /// Show a session's transcript and plan.
    Show {
        /// A session id, or a path to a session file.
        session: String,
    },
    /// Copy a session log (ours, or one written by the TypeScript harness)
    /// into the state directory as a new session; the source is not touched.
    Import {
        /// The session file to copy.
        path: PathBuf,
        /// The new session's id [default: the log's own id when valid, else a fresh one].
        #[arg(long)]
        id: Option<String>,
    },
    /// Follow a session as it is written (from this or any other host
    /// sharing the store) and print its projections (the plan) again after
    /// each event they fold; stops on Ctrl-C.
    Watch {
        /// A session id.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        session: Option<String>,
        /// Follow every session of the store instead, those started later
        /// too; each block names its session.
        #[arg(long)]
        all: bool,
        /// When the store is lost (a database restart, a connection cut),
        /// keep trying to follow again for this many seconds, then exit
        /// with status 1.
        #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        resume_within: u64,
    },
    /// Compact a session's history now: everything but its newest entry is
    /// summarized by the model and replaced (the composition needs a
    /// `compaction-basic` entry); the plan is carried over.
    Compact {
        /// A session id.
        session: String,
        /// Summarize with this script's `summaries:` instead of the
        /// composition's `model` service.
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
    },
    /// Write a session's log (header and every event, packed chunk rows
    /// expanded) to stdout or a file.
    Export {
        /// A session id, or a path to a session file.
        session: String,
        /// Write here instead of stdout (an existing file is refused).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Overwrite the --output file if it exists (never a stored session).
        #[arg(long)]
        force: bool,
    },
}

/// Runs the command line; returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordis: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .without_time()
        .try_init();
}

/// A command failed: the message and the exit code (2 unusable input or
/// usage, 1 a failed entry under `--strict`).
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub code: u8,
    /// What went wrong.
    pub message: String,
}

impl From<String> for CliError {
    fn from(message: String) -> Self {
        CliError { code: 2, message }
    }
}

fn options(cli: &Cli, composition: &Path, in_memory: bool) -> HostOptions {
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

/// Runs a parsed command line.
///
/// # Errors
/// A [`CliError`] with its exit code.
pub fn run(cli: Cli) -> Result<ExitCode, CliError> {
    for dir in &cli.plugin_dir {
        if !dir.is_dir() {
            eprintln!("warning: --plugin-dir {} is not a folder; it is skipped", dir.display());
        }
    }
    match &cli.command {
        Command::Check { file, json } => {
            let file = file.clone().unwrap_or_else(|| cli.composition.clone());
            let host = match Host::boot(&options(&cli, &file, true)) {
                Ok(host) => host,
                Err(e) => {
                    let message = e.to_string();
                    if *json {
                        println!("{}", serde_json::json!({ "error": message }));
                    }
                    return Err(message.into());
                }
            };
            let mut out = std::io::stdout().lock();
            if *json {
                let text = serde_json::to_string_pretty(&render::check_json(&host)).map_err(|e| e.to_string())?;
                let _ = writeln!(out, "{text}");
            } else {
                render::check(&mut out, &host);
            }
            // Exit 1 when an entry failed or names a plugin nobody
            // provides; a waiting entry may yet start (a provider added
            // later), so it fails the check only under --strict.
            let not = render::NotRunning::of(&host);
            if !*json {
                if let Some(summary) = not.summary(host.reports.len()) {
                    let _ = writeln!(out, "{summary}");
                }
            }
            if not.failed + not.missing > 0 || (cli.strict && not.waiting > 0) {
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugins { json } => {
            let dir = cli.composition.parent().map(Path::to_path_buf).filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| PathBuf::from("."));
            let plugin_path = cordis_engine::loader::PluginPath::standard(&cli.plugin_dir, &dir);
            let libraries = cordis_engine::loader::catalog::catalog(&plugin_path);
            let mut out = std::io::stdout().lock();
            if *json {
                let text = serde_json::to_string_pretty(&serde_json::json!({"libraries": libraries})).map_err(|e| e.to_string())?;
                let _ = writeln!(out, "{text}");
            } else {
                render::plugins(&mut out, &libraries, &plugin_path);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Config { file } => {
            let file = file.clone().unwrap_or_else(|| cli.composition.clone());
            let layers = cordis_composition::composition::layers(&cli.patches, cli.no_user_patch);
            let composition = cordis_engine::loader::Composition::compose(&file, &layers).map_err(|e| e.to_string())?;
            for w in &composition.warnings {
                eprintln!("warning: {}", render::printable(w));
            }
            let text = cordis_composition::render::composed_yaml(&composition);
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
        Command::Tools { json } => {
            let host = boot_for_use(&cli, true)?;
            let schemas = host.services.tools.schemas();
            let mut out = std::io::stdout().lock();
            if *json {
                let text = serde_json::to_string_pretty(&schemas).map_err(|e| e.to_string())?;
                let _ = writeln!(out, "{text}");
            } else {
                render::tools(&mut out, &schemas);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Dev { file, session, memory_budget, settle_ms } => {
            dev(&cli, file.as_deref(), session.as_deref(), *memory_budget, Duration::from_millis(*settle_ms))
        }
        #[cfg(feature = "mcp")]
        Command::Mcp { session, http, token, allow_origins, allow_hosts, watch, settle_ms } => {
            let watch = watch.then(|| Duration::from_millis(*settle_ms));
            mcp(&cli, session.as_deref(), http.as_deref(), token.clone(), (allow_origins.clone(), allow_hosts.clone()), watch)
        }
        Command::Run { script, session, prompt } => run_turn(&cli, script.as_deref(), session.as_deref(), prompt.as_deref()),
        Command::Session { command: SessionCommand::Ls, .. } => {
            let host = boot_for_sessions(&cli)?;
            let (list, skipped) = host.services.sessions.list().map_err(|e| e.to_string())?;
            for s in &skipped {
                eprintln!("warning: {s}");
            }
            let mut out = std::io::stdout().lock();
            let place = host.services.sessions.store().map_or_else(|| host.state_dir.display().to_string(), |s| s.location());
            render::session_list(&mut out, &list, &place);
            Ok(ExitCode::SUCCESS)
        }
        Command::Session { command: SessionCommand::Import { path, id }, .. } => {
            let host = boot_for_sessions(&cli)?;
            if cli.strict {
                let (_, problems) = host.services.sessions.view(&path.display().to_string()).map_err(|e| e.to_string())?;
                refuse_under_strict(&path.display().to_string(), &problems)?;
            }
            let report = host.services.sessions.import(path, id.as_deref()).map_err(|e| match e {
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
                invocation(&cli, &format!("run --session {} --script FILE PROMPT", report.id))
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Session { command: SessionCommand::Export { session, output, force }, .. } => {
            let host = boot_for_sessions(&cli)?;
            if let Some(file) = output {
                if let (Some(store), Ok(target)) = (host.services.sessions.store(), file.canonicalize()) {
                    if store.contains(&target) {
                        return Err(format!("refusing to write {}: it is inside the session store", file.display()).into());
                    }
                }
                if file.exists() && !force {
                    return Err(format!("{} exists; pass --force to overwrite it", file.display()).into());
                }
            }
            let (s, problems) = host.services.sessions.view(session).map_err(|e| e.to_string())?;
            for p in &problems {
                eprintln!("warning: {session}: {p}");
            }
            let mut text = serde_json::to_string(&s.header()).map_err(|e| e.to_string())?;
            text.push('\n');
            s.with_events(|events| events.iter().for_each(|e| text.push_str(&e.to_line())));
            match output {
                Some(file) => std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?,
                None => {
                    let _ = std::io::stdout().lock().write_all(text.as_bytes());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Session { command: SessionCommand::Watch { session, all: _, resume_within }, .. } => {
            let host = boot_for_sessions(&cli)?;
            watch(&host, session.as_deref(), Duration::from_secs(*resume_within))
        }
        Command::Web { http, token, allow_hosts, allow_origins } => {
            let addr = cordis_web::parse_addr(http).map_err(|e| e.to_string())?;
            let options =
                cordis_web::WebOptions { addr, token: token.clone(), allowed_hosts: allow_hosts.clone(), allowed_origins: allow_origins.clone() };
            cordis_web::check(&options).map_err(|e| e.to_string())?;
            let host = boot_for_sessions(&cli)?;
            let place = host.services.sessions.store().map_or_else(|| host.state_dir.display().to_string(), |s| s.location());
            cordis_web::run(&host.services, options, |addr| eprintln!("cordis web: serving the sessions of {place} at http://{addr}/"))
                .map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Session { command: SessionCommand::Compact { session, script }, .. } => {
            let host = boot_for_sessions(&cli)?;
            compact(&host, session, script.as_deref())
        }
        Command::Session { command: SessionCommand::Show { session }, .. } => {
            let host = boot_for_sessions(&cli)?;
            let (s, problems) = host.services.sessions.view(session).map_err(|e| e.to_string())?;
            let mut out = std::io::stdout().lock();
            render::session_show(&mut out, &s, &problems, &|kind| core_type_or_owned(&host.services.events, kind));
            Ok(ExitCode::SUCCESS)
        }
    }
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
    let outcome = compactor.compact_now(&session, model.as_mut(), &host.services.tools.schemas(), &mut printer);
    printer.end_stream();
    drop(printer);
    match outcome {
        Ok(Some(o)) => {
            let _ = writeln!(out, "{}", o.describe());
            Ok(ExitCode::SUCCESS)
        }
        Ok(None) => {
            let _ = writeln!(out, "nothing to compact: the history has one entry, or a tool call and its result that cannot be split");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(format!("session {}: {e}", render::printable(id)).into()),
    }
}

/// Adapts a one-session [`Follower`](cordis_session::store::Follower) to the
/// every-session shape.
struct OneSession {
    id: String,
    follower: Box<dyn cordis_session::store::Follower>,
}

impl cordis_session::StoreFollower for OneSession {
    fn wait(&mut self, timeout: Duration) -> Result<Vec<String>, cordis_session::StoreError> {
        Ok(if self.follower.wait(timeout)? { vec![self.id.clone()] } else { Vec::new() })
    }
}

/// `cordis session watch`: prints the projections of one session (`id`),
/// or of every session (`None`), once, then again after every change that
/// a projection folds, until interrupted. When the store is lost, it
/// follows again (listening before it reads everything after what it
/// showed) for up to `resume_within`, then gives up with exit status 1.
fn watch(host: &Host, id: Option<&str>, resume_within: Duration) -> Result<ExitCode, CliError> {
    let sessions = &host.services.sessions;
    let Some(store) = sessions.store() else { return Err("sessions are kept in memory here; there is nothing to watch".to_string().into()) };
    let follow = || -> Result<Box<dyn cordis_session::StoreFollower>, cordis_session::StoreError> {
        match id {
            Some(id) => Ok(Box::new(OneSession { id: id.to_string(), follower: store.follow(id)? })),
            None => cordis_session::follow_every_session(store.clone()),
        }
    };
    let what = id.map_or_else(|| format!("the sessions of {}", store.location()), |id| format!("session {}", render::printable(id)));
    let mut follower = Some(follow().map_err(|e| e.to_string())?);
    // The last folded seq drawn, per session.
    let mut shown: std::collections::BTreeMap<String, Option<u64>> = Default::default();
    let mut pending: std::collections::BTreeSet<String> = Default::default();
    // Since when the store has been lost, and the last error.
    let mut down: Option<(std::time::Instant, String)> = None;
    let mut out = std::io::stdout().lock();
    loop {
        if let Some((since, error)) = &down {
            if since.elapsed() >= resume_within {
                eprintln!("cordis session watch: cannot follow {what} again after {} s: {error}", resume_within.as_secs());
                return Ok(ExitCode::FAILURE);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if follower.is_none() {
            match follow() {
                Ok(f) => follower = Some(f),
                Err(e) => {
                    down.get_or_insert_with(|| (std::time::Instant::now(), String::new())).1 = e.to_string();
                    continue;
                }
            }
        }
        let Some(f) = follower.as_mut() else { continue };
        match f.wait(Duration::from_secs(1)) {
            Ok(changed) => pending.extend(changed),
            Err(e) => {
                if down.is_none() {
                    eprintln!("warning: {e}; following {what} again");
                }
                down.get_or_insert_with(|| (std::time::Instant::now(), String::new())).1 = e.to_string();
                follower = None;
                continue;
            }
        }
        let mut failed = None;
        for id in pending.clone() {
            match sessions.view(&id) {
                Ok((session, _)) => {
                    pending.remove(&id);
                    if draw(&mut out, host, &id, &session, shown.entry(id.clone()).or_default()).is_err() {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
                // A session removed while followed.
                Err(cordis_session::StoreError::NotFound { .. }) => {
                    pending.remove(&id);
                }
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            }
        }
        match failed {
            // A file between two writes reads as damaged for a moment, and a
            // lost connection fails the read: keep the session pending and
            // read it again, on a new follower if the store was lost.
            Some(e) => {
                down.get_or_insert_with(|| (std::time::Instant::now(), String::new())).1 = e;
            }
            None => {
                if down.take().is_some() {
                    eprintln!("following {what} again");
                }
            }
        }
    }
}

/// Draws session `id`'s projections when the last event they fold is not
/// the one drawn last (`shown`).
///
/// # Errors
/// When stdout is closed.
fn draw(out: &mut impl Write, host: &Host, id: &str, session: &Session, shown: &mut Option<u64>) -> std::io::Result<()> {
    let projections = host.services.projections.all();
    let folded = session.with_events(|events| events.iter().rev().find(|e| projections.iter().any(|p| p.folds(&e.kind))).map(|e| (e.seq, e.time)));
    let key = folded.map_or(u64::MAX, |f| f.0);
    if *shown == Some(key) {
        return Ok(());
    }
    *shown = Some(key);
    let at = folded.map_or_else(|| "no plan yet".to_string(), |(seq, time)| format!("seq {seq}, {}", render::format_time(time)));
    writeln!(out, "── session {} · {} · {at}", render::printable(id), render::count(session.len(), "event", "events"))?;
    for (p, state) in session.states() {
        let view = p.render(&state);
        writeln!(out, "{}:", p.key)?;
        if view.is_empty() {
            writeln!(out, "  (none)")?;
        }
        for line in view.lines() {
            writeln!(out, "  {}", render::printable(line))?;
        }
    }
    out.flush()
}

fn dev(cli: &Cli, file: Option<&Path>, session_id: Option<&str>, memory_budget_mib: u64, settle: Duration) -> Result<ExitCode, CliError> {
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
                    Ok((s, _)) => break s,
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

#[cfg(feature = "mcp")]
/// Parses `--http ADDR`: `HOST:PORT` (a name is resolved, the first
/// address taken), `[V6]:PORT`, or a port alone (on 127.0.0.1).
fn http_addr(text: &str) -> Result<std::net::SocketAddr, CliError> {
    use std::net::ToSocketAddrs;
    if let Ok(port) = text.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.to_socket_addrs()
        .map_err(|e| format!("--http {text}: {e} (expected HOST:PORT, e.g. 127.0.0.1:8765, or a port)"))?
        .next()
        .ok_or_else(|| format!("--http {text}: the name has no address").into())
}

#[cfg(feature = "mcp")]
fn mcp(
    cli: &Cli,
    session_id: Option<&str>,
    http: Option<&str>,
    token: Option<String>,
    allow: (Vec<String>, Vec<String>),
    watch: Option<Duration>,
) -> Result<ExitCode, CliError> {
    let http = match http {
        Some(text) => {
            let (allowed_origins, allowed_hosts) = allow;
            let options = cordis_mcp::http::HttpOptions { addr: http_addr(text)?, token, allowed_origins, allowed_hosts };
            cordis_mcp::http::check(&options).map_err(|e| e.to_string())?;
            Some(options)
        }
        None => None,
    };
    // Over stdio, stdout is the protocol's alone from here on: what the
    // host or a plugin prints goes to stderr.
    let protocol = match http {
        None => Some(cordis_mcp::stdio::isolate_stdout().map_err(|e| format!("cannot set stdout aside for the protocol: {e}"))?),
        Some(_) => None,
    };
    // The server keeps running while plugin code runs: sealed private copies.
    let options = HostOptions { private_copies: true, ..options(cli, &cli.composition, false) };
    let (host, dev) = if let Some(settle) = watch {
        let dev_options = cordis_engine::reload::DevOptions { settle, label: "cordis mcp", ..cordis_engine::reload::DevOptions::default() };
        let dev = cordis_engine::reload::DevHost::boot(options, dev_options).map_err(|e| e.to_string())?;
        judge(cli, &dev.host, Verdict::Serve, true)?;
        let dev = Arc::new(dev);
        (None, Some(dev))
    } else {
        (Some(boot_with(cli, options, Verdict::Serve)?), None)
    };
    let services = match (&host, &dev) {
        (Some(h), _) => &h.services,
        (None, Some(d)) => &d.host.services,
        (None, None) => unreachable!("one of the two is booted"),
    };
    let attach = match session_id {
        Some(id) => {
            let (s, problems) = services.sessions.open(id).map_err(|e| e.to_string())?;
            if cli.strict {
                refuse_under_strict(id, &problems)?;
            }
            for p in &problems {
                eprintln!("warning: session {id}: {p}");
            }
            cordis_mcp::Attach::Fixed { session: s, holder: std::sync::Mutex::new(None) }
        }
        None => cordis_mcp::Attach::New { cwd: std::env::current_dir().ok().map(|p| p.display().to_string()) },
    };
    let shared = cordis_mcp::Shared::new(services, attach);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("cordis-mcp")
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let result = runtime.block_on(async {
        if let Some(dev) = &dev {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
            dev.on_reload(move || {
                let _ = tx.send(());
            });
            cordis_engine::reload::watch(dev.clone()).map_err(cordis_mcp::McpError::Transport)?;
            let watcher_shared = shared.clone();
            tokio::spawn(async move {
                while rx.recv().await.is_some() {
                    watcher_shared.check_catalog().await;
                }
            });
            eprintln!("cordis mcp: watching {} and {}", dev.composition_path().display(), libraries(dev));
        }
        match http {
            Some(options) => {
                let stop = tokio_util::sync::CancellationToken::new();
                let on_signal = stop.clone();
                tokio::spawn(async move {
                    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
                    }
                    on_signal.cancel();
                });
                cordis_mcp::http::serve(shared.clone(), options, stop, |addr| {
                    eprintln!("cordis mcp: serving MCP (Streamable HTTP) at http://{addr}{}", cordis_mcp::http::ENDPOINT);
                })
                .await
            }
            None => match protocol {
                Some(protocol) => cordis_mcp::serve_stdio(shared.clone(), protocol).await,
                None => Err(cordis_mcp::McpError::Transport("no protocol descriptor".into())),
            },
        }
    });
    shared.close_all();
    // Blocking reads of the watcher or of stdin must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result.map_err(|e| CliError::from(e.to_string()))?;
    Ok(ExitCode::SUCCESS)
}

/// How to run `cordis` again the way it was run: the program as invoked and
/// every global option that changes what the next command sees (`-c`,
/// `--state-dir`, each `--plugin-dir` and `--patch`, `--no-user-patch`,
/// `--durability`, `--allow-writable-plugins`, `--strict`), each word quoted
/// for a POSIX shell when it needs it, followed by `rest`.
fn invocation(cli: &Cli, rest: &str) -> String {
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
fn refuse_under_strict(what: &str, problems: &[LineProblem]) -> Result<(), CliError> {
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
fn boot_for_sessions(cli: &Cli) -> Result<Host, CliError> {
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
fn boot_for_use(cli: &Cli, in_memory: bool) -> Result<Host, CliError> {
    boot_with(cli, options(cli, &cli.composition, in_memory), Verdict::Inspect)
}

/// What a command does with entries that did not load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// An inspection (`tools`, `session`): warnings, unless `--strict`.
    Inspect,
    /// A command that serves the composition (`run`, `dev`, `mcp`): a
    /// failed entry refuses the start (exit 1), as it refuses the
    /// reference's boot; missing and waiting entries are warnings with a
    /// summary line, unless `--strict`.
    Serve,
}

/// Boots with `options`; entries that did not load as `verdict` says.
fn boot_with(cli: &Cli, options: HostOptions, verdict: Verdict) -> Result<Host, CliError> {
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
fn judge(cli: &Cli, host: &Host, verdict: Verdict, details: bool) -> Result<(), CliError> {
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
    let why = if cli.strict { "--strict refuses any entry that did not load" } else { "a failed entry refuses the start" };
    Err(CliError { code: 1, message: format!("{summary} ({}); {why}; run `{}` for details", failed.join(", "), invocation(cli, "check")) })
}

fn run_turn(cli: &Cli, script: Option<&Path>, session_id: Option<&str>, prompt: Option<&str>) -> Result<ExitCode, CliError> {
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

/// Prints a turn as it happens.
struct Printer<'a, W: Write> {
    out: &'a mut W,
    host: &'a Host,
    /// Projection views to print after the tool result: (key, view).
    pending_views: Vec<(String, String)>,
    /// The label of the streamed block being printed (`assistant`,
    /// `reasoning`), while its line is open.
    streaming: Option<&'static str>,
    /// Whether the current step's answer was streamed (its text is on the
    /// terminal already).
    streamed: bool,
}

impl<'a, W: Write> Printer<'a, W> {
    fn new(out: &'a mut W, host: &'a Host) -> Printer<'a, W> {
        Printer { out, host, pending_views: Vec::new(), streaming: None, streamed: false }
    }

    /// Ends the line of a streamed block, if one is open.
    fn end_stream(&mut self) {
        if self.streaming.take().is_some() {
            let _ = writeln!(self.out);
        }
    }

    fn stream(&mut self, label: &'static str, text: &str) {
        if self.streaming != Some(label) {
            self.end_stream();
            render::stream_start(self.out, label);
            self.streaming = Some(label);
        }
        self.streamed = true;
        render::stream_text(self.out, text);
        let _ = self.out.flush();
    }
}

impl<W: Write> TurnObserver for Printer<'_, W> {
    fn on_event(&mut self, session: &Session, event: &Event) {
        match event.kind.as_str() {
            "assistant/chunk" => {
                let data = event.data_value();
                let chunk = &data["chunk"];
                let text = chunk["text"].as_str().unwrap_or_default();
                match chunk["type"].as_str() {
                    Some("text-delta") => self.stream("assistant", text),
                    Some("reasoning-delta") => self.stream("reasoning", text),
                    _ => {}
                }
            }
            "step/start" => self.streamed = false,
            "assistant/message" if self.streamed => {
                // The text is on the terminal already: only the calls.
                self.end_stream();
                if let Some(cordis_session::Message::Assistant { tool_calls, .. }) = event_message(event) {
                    render::tool_calls(self.out, &tool_calls);
                }
            }
            "user/message" | "assistant/message" => {
                self.end_stream();
                if let Some(m) = event_message(event) {
                    render::message(self.out, &m);
                }
            }
            "tool/call" | "tool/result" | "turn/start" | "turn/end" | "step/end" => self.end_stream(),
            kind => {
                self.end_stream();
                // A plugin's surface event (a reminder): the model reads it.
                if event.surface_op.is_some() {
                    if let Some(m) = event_message(event) {
                        render::message(self.out, &m);
                    }
                }
                // A plugin event: show every projection it changes.
                for (p, state) in session.states() {
                    if p.folds(kind) {
                        let view = p.render(&state);
                        if !view.is_empty() {
                            self.pending_views.push((p.key.clone(), view));
                        }
                    }
                }
            }
        }
    }

    fn on_notice(&mut self, text: &str) {
        self.end_stream();
        let _ = self.out.flush();
        eprintln!("model     › {}", render::printable(text));
    }

    fn on_tool_result(&mut self, call: &ToolCallRequest, result: &ToolResult) {
        let title = self
            .host
            .services
            .tools
            .get(&call.name)
            .and_then(|t| t.present_call(&call.arguments).get("title").and_then(|v| v.as_str()).map(str::to_string))
            .unwrap_or_else(|| call.name.clone());
        render::tool_result(self.out, &title, result);
        for (key, view) in std::mem::take(&mut self.pending_views) {
            render::view(self.out, &key, &view);
        }
    }
}

/// `1 plugin library`, `N plugin libraries`.
/// `1 plugin library`, `3 plugin libraries`, and `; 2 entries not running`
/// when enabled entries are not running (`status` lists them and why).
fn libraries(dev: &cordis_engine::reload::DevHost) -> String {
    let n = dev.library_sources().len();
    let loaded = if n == 1 { "1 plugin library".to_string() } else { format!("{n} plugin libraries") };
    match dev.status()["notRunning"].as_array().map_or(0, Vec::len) {
        0 => loaded,
        1 => format!("{loaded}; 1 entry not running (`status` says why)"),
        m => format!("{loaded}; {m} entries not running (`status` says why)"),
    }
}
