//! The MCP requests a connection answers.
//!
//! | request | answer |
//! | --- | --- |
//! | `initialize` | attaches the connection's agent session (see [`crate::connection`]); the instructions name it and its plan resource |
//! | `tools/list` | the composition's catalog: name, description, input JSON Schema, in name order |
//! | `tools/call` | the call through the tool registry, recorded in the session as the agent loop records it; the result's text content, `structuredContent` (the tool's value) and `isError`. Arguments the tool refuses are results with `isError: true` and the registry's error text (the model can read and fix them); an unknown tool, or `arguments` that are not an object, is a JSON-RPC error `-32602`, as the specification says. A connection's calls take effect one at a time in the order they arrived: a call the client cancelled or abandoned is either applied whole before the next one starts or not at all |
//! | `resources/list` | the connection's session's projections, `cordis://session/{id}/{key}` |
//! | `resources/templates/list` | `cordis://session/{id}/{projection}` |
//! | `resources/read` | a projection of any stored session: JSON and text (see [`crate::resources`]) |
//! | `resources/subscribe`, `resources/unsubscribe` | `notifications/resources/updated` after each event the projection folds |

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, InitializeRequestParams, InitializeResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    Tool, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;

use super::connection::{ClientName, Connection};
use super::order::{ArrivalTicket, Arrivals, Place};
use super::{resources, McpError, Shared};
use cordis_engine::tools::ToolSchema;

/// The server side of one MCP connection.
pub struct Handler {
    shared: Arc<Shared>,
    conn: Arc<Connection>,
    /// Held by the call that is taking effect: calls wait for it in the
    /// order they arrived (the lock is fair), and a call whose request is
    /// dropped keeps it until its work is done.
    order: Arc<tokio::sync::Mutex<()>>,
    /// The places the stdio transport gave calls as it read them.
    arrivals: Option<Arc<Arrivals>>,
}

impl Handler {
    /// A handler for a new connection.
    pub fn new(shared: Arc<Shared>) -> Handler {
        let conn = Arc::new(Connection::new(shared.clone()));
        shared.add_connection(&conn);
        Handler { shared, conn, order: Arc::new(tokio::sync::Mutex::new(())), arrivals: None }
    }

    /// This handler's calls take the places the stdio transport gave them
    /// as it read them ([`Arrivals`]).
    pub fn with_arrivals(mut self, arrivals: Arc<Arrivals>) -> Handler {
        self.arrivals = Some(arrivals);
        self
    }

    /// The connection (to close it when the transport ends).
    pub fn connection(&self) -> Arc<Connection> {
        self.conn.clone()
    }

    fn session_id(&self) -> Option<String> {
        self.conn.session().map(|s| s.id().to_string())
    }
}

/// The protocol versions served: those with the `initialize` handshake.
pub fn protocol_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)
}

/// A catalog entry as an MCP tool: name, description, input schema, and
/// `outputSchema` when the tool declares the shape of its value.
/// Both schemas are published portable ([`portable`]).
pub fn tool(schema: &ToolSchema) -> Tool {
    let input = match &schema.parameters {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    let mut input = Value::Object(input);
    portable(&mut input);
    let Value::Object(input) = input else { unreachable!("an object stays an object") };
    let mut tool = Tool::new(schema.name.clone(), schema.description.clone(), Arc::new(input));
    if let Some(output @ Value::Object(_)) = &schema.output {
        let mut output = output.clone();
        portable(&mut output);
        if let Value::Object(output) = output {
            tool.output_schema = Some(Arc::new(output));
        }
    }
    tool
}

/// Makes a schema portable across JSON Schema validators: the numeric
/// `format`s Rust schema generators write (`uint`, `uint32`, `int64`,
/// `double`, …) are not in any JSON Schema vocabulary, and strict
/// validators refuse to compile a schema holding one. Each is removed; an
/// unsigned one becomes `minimum: 0` (unless a minimum is there already).
pub fn portable(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let numeric = map.get("format").and_then(Value::as_str).and_then(|f| {
                let unsigned = f.strip_prefix("uint").is_some_and(|bits| bits.chars().all(|c| c.is_ascii_digit()));
                let signed = f.strip_prefix("int").is_some_and(|bits| !bits.is_empty() && bits.chars().all(|c| c.is_ascii_digit()));
                (unsigned || signed || f == "float" || f == "double").then_some(unsigned)
            });
            if let Some(unsigned) = numeric {
                map.remove("format");
                if unsigned && !map.contains_key("minimum") && !map.contains_key("exclusiveMinimum") {
                    map.insert("minimum".into(), Value::from(0));
                }
            }
            for value in map.values_mut() {
                portable(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(portable),
        _ => {}
    }
}

/// A registry result as an MCP tool result: the text as one text block,
/// the value as `structuredContent` when it is a JSON object (MCP allows
/// nothing else there; any other value is left out, with a warning in the
/// server's log), and `isError`.
pub fn call_result(result: &cordis_engine::tools::ToolResult) -> CallToolResult {
    let text = vec![ContentBlock::text(result.text.clone())];
    let mut out = if result.is_error { CallToolResult::error(text) } else { CallToolResult::success(text) };
    out.structured_content = match result.parsed_value() {
        Ok(Some(Value::Object(map))) => Some(Value::Object(map)),
        Ok(None) => None,
        Ok(Some(other)) => {
            tracing::warn!("a tool's value is {}, not an object: left out of structuredContent", cordis_abi::schema::describe_value(&other));
            None
        }
        Err(e) => {
            tracing::warn!("a tool's value cannot be read ({e}): left out of structuredContent");
            None
        }
    };
    out.is_error = Some(result.is_error);
    out
}

/// Methods of the protocol this server answers (a request of one of them
/// that rmcp cannot read has bad params, not an unknown method).
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

/// The error of a call the client cancelled before it started (it did not
/// run).
fn cancelled() -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode(-32800), "the request was cancelled before it started; it did not run", None)
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, McpError> + Send + 'static) -> Result<T, ErrorData> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(McpError::Busy(id))) => Err(ErrorData::invalid_request(McpError::Busy(id).to_string(), None)),
        Ok(Err(e)) => Err(internal(e)),
        Err(e) => Err(internal(format!("the call's thread failed: {e}"))),
    }
}

