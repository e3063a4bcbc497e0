//! MCP servers an editor passes with `session/new` or `session/load`:
//! each becomes an `mcp-client` entry of that session alone.
//!
//! The entries are loaded by a loader of the session's own, over a tool
//! registry layered on the host's ([`ToolRegistry::over`]): the session's
//! model sees the composition's tools and its servers' tools
//! (`mcp__<name>__<tool>`), other sessions see none of them. The servers
//! stop when the session is closed or the connection ends.
//!
//! | ACP server | `mcp-client` config |
//! | --- | --- |
//! | stdio `{name, command, args, env}` | `transport: stdio`, `command`, `args`, `env`, `cwd` = the session's folder |
//! | `{type: "http", name, url, headers}` | `transport: streamable-http`, `url`, `headers` |
//! | `{type: "sse", ...}` | reported as not started (the agent does not advertise SSE) |

use std::sync::Arc;
use std::time::{Duration, Instant};

use cordis_composition::Composition;
use cordis_engine::context::Services;
use cordis_engine::loader::{EntryState, Loader};
use cordis_engine::runtime::Host;
use cordis_engine::tools::ToolRegistry;
use serde_json::{json, Map, Value};

use crate::rpc::RpcError;

/// How long a session's servers get to connect before `session/new` is
/// answered; a server still connecting then is reported as such.
pub const CONNECT_WAIT: Duration = Duration::from_secs(10);

/// One session's MCP servers: their entries and the tools they add.
pub(crate) struct SessionTools {
    loader: Loader,
    ids: Vec<String>,
    /// The host's tools and the servers'.
    pub(crate) tools: Arc<ToolRegistry>,
}

impl Drop for SessionTools {
    fn drop(&mut self) {
        for id in &self.ids {
            self.loader.dispose(id);
        }
    }
}

/// What became of one server: its name, and its status or why it failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerReport {
    pub(crate) name: String,
    pub(crate) ok: bool,
    pub(crate) status: String,
}

impl ServerReport {
    pub(crate) fn to_value(&self) -> Value {
        json!({"name": self.name, "connected": self.ok, "status": self.status})
    }
}

/// The `mcp-client` entry for one ACP server description.
///
/// # Errors
/// `-32602` for a description that cannot be used, naming the server.
fn entry_for(server: &Value, index: usize, cwd: &str) -> Result<(String, Value), RpcError> {
    let name =
        server["name"].as_str().filter(|n| !n.is_empty()).ok_or_else(|| RpcError::params(format!("mcpServers[{index}]: `name` is required")))?;
    // The namespace of its tools: what mcp-client's serverName accepts.
    let mut server_name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).take(32).collect();
    if server_name.is_empty() {
        server_name = format!("server{index}");
    }
    let pairs = |key: &str| -> Map<String, Value> {
        server[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["name"].as_str()?.to_string(), Value::String(p["value"].as_str()?.to_string()))))
            .collect()
    };
    let config = match server["type"].as_str() {
        None | Some("stdio") => {
            let command = server["command"]
                .as_str()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| RpcError::params(format!("MCP server {name}: a stdio server needs `command`")))?;
            let args: Vec<Value> = match &server["args"] {
                Value::Null => Vec::new(),
                Value::Array(a) if a.iter().all(Value::is_string) => a.clone(),
                _ => return Err(RpcError::params(format!("MCP server {name}: `args` must be a list of strings"))),
            };
            if !(server["env"].is_null() || server["env"].is_array()) {
                return Err(RpcError::params(format!("MCP server {name}: `env` must be a list of {{name, value}}")));
            }
            json!({"transport": "stdio", "serverName": server_name, "command": command, "args": args, "env": pairs("env"), "cwd": cwd})
        }
        Some("http") => {
            let url = server["url"].as_str().ok_or_else(|| RpcError::params(format!("MCP server {name}: an HTTP server needs `url`")))?;
            if !(server["headers"].is_null() || server["headers"].is_array()) {
                return Err(RpcError::params(format!("MCP server {name}: `headers` must be a list of {{name, value}}")));
            }
            json!({"transport": "streamable-http", "serverName": server_name, "url": url, "headers": pairs("headers")})
        }
        Some(other) => {
            return Err(RpcError::params(format!("MCP server {name}: transport `{other}` is not supported (stdio and http are)")));
        }
    };
    Ok((name.to_string(), json!({"id": format!("acp-mcp-{index}-{server_name}"), "name": "mcp-client", "config": config})))
}

