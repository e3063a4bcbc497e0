//! `mcp-client`: the tools of a Model Context Protocol server as tools of
//! the composition. One entry connects to one server, over stdio (a child
//! process it starts) or Streamable HTTP, with the protocol's official Rust
//! SDK (`rmcp`), and registers each of the server's tools under the name
//! the TypeScript harness gives it (`mcp__<serverName>__<tool>`, see
//! [`names`]). It answers to the harness's package name
//! `@deepseek-ai/dsh-mcp-client` and takes that package's config (see
//! [`Config`]).
//!
//! The set of tools follows the server (`notifications/tools/list_changed`,
//! reconnections) through the host's `tools.dynamic` capability, so the
//! plugin requires a cordis-abi 1.3 host. A server that exits is started
//! again with backoff ([`Reconnect`]); the calls it was answering and the
//! ones made while it is down are errors that say so. A call that takes
//! longer than `toolCallTimeoutMs` is cancelled on the server
//! (`notifications/cancelled`) and answered as timed out. Results are
//! mapped by [`content`]; the host checks a structured value against the
//! tool's declared output schema. The server never writes to a session
//! log: what it sends reaches the model only as a tool's result.
//!
//! A stdio server runs under a supervising process that ends its process
//! group when the entry is disposed or the host ends, however it ends
//! ([`process`]); its stdout is read by a line transport that tells every
//! message it drops ([`line`](mod@line)); its stderr is read, labelled and bounded
//! ([`stderr`]). Over Streamable HTTP a lost session is noticed
//! ([`session`]). `headers` and `env` are marked `writeOnly` in the config
//! schema, so the host hides their values where it shows a config.
//!
//! Modules: [`names`] (public tool names), [`content`] (results to text and
//! value), and with the default `client` feature `client` (the connection,
//! its supervisor task and the tool source), [`process`], [`line`](mod@line),
//! [`stderr`], [`session`] and [`discards`].

pub mod content;
pub mod names;

#[cfg(feature = "client")]
mod client;
#[cfg(feature = "client")]
pub mod discards;
#[cfg(feature = "client")]
pub mod line;
#[cfg(feature = "client")]
pub mod process;
#[cfg(feature = "client")]
pub mod session;
#[cfg(feature = "client")]
pub mod stderr;

use std::collections::BTreeMap;

use cordis_abi::prelude::*;

/// The plugin's name.
pub const PLUGIN_NAME: &str = "mcp-client";

/// The harness's package name this plugin answers to.
pub const PACKAGE: &str = "@deepseek-ai/dsh-mcp-client";

/// The default `toolCallTimeoutMs`: one minute.
pub const DEFAULT_TOOL_CALL_TIMEOUT_MS: u64 = 60_000;

/// The default `maxMessageBytes`: 16 MiB, the limit of rmcp's own stdio
/// transport and of its Streamable HTTP client's events.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 16 * 1024 * 1024;

/// The variables of cordis's environment a stdio server inherits by
/// default, as the official MCP SDKs pass them: the user, the shell, the
/// terminal, the locale and where temporary files go. Nothing else reaches
/// a server unless the entry's `env` or `inheritEnv` names it.
pub const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"];

/// The longest delay the harness's timers accept (2^31 - 1 ms), the upper
/// bound of every duration in the config.
pub const MAX_DELAY_MS: u64 = 2_147_483_647;

/// How the server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Transport {
    /// A child process started with `command`, speaking on its stdin and
    /// stdout.
    #[serde(rename = "stdio")]
    Stdio,
    /// Streamable HTTP at `url`.
    #[serde(rename = "streamable-http")]
    StreamableHttp,
}

