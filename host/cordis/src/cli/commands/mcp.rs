//! `cordis mcp`: the composition's tools served to MCP clients over stdio
//! or Streamable HTTP.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use cordis_engine::runtime::HostOptions;

use crate::cli::boot::{boot_with, close_cut_short, judge, options, refuse_under_strict, Verdict};
use crate::cli::commands::dev::libraries;
use crate::cli::{Cli, CliError};

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

/// Serves until the transport closes or SIGINT/SIGTERM.
///
/// # Errors
/// Exit 2 when the options are refused or the composition, the session or
/// the transport cannot be used; exit 1 when an entry failed.
pub fn run(
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
            close_cut_short(id, &s)?;
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
