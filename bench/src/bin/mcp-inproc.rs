//! The in-process baseline of the MCP throughput figure (`bench/mcp.sh`):
//! N sequential `todo_write` calls through the MCP server's own call path
//! (`cordis_mcp::Connection::call`: the turn's step, the call recorded
//! as the agent loop records it, the tool registry, the ABI, the plugin, the
//! durable append), with no protocol, transport or client around it.
//!
//!     mcp-inproc N STATE_DIR event|turn|none
//!
//! Prints one JSON line: `{"calls", "seconds", "calls_per_s", "errors"}`.

use std::time::Instant;

use cordis_bench::inproc;
use cordis_mcp::{Attach, ClientName, Connection, Shared};
use cordis_session::Durability;
use serde_json::json;

fn main() {
    if let Err(e) = run() {
        eprintln!("mcp-inproc: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [n, dir, durability] = args.as_slice() else { return Err("usage: mcp-inproc N STATE_DIR event|turn|none".into()) };
    let n: usize = n.parse().map_err(|e| format!("N: {e}"))?;
    let durability = match durability.as_str() {
        "event" => Durability::Event,
        "turn" => Durability::Turn,
        "none" => Durability::None,
        other => return Err(format!("unknown durability {other}")),
    };
    let dir = std::path::Path::new(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let library = cordis_bench::paths::library("tool-todo")?;
    let composition = format!("- id: todo\n  name: {}\n  config:\n    allowParallelInProgress: false\n", library.display());
    let host = inproc::boot(dir, &composition, false, durability)?;
    let shared = Shared::new(&host.services, Attach::New { cwd: None });
    let connection = Connection::new(shared);
    connection.attach(ClientName { name: "mcp-inproc".into(), version: "0".into() }).map_err(|e| e.to_string())?;
    // The payload the Python client sends: five pending todos, as the JSON
    // text an MCP server hands the registry.
    let todos: Vec<_> = (0..5).map(|i| json!({"content": format!("step {i}"), "status": "pending"})).collect();
    let arguments = json!({"todos": todos}).to_string();
    // One call first, as the client does: the tool compiles its schema on
    // first use.
    connection.call("todo_write", &arguments).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut errors = 0;
    for _ in 0..n {
        errors += usize::from(connection.call("todo_write", &arguments).map_err(|e| e.to_string())?.result.is_error);
    }
    let seconds = start.elapsed().as_secs_f64();
    connection.close();
    println!("{}", json!({"step": "bench", "calls": n, "seconds": seconds, "calls_per_s": n as f64 / seconds, "errors": errors}));
    Ok(())
}