/// The config of an `mcp-client` entry: the published package's keys and
/// defaults. `command`, `args`, `env` and `cwd` are for `stdio`; `url` and
/// `headers` for `streamable-http`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// `stdio` (start `command` and speak over its stdin and stdout) or `streamable-http` (connect to `url`).
    pub transport: Transport,
    /// The namespace of this server's tools: each is registered as `mcp__<serverName>__<tool>`. 1 to 32 letters, digits, `_` or `-`, unique among the composition's mcp-client entries.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{1,32}$"))]
    pub server_name: String,
    /// stdio: the program to start (found on PATH when it has no `/`).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub command: Option<String>,
    /// stdio: its arguments, passed as they are (no shell).
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: variables set for the server. It inherits only HOME, LOGNAME, PATH, SHELL, TERM, USER, LANG, LC_ALL, LC_CTYPE, TMPDIR and TZ from cordis's environment, plus the names in `inheritEnv`. Take secrets from the environment with `!!js process.env.NAME`, never write them here; an expression that is undefined (the variable is not set) fails the entry.
    #[serde(default)]
    #[schemars(extend("writeOnly" = true, "x-cordis-defined" = true))]
    pub env: BTreeMap<String, String>,
    /// stdio: names of cordis's environment variables passed on to the server as they are; one that is not set is an error when the entry starts.
    #[serde(default)]
    pub inherit_env: Vec<String>,
    /// stdio: the folder to start it in, relative to where cordis runs; empty for that folder.
    #[serde(default)]
    pub cwd: String,
    /// streamable-http: the server's endpoint, an http:// or https:// URL.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub url: Option<String>,
    /// streamable-http: headers sent with every request (`Authorization: !!js '`Bearer ${process.env.TOKEN}`'`). Their values are never shown; an expression that is undefined fails the entry.
    #[serde(default)]
    #[schemars(extend("writeOnly" = true, "x-cordis-defined" = true))]
    pub headers: BTreeMap<String, String>,
    /// How long one tool call may take, in milliseconds (default 60000); then it is cancelled on the server and answered as timed out.
    #[serde(default = "default_timeout")]
    #[schemars(range(min = 1, max = 2_147_483_647))]
    pub tool_call_timeout_ms: u64,
    /// stdio: the largest message (one line) the server may send, in bytes (default 16777216). A longer line is dropped, logged, and the request it answered fails at once naming this limit.
    #[serde(default = "default_max_message")]
    #[schemars(range(min = 1))]
    pub max_message_bytes: u64,
    /// Fail the entry when the first connection or tool listing fails (default false: the entry loads with no tools and keeps trying).
    #[serde(default)]
    pub fail_on_startup_error: bool,
    /// Reconnecting after the connection is lost or an attempt fails.
    #[serde(default)]
    pub reconnect: Reconnect,
}

fn default_timeout() -> u64 {
    DEFAULT_TOOL_CALL_TIMEOUT_MS
}

fn default_max_message() -> u64 {
    DEFAULT_MAX_MESSAGE_BYTES
}

/// The reconnect policy: delays double from `initialDelayMs` up to
/// `maxDelayMs`; after `maxAttempts` failed attempts in a row the server's
/// tools are withdrawn until the entry is reloaded. A connection that stays
/// up for `maxDelayMs` starts a fresh budget.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reconnect {
    /// Reconnect after a lost connection (default true). When false, the tools stay registered and fail until the entry is reloaded.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The first delay, in milliseconds (default 500).
    #[serde(default = "initial_delay")]
    #[schemars(range(min = 1, max = 2_147_483_647))]
    pub initial_delay_ms: u64,
    /// The longest delay, in milliseconds (default 30000); also how long a connection must last to reset the attempt count.
    #[serde(default = "max_delay")]
    #[schemars(range(min = 1, max = 2_147_483_647))]
    pub max_delay_ms: u64,
    /// Failed attempts in a row before giving up (default 10).
    #[serde(default = "max_attempts")]
    #[schemars(range(min = 1))]
    pub max_attempts: u32,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect { enabled: true, initial_delay_ms: initial_delay(), max_delay_ms: max_delay(), max_attempts: max_attempts() }
    }
}

fn yes() -> bool {
    true
}
fn initial_delay() -> u64 {
    500
}
fn max_delay() -> u64 {
    30_000
}
fn max_attempts() -> u32 {
    10
}

