//! The Streamable HTTP transport of `cordis mcp --http ADDR`: rmcp's
//! `StreamableHttpService` at `/mcp`, on hyper.
//!
//! Security defaults:
//! - the address must be given whole; the documented default is
//!   `127.0.0.1:PORT` (loopback only). Binding any other address requires
//!   `--token`, since every tool call writes to the user's sessions;
//! - `Host` must name this machine's loopback (`localhost`, `127.0.0.1`,
//!   `[::1]`), the bound address, or a name given with `--allow-host` (DNS
//!   rebinding protection; bound to `0.0.0.0`, remote clients need their
//!   name allowed);
//! - a request carrying `Origin` is refused (403) unless the origin is this
//!   server's own (`http://localhost:PORT`, `http://127.0.0.1:PORT`,
//!   `http://[::1]:PORT`) or one given with `--allow-origin`, as the
//!   specification requires of servers (requests without `Origin`, from
//!   programs rather than browsers, pass);
//! - with `--token T` (or `CORDIS_MCP_TOKEN`), every request must carry
//!   `Authorization: Bearer T`, else 401 with `WWW-Authenticate: Bearer`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use cordis_sync::LockExt;

use super::order::{ArrivalTicket, CallOrder, Ticket};
use super::{Handler, McpError, Shared};

/// The path the MCP endpoint is served at.
pub const ENDPOINT: &str = "/mcp";

/// How to serve over HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
    /// Browser origins allowed besides the server's own
    /// (`scheme://host:port`).
    pub allowed_origins: Vec<String>,
    /// `Host` names accepted besides loopback and the bound address (the
    /// names remote clients use, needed when bound to `0.0.0.0`).
    pub allowed_hosts: Vec<String>,
}

/// Checks options before binding.
///
/// # Errors
/// [`McpError::Transport`] for a non-loopback address without a token, an
/// empty token, or an origin without a scheme.
pub fn check(options: &HttpOptions) -> Result<(), McpError> {
    if options.token.as_deref().is_some_and(str::is_empty) {
        return Err(McpError::Transport("--token is empty".into()));
    }
    if !options.addr.ip().is_loopback() && options.token.is_none() {
        return Err(McpError::Transport(format!(
            "--http {} is reachable from other machines, and every call writes to your sessions: pass --token (or set CORDIS_MCP_TOKEN), or bind 127.0.0.1",
            options.addr
        )));
    }
    for host in &options.allowed_hosts {
        if host.is_empty() || host.contains(['*', '/', ' ']) {
            return Err(McpError::Transport(format!(
                "--allow-host {host:?}: give one name or address clients use in the Host header (e.g. myhost.example or 192.168.1.5); wildcards are not accepted, since they would turn off the DNS rebinding check"
            )));
        }
    }
    for origin in &options.allowed_origins {
        if !(origin.starts_with("http://") || origin.starts_with("https://")) {
            return Err(McpError::Transport(format!("--allow-origin {origin}: give the scheme, host and port, e.g. http://localhost:3000")));
        }
    }
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())).boxed());
    *response.status_mut() = status;
    response
}

/// A JSON-RPC error response as the HTTP answer.
fn json_rpc(status: StatusCode, message: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(message.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}

/// The largest request body read: as the stdio transport's longest line.
const MAX_BODY_BYTES: usize = super::stdio::MAX_LINE_BYTES;

/// Reads a POST body and screens it as the stdio transport screens a line:
/// the request to hand on (its body read), or the answer (400 with a
/// JSON-RPC error body) for a body that is not one JSON-RPC message.
async fn screen_post(request: Request<Incoming>, ticket: Option<Ticket>) -> Result<Request<Full<Bytes>>, Response<Body>> {
    let (mut parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY_BYTES);
    let bytes = match limited.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            let message = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("Parse error: the body could not be read ({e}; at most {MAX_BODY_BYTES} bytes)")}});
            return Err(json_rpc(StatusCode::BAD_REQUEST, &message));
        }
    };
    match super::stdio::screen(&bytes) {
        super::stdio::Screened::Forward { call } => {
            // A call keeps its place in the session's arrival order; any
            // other request gives it back now.
            if let Some(ticket) = ticket.filter(|_| call.is_some()) {
                parts.extensions.insert(ArrivalTicket(Arc::new(std::sync::Mutex::new(Some(ticket)))));
            }
            Ok(Request::from_parts(parts, Full::new(bytes)))
        }
        super::stdio::Screened::Answer(message) => Err(json_rpc(StatusCode::BAD_REQUEST, &message)),
        super::stdio::Screened::Skip => {
            let message = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid Request: the body holds no message that can be answered"}});
            Err(json_rpc(StatusCode::BAD_REQUEST, &message))
        }
    }
}

