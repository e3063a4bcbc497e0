//! `cordis web`: the sessions of the composition's store, and their plans,
//! live in a browser.
//!
//! A read-only web app served by the host: the session list (title or first
//! prompt, last update, status, plan counts) and one page per session (the
//! conversation, the plan strips, a row per tool call), both updated live
//! with Server-Sent Events as any process appends to the store. Pages are
//! HTML made on the server, in English or Chinese (Simplified or
//! Traditional); the stylesheet and a
//! small script (with a shared worker that carries every page's stream on
//! one connection) are compiled into the binary, so nothing is fetched from
//! elsewhere and nothing needs building.
//!
//! Modules, leaves first: [`html`] (escaping, ids, times), [`i18n`] (the
//! languages), [`plan`] (plan shapes and the row summary), [`items`]
//! (events into conversation items), [`data`] (reading through the host,
//! windows and their plans), [`render`] (pages and fragments), [`live`]
//! (followed sessions shared by their viewers), [`server`]
//! (HTTP, security checks, live streams).

pub mod data;
pub mod html;
pub mod i18n;
pub mod items;
pub mod live;
pub mod plan;
pub mod render;
pub mod server;

pub use server::{check, parse_addr, serve, WebOptions};

/// Why `cordis web` cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// The options are refused (a public address without a token, a
    /// malformed address, host or origin).
    #[error("{0}")]
    Options(String),
    /// Sessions are kept in memory: there is no store to show.
    #[error("sessions are kept in memory here; there is no store to show")]
    NoStore,
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The server's runtime or threads cannot start.
    #[error("{0}")]
    Runtime(String),
}

/// Serves the sessions of `services`' store with `options` until Ctrl-C or
/// SIGTERM, on a runtime of its own; `ready` gets the bound address once
/// the server listens (port 0 picks one).
///
/// # Errors
/// [`WebError`]: refused options, no store, an address that cannot be bound,
/// a runtime that cannot start.
pub fn run(services: &cordis_engine::context::Services, options: WebOptions, ready: impl FnOnce(std::net::SocketAddr)) -> Result<(), WebError> {
    check(&options)?;
    let source = data::Source::of(services);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("cordis-web")
        .build()
        .map_err(|e| WebError::Runtime(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(async {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            }
            stop_tx.send_replace(true);
        });
        serve(source, options, stop_rx, ready).await
    });
    // Threads following a session wake at least every half second and
    // then see the stop; the process is ending anyway.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}
