//! The `cordis` command line.
//!
//! ```text
//! cordis [OPTIONS] check [FILE] [--json] [--sessions]
//!                                       validate a composition, list entries
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
//! cordis [OPTIONS] web [--http ADDR] [--token T] [--allow-host H]... [--allow-origin O]... [--heartbeat SECS]
//! ```
//!
//! Exit codes: 0 success; 1 a failed entry (`check`, or any command under
//! `--strict`) or a failed turn; 2 bad usage or an unusable composition,
//! script or session.

mod boot;
pub mod commands;
mod printer;
mod render;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use cordis_session::Durability;

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
        /// Also read every session of the composition's store and report
        /// those holding a compaction cut short (`compaction/start` with no
        /// `compaction/end`): id, seq and how the next writer closes it.
        /// Reads each log whole; a store that cannot be read is reported,
        /// never an error. Under `--json`, adds a `sessions` object.
        #[arg(long)]
        sessions: bool,
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
        /// Also show the current value of `!!js` expressions that read
        /// `process.env` (hidden by default: secrets come from there).
        #[arg(long)]
        show_values: bool,
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
    /// Serve the agent to an editor over the Agent Client Protocol (ACP
    /// v1 on stdio): sessions in the composition's store, the plan sent as
    /// it changes. Configured by a `cordis:acp` entry, if any.
    Acp {
        /// Answer with this scripted model instead of the composition's
        /// `model` service (one script per session, its steps in order
        /// across the session's prompts).
        #[arg(long, value_name = "FILE")]
        script: Option<PathBuf>,
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
        /// Seconds between the heartbeats of a live stream (a page that
        /// hears none for two intervals says it is stale and reconnects).
        #[arg(long, value_name = "SECS", default_value_t = 15.0)]
        heartbeat: f64,
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
    /// `compaction-basic` entry); a standing plan is carried over when its
    /// plugin offers the `compaction-context` extension.
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

/// Runs a parsed command line: checks the global flags, then hands the
/// command to its module under [`commands`].
///
/// # Errors
/// A [`CliError`] with its exit code.
pub fn run(cli: Cli) -> Result<ExitCode, CliError> {
    for dir in &cli.plugin_dir {
        if !dir.is_dir() {
            eprintln!("warning: --plugin-dir {} is not a folder; it is skipped", dir.display());
        }
    }
    let composition = |file: &Option<PathBuf>| file.clone().unwrap_or_else(|| cli.composition.clone());
    match &cli.command {
        Command::Check { file, json, sessions } => commands::check::run(&cli, &composition(file), *json, *sessions),
        Command::Plugins { json } => commands::plugins::run(&cli, *json),
        Command::Config { file, show_values } => commands::config::run(&cli, &composition(file), *show_values),
        Command::Tools { json } => commands::tools::run(&cli, *json),
        Command::Dev { file, session, memory_budget, settle_ms } => {
            commands::dev::run(&cli, file.as_deref(), session.as_deref(), *memory_budget, Duration::from_millis(*settle_ms))
        }
        #[cfg(feature = "mcp")]
        Command::Mcp { session, http, token, allow_origins, allow_hosts, watch, settle_ms } => {
            let watch = watch.then(|| Duration::from_millis(*settle_ms));
            commands::mcp::run(&cli, session.as_deref(), http.as_deref(), token.clone(), (allow_origins.clone(), allow_hosts.clone()), watch)
        }
        Command::Acp { script } => commands::acp::run(&cli, script.as_deref()),
        Command::Run { script, session, prompt } => commands::run::run(&cli, script.as_deref(), session.as_deref(), prompt.as_deref()),
        Command::Web { http, token, allow_hosts, allow_origins, heartbeat } => {
            commands::web::run(&cli, commands::web::WebArgs { http, token: token.as_ref(), allow_hosts, allow_origins, heartbeat: *heartbeat })
        }
        Command::Session { command, .. } => match command {
            SessionCommand::Ls => commands::session::ls::run(&cli),
            SessionCommand::Show { session } => commands::session::show::run(&cli, session),
            SessionCommand::Import { path, id } => commands::session::import::run(&cli, path, id.as_deref()),
            SessionCommand::Export { session, output, force } => commands::session::export::run(&cli, session, output.as_deref(), *force),
            SessionCommand::Watch { session, all: _, resume_within } => {
                commands::session::watch::run(&cli, session.as_deref(), Duration::from_secs(*resume_within))
            }
            SessionCommand::Compact { session, script } => commands::session::compact::run(&cli, session, script.as_deref()),
        },
    }
}