impl ServerHandler for Handler {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(protocol_versions())
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities =
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_resources().enable_resources_subscribe().build();
        let mut info = ServerConfig::new(capabilities).with_server_info(Implementation::new("cordis", env!("CARGO_PKG_VERSION")));
        if let Some(id) = self.session_id() {
            let resources: Vec<String> = self.shared.projections.all().iter().map(|p| resources::uri(&id, &p.key)).collect();
            let mut text = format!("The tools of a cordis composition. Every call is recorded in cordis session {id}.");
            if !resources.is_empty() {
                text.push_str(&format!(" Its state is in the resources {} (subscribe to follow them).", resources.join(", ")));
            }
            info = info.with_instructions(text);
        }
        info
    }

    async fn initialize(&self, request: InitializeRequestParams, context: RequestContext<RoleServer>) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let client = ClientName { name: request.client_info.name.clone(), version: request.client_info.version.clone() };
        let conn = self.conn.clone();
        blocking(move || conn.attach(client)).await?;
        self.shared.add_peer(self.conn.id, context.peer.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.schemas().iter().map(tool).collect()))
    }

    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        // rmcp hands a request of a known method whose params do not read
        // (say, `arguments` that are not an object) here as an unknown one.
        if KNOWN_METHODS.contains(&request.method.as_str()) {
            let why = match (request.method.as_str(), request.params.as_ref().and_then(|p| p.get("arguments"))) {
                ("tools/call", Some(arguments)) if !arguments.is_object() => {
                    format!("`arguments` must be an object, found {}", cordis_abi::schema::describe_value(arguments))
                }
                ("tools/call", _) if request.params.as_ref().and_then(|p| p.get("name")).is_none_or(|n| !n.is_string()) => {
                    "`name` must be the tool's name, a string".to_string()
                }
                _ => "they do not have the shape the method takes".to_string(),
            };
            return Err(ErrorData::invalid_params(format!("invalid params of {}: {why}", request.method), None));
        }
        Err(ErrorData::new(rmcp::model::ErrorCode::METHOD_NOT_FOUND, format!("method not found: {}", request.method), None))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.tools.get(name).map(|t| tool(&t.schema))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        // The call's place in the order calls arrived: given by the
        // transport as it read the call (by request id over stdio, in the
        // HTTP request's extensions).
        let ticket = match &self.arrivals {
            Some(arrivals) => match serde_json::to_value(&context.id).ok().and_then(|id| arrivals.take(&id)) {
                Some(Place::Waiting(ticket)) => Some(ticket),
                Some(Place::Cancelled) => return Err(cancelled()),
                None => None,
            },
            None => context.extensions.get::<http::request::Parts>().and_then(|p| p.extensions.get::<ArrivalTicket>()).and_then(ArrivalTicket::take),
        };
        let arguments = match &request.arguments {
            Some(map) => serde_json::to_string(map).map_err(internal)?,
            None => "{}".to_string(),
        };
        let name = request.name.to_string();
        if self.shared.tools.get(&name).is_none() {
            let mut names: Vec<String> = self.shared.tools.schemas().into_iter().map(|s| s.name).collect();
            names.sort();
            let available = if names.is_empty() { "none".to_string() } else { names.join(", ") };
            return Err(ErrorData::invalid_params(format!("unknown tool `{name}` (available tools: {available})"), None));
        }
        let conn = self.conn.clone();
        // Calls take effect in the order they arrived. The whole call runs
        // on a blocking thread that finishes it even if this request is
        // dropped (the client cancelled, or went away mid-call); it holds
        // its turn until then, so the next call starts after it.
        if let Some(ticket) = &ticket {
            ticket.wait_turn().await;
        }
        let turn = (ticket, self.order.clone().lock_owned().await);
        // Cancelled while it waited: it never runs.
        if context.ct.is_cancelled() {
            return Err(cancelled());
        }
        // The client cancelling the request, or leaving (which cancels
        // every request of the connection), cancels the call itself when
        // it can be cancelled (a tool source's): it returns at once.
        let watched = self.conn.clone();
        let cancelled = context.ct.clone();
        let watch = tokio::spawn(async move {
            cancelled.cancelled().await;
            watched.cancel_call("the MCP client cancelled the request or went away");
        });
        let outcome = blocking(move || {
            let _turn = turn;
            conn.call(&name, &arguments)
        })
        .await;
        watch.abort();
        let outcome = outcome?;
        if let Some(session) = self.session_id() {
            let projections = &self.shared.projections;
            let targets = self.shared.hub.affected(&session, &outcome.appended, |key, kind| projections.get(key).is_some_and(|p| p.folds(kind)));
            for (peer, uri) in targets {
                if let Err(e) = peer.notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(uri)).await {
                    tracing::debug!("resources/updated not delivered: {e}");
                }
            }
        }
        Ok(call_result(&outcome.result).into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let Some(id) = self.session_id() else { return Ok(ListResourcesResult::with_all_items(Vec::new())) };
        let items = self
            .shared
            .projections
            .all()
            .into_iter()
            .map(|p| {
                Resource::new(resources::uri(&id, &p.key), p.key.clone())
                    .with_title(format!("{} of cordis session {id}", p.key))
                    .with_description(format!("The `{}` projection of this connection's session: JSON, and a text view", p.key))
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let template = ResourceTemplate::new(resources::TEMPLATE, "session projection")
            .with_title("A projection of a stored cordis session (`todos` is the plan)")
            .with_mime_type("application/json");
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let (id, key) = resources::parse(&uri).map_err(|e| ErrorData::resource_not_found(e, None))?;
        let (id, key) = (id.to_string(), key.to_string());
        let shared = self.shared.clone();
        let read = tokio::task::spawn_blocking(move || {
            let projection = shared.projections.get(&key).ok_or_else(|| format!("no projection `{key}` is registered"))?;
            let state = shared.sessions.projection_state(&id, &key)?;
            Ok::<_, String>((state.clone(), projection.render(&state)))
        })
        .await
        .map_err(internal)?;
        let (state, view) = read.map_err(|e| ErrorData::resource_not_found(format!("{uri}: {e}"), None))?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(state, uri.clone()).with_mime_type("application/json"),
            ResourceContents::text(view, uri),
        ])
        .into())
    }

    async fn subscribe(&self, request: SubscribeRequestParams, context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        let (id, key) = resources::parse(&request.uri).map_err(|e| ErrorData::resource_not_found(e, None))?;
        if self.shared.projections.get(key).is_none() {
            return Err(ErrorData::resource_not_found(format!("{}: no projection `{key}` is registered", request.uri), None));
        }
        self.shared.hub.subscribe(self.conn.id, &request.uri, id, key, context.peer.clone());
        Ok(())
    }

    async fn unsubscribe(&self, request: UnsubscribeRequestParams, _context: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.shared.hub.unsubscribe(self.conn.id, &request.uri);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordis_engine::tools::ToolResult;
    use cordis_session::json::RawJson;

    fn with_value(value: Option<RawJson>) -> CallToolResult {
        call_result(&ToolResult { is_error: false, text: "done".into(), value, value_in_log: false })
    }

    #[test]
    fn structured_content_is_an_object_or_nothing() {
        let object = with_value(Some(RawJson::parse("{\"n\": 1}").unwrap()));
        assert_eq!(object.structured_content, Some(serde_json::json!({"n": 1})));
        // A value MCP cannot carry, or one serde_json cannot read (a
        // library not built with the SDK could send it), is left out; the
        // text stays the one content block.
        for text in ["42", "[1]", "{\"big\": 1e999}", "{\"s\": \"\\ud800\"}"] {
            let result = with_value(Some(RawJson::from_plugin(text)));
            assert_eq!(result.structured_content, None, "{text}");
            assert_eq!(result.content.len(), 1, "{text}");
        }
        assert_eq!(with_value(None).structured_content, None);
    }
}