impl Config {
    /// The checks the schema cannot express: the keys of the other
    /// transport, a missing `command` or `url`, delays out of order.
    ///
    /// # Errors
    /// A message naming the key and what was expected.
    pub fn check(&self) -> Result<(), String> {
        let name = &self.server_name;
        let misplaced = |keys: &[(&str, bool)], transport: &str| -> Result<(), String> {
            match keys.iter().find(|(_, set)| *set) {
                Some((key, _)) => {
                    Err(format!("mcp-client({name}): `{key}` is for transport {transport}, and this entry's transport is {}", self.transport_name()))
                }
                None => Ok(()),
            }
        };
        match self.transport {
            Transport::Stdio => {
                if self.command.is_none() {
                    return Err(format!("mcp-client({name}): transport stdio needs `command`, the program that runs the server"));
                }
                misplaced(&[("url", self.url.is_some()), ("headers", !self.headers.is_empty())], "streamable-http")?;
                if let Some(var) = self.inherit_env.iter().find(|n| n.is_empty() || n.contains('=') || n.contains('\0')) {
                    return Err(format!("mcp-client({name}): `inheritEnv` holds {var:?}, which is not a variable name"));
                }
            }
            Transport::StreamableHttp => {
                let Some(url) = &self.url else {
                    return Err(format!("mcp-client({name}): transport streamable-http needs `url`, the server's endpoint"));
                };
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("mcp-client({name}): `url` must be an http:// or https:// URL, found {url:?}"));
                }
                misplaced(
                    &[
                        ("command", self.command.is_some()),
                        ("args", !self.args.is_empty()),
                        ("env", !self.env.is_empty()),
                        ("cwd", !self.cwd.is_empty()),
                        ("inheritEnv", !self.inherit_env.is_empty()),
                    ],
                    "stdio",
                )?;
            }
        }
        if self.reconnect.initial_delay_ms > self.reconnect.max_delay_ms {
            return Err(format!(
                "mcp-client({name}): reconnect.initialDelayMs ({}) must be at most reconnect.maxDelayMs ({})",
                self.reconnect.initial_delay_ms, self.reconnect.max_delay_ms
            ));
        }
        Ok(())
    }

    /// The environment of a stdio server: the [`INHERITED_ENV`] variables
    /// that are set, the `inheritEnv` ones, then `env`.
    ///
    /// # Errors
    /// When a name in `inheritEnv` is not set (or not UTF-8), naming the
    /// server and the variable.
    pub fn server_env(&self) -> Result<Vec<(String, String)>, String> {
        let mut vars: Vec<(String, String)> =
            INHERITED_ENV.iter().filter_map(|name| std::env::var(name).ok().map(|value| ((*name).to_string(), value))).collect();
        for name in &self.inherit_env {
            match std::env::var(name) {
                Ok(value) => vars.push((name.clone(), value)),
                Err(_) => {
                    return Err(format!("mcp-client({}): `inheritEnv` names {name}, which is not set in cordis's environment", self.server_name))
                }
            }
        }
        vars.extend(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(vars)
    }

    fn transport_name(&self) -> &'static str {
        match self.transport {
            Transport::Stdio => "stdio",
            Transport::StreamableHttp => "streamable-http",
        }
    }
}

/// The `mcp-client` plugin.
pub struct McpClient;

impl Plugin for McpClient {
    const NAME: &'static str = PLUGIN_NAME;
    const INJECT: &'static [&'static str] = &["tools"];
    const PACKAGES: &'static [&'static str] = &[PACKAGE];
    const REQUIRES: &'static [Capability] = &[cordis_abi::capabilities::TOOLS_DYNAMIC];
    type Config = Config;

    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        config.check().map_err(PluginError::new)?;
        if config.transport == Transport::Stdio {
            // A variable it names that is not set fails the entry now.
            config.server_env().map_err(PluginError::new)?;
        }
        start(ctx, config)
    }
}

#[cfg(feature = "client")]
fn start(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
    client::start(ctx, config)
}

#[cfg(not(feature = "client"))]
fn start(_ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
    Err(PluginError::new(format!(
        "mcp-client({}): this build of the plugin has no MCP client (built without its `client` feature); build it with default features",
        config.server_name
    )))
}

cordis_abi::export_plugin!(McpClient);
cordis_abi::export_library!();
