//! Our side of the `mcp-client` throughput figure (`bench/mcp_client.sh`):
//! N sequential calls of an MCP server's tool through the `mcp-client`
//! plugin, the way the agent loop calls any tool (the tool registry, its
//! argument check, the ABI, the plugin, rmcp's client, stdio), with no
//! session log around them. The baseline is the same server called by the
//! official Python SDK's client (`tests/mcp/client.py bench-tool`).
//!
//!     mcp-client-calls N STATE_DIR TOOL ARGUMENTS COMMAND [ARG...]
//!
//! The server is started as `COMMAND ARG...` over stdio (entry id and
//! serverName `peer`, so TOOL is `mcp__peer__<name>`). Prints one JSON
//! line: `{"calls", "seconds", "calls_per_s", "errors"}`.

use std::time::{Duration, Instant};

use cordis_bench::inproc;
use cordis_engine::tools::ToolCall;
use cordis_session::Durability;
use serde_json::json;

fn main() {
    if let Err(e) = run() {
        eprintln!("mcp-client-calls: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [n, dir, tool, arguments, command, server_args @ ..] = args.as_slice() else {
        return Err("usage: mcp-client-calls N STATE_DIR TOOL ARGUMENTS COMMAND [ARG...]".into());
    };
    let n: usize = n.parse().map_err(|e| format!("N: {e}"))?;
    let dir = std::path::Path::new(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let library = cordis_bench::paths::library("mcp-client")?;
    let quoted: Vec<String> = server_args.iter().map(|a| serde_json::to_string(a).unwrap_or_default()).collect();
    let composition = format!(
        "- id: peer\n  name: {}\n  config:\n    serverName: peer\n    transport: stdio\n    command: {}\n    args: [{}]\n",
        library.display(),
        serde_json::to_string(command).map_err(|e| e.to_string())?,
        quoted.join(", ")
    );
    let host = inproc::boot(dir, &composition, true, Durability::None)?;
    let tools = host.services.tools.clone();
    // The server's tools arrive once it has answered tools/list.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !tools.schemas().iter().any(|s| s.name == *tool) {
        if Instant::now() > deadline {
            let known: Vec<String> = tools.schemas().into_iter().map(|s| s.name).collect();
            return Err(format!("no tool {tool} after 60 s (tools: {})", known.join(", ")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let call = ToolCall { id: "bench", name: tool, arguments };
    // One call first, as the Python client makes one.
    let first = tools.execute(&call, None);
    if first.is_error {
        return Err(format!("the first call failed: {}", first.text));
    }
    let start = Instant::now();
    let mut errors = 0;
    for _ in 0..n {
        errors += usize::from(tools.execute(&call, None).is_error);
    }
    let seconds = start.elapsed().as_secs_f64();
    println!("{}", json!({"calls": n, "seconds": seconds, "calls_per_s": n as f64 / seconds, "errors": errors}));
    Ok(())
}