/// Serves `shared` over HTTP until `stop` is cancelled; calls `ready` with
/// the bound address once listening.
///
/// # Errors
/// [`McpError::Transport`] when the options are refused or the address
/// cannot be bound.
pub async fn serve(shared: Arc<Shared>, options: HttpOptions, stop: CancellationToken, ready: impl FnOnce(SocketAddr)) -> Result<(), McpError> {
    check(&options)?;
    let listener =
        tokio::net::TcpListener::bind(options.addr).await.map_err(|e| McpError::Transport(format!("cannot listen on {}: {e}", options.addr)))?;
    let local = listener.local_addr().map_err(|e| McpError::Transport(e.to_string()))?;
    let port = local.port();
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    if !local.ip().is_unspecified() {
        hosts.push(local.ip().to_string());
    } else if options.allowed_hosts.is_empty() {
        eprintln!(
            "cordis mcp: listening on every address, but only loopback names are accepted in the Host header; add --allow-host NAME for each name remote clients use"
        );
    }
    hosts.extend(options.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"].iter().map(|h| format!("http://{h}:{port}")).collect();
    origins.extend(options.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(stop.child_token());
    let factory_shared = shared.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(move || Ok(Handler::new(factory_shared.clone())), sessions.clone(), config);
    let token = options.token.map(|t| format!("Bearer {t}"));
    let orders: Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<CallOrder>>>> = Arc::default();
    ready(local);
    loop {
        let (stream, _) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            },
        };
        let service = service.clone();
        let token = token.clone();
        let sessions = sessions.clone();
        let orders = orders.clone();
        let handle = service_fn(move |request: Request<Incoming>| {
            let service = service.clone();
            let token = token.clone();
            let sessions = sessions.clone();
            // The request's place in its session's order: taken as its
            // request line arrives, before anything is awaited.
            let ticket =
                request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).filter(|_| request.method() == hyper::Method::POST).map(|id| {
                    let mut orders = orders.lock_or_recover();
                    orders.entry(id.to_string()).or_insert_with(|| Arc::new(CallOrder::default())).ticket()
                });
            async move {
                if let Some(expected) = &token {
                    let given = request.headers().get(hyper::header::AUTHORIZATION).map(|v| v.as_bytes()).unwrap_or_default();
                    if !constant_time_eq(given, expected.as_bytes()) {
                        let mut response = plain(StatusCode::UNAUTHORIZED, "a bearer token is required (Authorization: Bearer TOKEN)");
                        response.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
                        return Ok::<_, Infallible>(response);
                    }
                }
                if request.uri().path() != ENDPOINT {
                    return Ok(plain(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp"));
                }
                use rmcp::transport::streamable_http_server::session::SessionManager as _;
                use tower_service::Service as _;
                let mut service = service;
                // Ending a session the server does not know is a 404, as
                // for any other request naming one.
                if request.method() == hyper::Method::DELETE {
                    let id = request.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(std::sync::Arc::<str>::from);
                    if let Some(id) = id {
                        if !sessions.has_session(&id).await.unwrap_or(true) {
                            return Ok(plain(StatusCode::NOT_FOUND, "Not Found: no such session (it ended, or this server never started it)"));
                        }
                    }
                }
                if request.method() == hyper::Method::POST {
                    return match screen_post(request, ticket).await {
                        Ok(request) => service.call(request).await,
                        Err(answer) => Ok(answer),
                    };
                }
                service.call(request).await
            }
        });
        let stop = stop.clone();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handle);
            tokio::pin!(connection);
            // On stop the connection is dropped: the process is ending, and
            // an open event stream would otherwise hold it.
            tokio::select! {
                result = connection.as_mut() => if let Err(e) = result { tracing::debug!("HTTP connection: {e}") },
                () = stop.cancelled() => {}
            }
        });
    }
    shared.close_all();
    Ok(())
}