/// Starts the servers `servers` (ACP's `mcpServers`) for a session in
/// `cwd`; `None` when there are none. Each server that does not connect
/// within [`CONNECT_WAIT`] is reported, the others serve.
///
/// # Errors
/// `-32602` when `mcpServers` is not a list; `-32603` when the entries
/// cannot be composed. A description that cannot be used is reported,
/// not an error.
pub(crate) fn start(host: &Host, servers: &Value, cwd: &str) -> Result<Option<(SessionTools, Vec<ServerReport>)>, RpcError> {
    let list = match servers {
        Value::Null => return Ok(None),
        Value::Array(list) if list.is_empty() => return Ok(None),
        Value::Array(list) => list,
        _ => return Err(RpcError::params("`mcpServers` must be an array")),
    };
    // A description that cannot be used (an SSE server, no command) is
    // reported like a server that does not start; the others go on.
    let mut names = Vec::new();
    let mut entries = Vec::new();
    let mut refused = Vec::new();
    for (i, server) in list.iter().enumerate() {
        match entry_for(server, i, cwd) {
            Ok((name, entry)) => {
                names.push(name);
                entries.push(entry);
            }
            Err(e) => {
                let name = server["name"].as_str().unwrap_or("(unnamed)").to_string();
                refused.push(ServerReport { name, ok: false, status: e.message });
            }
        }
    }
    // JSON is YAML: the entries are composed like any composition's.
    let text = Value::Array(entries).to_string();
    let composition = Composition::parse("acp-session-servers.yml", host.composition.dir.clone(), text)
        .map_err(|e| RpcError::internal(format!("the session's MCP servers cannot be composed: {e}")))?;
    let tools = Arc::new(ToolRegistry::over(host.services.tools.clone()));
    let services = Arc::new(Services { tools: tools.clone(), ..Services::new(None, cordis_session::Durability::default()) });
    let loader = Loader::new(services, host.loader.plugin_path().clone());
    let loaded = loader.load(&composition);
    let ids: Vec<String> = loaded.iter().map(|r| r.id.clone()).collect();
    let deadline = Instant::now() + CONNECT_WAIT;
    let mut reports = Vec::new();
    for (report, name) in loaded.iter().zip(names) {
        let status = match &report.state {
            EntryState::Loaded => loop {
                match tools.source_status(&report.id) {
                    Some(s) if s.level == "info" && s.text.contains("connected,") => break Ok(s.text),
                    Some(s) if s.level != "info" => break Err(s.text),
                    _ if Instant::now() >= deadline => break Err(format!("{name}: still connecting after {} s", CONNECT_WAIT.as_secs())),
                    _ => std::thread::sleep(Duration::from_millis(10)),
                }
            },
            other => Err(other.messages().join("; ")),
        };
        reports.push(match status {
            Ok(text) => ServerReport { name, ok: true, status: text },
            Err(text) => ServerReport { name, ok: false, status: text },
        });
    }
    reports.extend(refused);
    Ok(Some((SessionTools { loader, ids, tools }, reports)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_become_mcp_client_entries() {
        let (name, entry) =
            entry_for(&json!({"name": "my files", "command": "npx", "args": ["-y", "fs"], "env": [{"name": "ROOT", "value": "/w"}]}), 0, "/w")
                .unwrap();
        assert_eq!(name, "my files");
        assert_eq!(entry["id"], "acp-mcp-0-my-files");
        assert_eq!(
            entry["config"],
            json!({"transport": "stdio", "serverName": "my-files", "command": "npx", "args": ["-y", "fs"], "env": {"ROOT": "/w"}, "cwd": "/w"})
        );
        let (_, http) =
            entry_for(&json!({"type": "http", "name": "api", "url": "http://127.0.0.1:9/mcp", "headers": [{"name": "X-A", "value": "1"}]}), 1, "/w")
                .unwrap();
        assert_eq!(http["config"]["transport"], "streamable-http");
        assert_eq!(http["config"]["headers"], json!({"X-A": "1"}));
        assert!(entry_for(&json!({"type": "sse", "name": "old", "url": "http://x", "headers": []}), 2, "/w").unwrap_err().message.contains("sse"));
        assert!(entry_for(&json!({"name": "x"}), 3, "/w").is_err());
        assert!(entry_for(&json!({"name": "x", "command": "py", "args": "server.py"}), 4, "/w").unwrap_err().message.contains("list of strings"));
        assert!(entry_for(&json!({"name": "x", "command": "py", "env": {"A": "1"}}), 5, "/w").is_err());
    }
}
