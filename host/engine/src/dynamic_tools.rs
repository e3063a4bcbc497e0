//! Tools whose set changes after `apply`: the host side of the
//! `tools.dynamic` capability (cordis-abi 1.3).
//!
//! A plugin hands the host a *tool source* (a service object answering
//! `list`, `call` and `close`; the contract is documented on
//! [`cordis_abi::capabilities::TOOLS_DYNAMIC`]). The host registers the
//! source's first generation of tools before answering, then follows it
//! from a thread of its own that long-polls `list`: each new generation
//! replaces the previous one in the [`ToolRegistry`], all or none. Each
//! registered tool is a `ForwardedTool` that sends its calls to the
//! source through the same pipeline as any tool (the registry checks the
//! arguments first), and checks the structured value the source answers
//! against the tool's declared output schema.
//!
//! Nothing here holds the registry's call gate, so a reload that disposes
//! the fiber (under the gate) can stop the follower without waiting on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RSlice, RStr, RString};
use cordis_abi::ffi::{ExecContextRef, ServiceBox, Tool, ToolBox, ToolOutcome, Tool_TO};
use cordis_abi::schema::Checker;
use cordis_abi::tape::ArgToken;
use cordis_abi::JsonText;
use cordis_session::Owner;
use cordis_sync::LockExt;
use serde::Deserialize;
use serde_json::Value;

use crate::tools::{SourceStatus, ToolRegistry};

/// How long one `list` waits for a change before answering (the longest a
/// disposal waits for the follower, besides the source's `close`).
const WAIT_MS: u64 = 250;

/// One tool of a generation, as the source lists it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Listed {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Value,
    #[serde(default)]
    output_schema: Option<Value>,
}

/// A `list` answer.
#[derive(Debug, Clone, Deserialize)]
struct Generation {
    generation: Value,
    tools: Vec<Listed>,
    #[serde(default)]
    status: String,
    #[serde(default, rename = "statusLevel")]
    status_level: String,
}

/// What the follower and the disposal share.
struct Follow {
    registry: Arc<ToolRegistry>,
    source: Arc<ServiceBox>,
    owner: Owner,
    stop: AtomicBool,
    registered: Mutex<Vec<(String, u64)>>,
    /// This source's token for the registry's status table.
    token: u64,
}

impl Follow {
    /// Logs a new status line at the level the source gives (`info` by
    /// default) and keeps it where `check` and dev's `status` read it.
    fn report(&self, generation: &Generation) {
        if generation.status.is_empty() {
            return;
        }
        let (owner, status) = (&self.owner, &generation.status);
        let level = match generation.status_level.as_str() {
            "error" => {
                tracing::error!(entry = %owner.entry, plugin = %owner.plugin, "{status}");
                "error"
            }
            "warn" => {
                tracing::warn!(entry = %owner.entry, plugin = %owner.plugin, "{status}");
                "warn"
            }
            _ => {
                tracing::info!(entry = %owner.entry, plugin = %owner.plugin, "{status}");
                "info"
            }
        };
        self.registry.set_source_status(&owner.entry, self.token, SourceStatus { level: level.to_string(), text: status.clone() });
    }

    fn list(&self, after: Option<&Value>, wait_ms: u64) -> Result<Generation, String> {
        let request = serde_json::json!({"after": after, "waitMs": wait_ms}).to_string();
        let answer = self.source.call("list".into(), request.as_str().into()).into_result().map_err(String::from)?;
        serde_json::from_str(answer.as_str()).map_err(|e| format!("its answer to `list` is not a tool list: {e}"))
    }

    /// Replaces the registered generation with `tools`, all or none.
    fn swap(&self, tools: &[Listed]) -> Result<usize, String> {
        let mut registered = self.registered.lock_or_recover();
        for (name, token) in registered.drain(..) {
            self.registry.unregister(&name, token);
        }
        for listed in tools {
            let tool = ForwardedTool::new(listed.clone(), self.source.clone(), Arc::downgrade(&self.registry), self.owner.entry.clone());
            let boxed: ToolBox = Tool_TO::from_value(tool, TD_Opaque);
            match self.registry.register_source_tool(boxed, self.owner.clone()) {
                Ok(done) => registered.push(done),
                Err(e) => {
                    for (name, token) in registered.drain(..) {
                        self.registry.unregister(&name, token);
                    }
                    return Err(format!("{e}; none of its {} tools are registered", tools.len()));
                }
            }
        }
        Ok(registered.len())
    }

    /// Withdraws the registered tools and the reported status.
    fn end(&self) {
        for (name, token) in self.registered.lock_or_recover().drain(..) {
            self.registry.unregister(&name, token);
        }
        self.registry.clear_source_status(&self.owner.entry, self.token);
    }

    /// The follower's loop: long-poll `list`, swap on a new generation,
    /// log a new status.
    fn run(&self, mut generation: Value, mut status: String) {
        let entry = &self.owner.entry;
        let mut failing = false;
        while !self.stop.load(Ordering::Acquire) {
            match self.list(Some(&generation), WAIT_MS) {
                Ok(next) => {
                    failing = false;
                    if self.stop.load(Ordering::Acquire) {
                        break;
                    }
                    if next.status != status {
                        self.report(&next);
                        status = next.status.clone();
                    }
                    if next.generation != generation {
                        generation = next.generation.clone();
                        match self.swap(&next.tools) {
                            Ok(n) => {
                                tracing::info!(entry = %entry, "tools of entry {entry} changed: {n} registered");
                                // Replaces a failed swap's status, if any.
                                self.report(&next);
                            }
                            Err(e) => {
                                let text = format!("entry {entry}: its new tools could not be registered: {e}");
                                tracing::error!(entry = %entry, "{text}");
                                // Shown instead of the source's own status
                                // until a generation registers.
                                self.registry.set_source_status(entry, self.token, SourceStatus { level: "error".into(), text });
                            }
                        }
                    }
                }
                Err(e) => {
                    if !failing {
                        tracing::error!(entry = %entry, "entry {entry}: its tool source failed to list its tools: {e}");
                    }
                    failing = true;
                    std::thread::sleep(Duration::from_millis(WAIT_MS));
                }
            }
        }
    }
}

/// Follows `source` for `owner`: registers its first generation, then
/// follows it. Returns the number of tools registered and the undo that
/// stops following, sends `close` and withdraws the tools.
///
/// # Errors
/// When the source's first `list` fails or does not read, or one of its
/// tools cannot be registered (a name taken, a bad schema).
pub fn follow(registry: Arc<ToolRegistry>, owner: Owner, source: ServiceBox) -> Result<(usize, impl FnOnce() + Send + 'static), String> {
    let token = ToolRegistry::source_token();
    let follow = Arc::new(Follow { registry, source: Arc::new(source), owner, stop: AtomicBool::new(false), registered: Mutex::default(), token });
    let first = follow.list(None, 0).map_err(|e| format!("tools.dynamic: the tool source failed to list its tools: {e}"))?;
    let count = follow.swap(&first.tools).map_err(|e| format!("tools.dynamic: {e}"))?;
    follow.report(&first);
    let runner = follow.clone();
    let spawned = std::thread::Builder::new().name(format!("tools:{}", follow.owner.entry)).spawn(move || runner.run(first.generation, first.status));
    let thread = match spawned {
        Ok(thread) => thread,
        Err(e) => {
            follow.end();
            return Err(format!("tools.dynamic: cannot start the thread following the tool source: {e}"));
        }
    };
    let undo = move || {
        follow.stop.store(true, Ordering::Release);
        let _ = follow.source.call("close".into(), "{}".into());
        let _ = thread.join();
        follow.end();
    };
    Ok((count, undo))
}

/// A tool of a source, registered by the host: its calls go to the source.
struct ForwardedTool {
    listed: Listed,
    parameters: String,
    output: String,
    source: Arc<ServiceBox>,
    checker: OnceLock<Result<Checker, String>>,
    /// Where its calls are listed as cancellable.
    registry: Weak<ToolRegistry>,
    entry: String,
}

impl ForwardedTool {
    fn new(listed: Listed, source: Arc<ServiceBox>, registry: Weak<ToolRegistry>, entry: String) -> ForwardedTool {
        let parameters = listed.parameters.to_string();
        let output = listed.output_schema.as_ref().filter(|s| s.is_object()).map(Value::to_string).unwrap_or_default();
        ForwardedTool { listed, parameters, output, source, checker: OnceLock::new(), registry, entry }
    }

    fn forward(&self, arguments: &str, call_id: &str) -> ToolOutcome {
        // Cancelling the call (Ctrl-C, a reload, a client that left) sends
        // the source `cancel`, which answers the call at once.
        let registry = self.registry.upgrade();
        let source = self.source.clone();
        let id = call_id.to_string();
        let _cancellable = registry.as_ref().map(|registry| {
            registry.cancellable_call(&self.entry, call_id, move |reason| {
                let request = serde_json::json!({"callId": id, "reason": reason}).to_string();
                // A source older than `cancel` refuses it; its call then
                // runs to its end.
                let _ = source.call("cancel".into(), request.as_str().into());
            })
        });
        match self.forward_inner(arguments, call_id) {
            Ok(outcome) => outcome,
            Err(message) => ToolOutcome { is_error: true, text: format!("Error: {message}").into(), value: ROption::RNone },
        }
    }

    fn forward_inner(&self, arguments: &str, call_id: &str) -> Result<ToolOutcome, String> {
        let name = serde_json::to_string(&self.listed.name).map_err(|e| e.to_string())?;
        let id = serde_json::to_string(call_id).map_err(|e| e.to_string())?;
        let request = format!("{{\"name\":{name},\"callId\":{id},\"arguments\":{arguments}}}");
        let answer = self.source.call("call".into(), request.as_str().into()).into_result().map_err(String::from)?;
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Answer {
            is_error: bool,
            text: String,
            #[serde(default)]
            value: Option<Value>,
        }
        let answer: Answer = serde_json::from_str(answer.as_str())
            .map_err(|e| format!("the tool's source answered a call with something that is not a result: {e}"))?;
        if answer.is_error {
            let text = if answer.text.starts_with("Error: ") { answer.text } else { format!("Error: {}", answer.text) };
            return Ok(ToolOutcome { is_error: true, text: text.into(), value: ROption::RNone });
        }
        let value = match answer.value {
            None if !self.output.is_empty() => {
                return Err(format!("tool `{}` declares an output schema, and its result carries no structured value", self.listed.name));
            }
            None => None,
            Some(value) => {
                if !value.is_object() {
                    return Err(format!("the structured value of tool `{}` is not a JSON object", self.listed.name));
                }
                if let Some(schema) = self.listed.output_schema.as_ref().filter(|s| s.is_object()) {
                    let checker = self.checker.get_or_init(|| {
                        Checker::new(schema.clone()).map_err(|e| format!("the output schema of tool `{}` does not compile: {e}", self.listed.name))
                    });
                    let checker = checker.as_ref().map_err(Clone::clone)?;
                    let violations = checker.violations(&value);
                    if !violations.is_empty() {
                        return Err(format!(
                            "the result of tool `{}` is not valid for its declared output schema: {}",
                            self.listed.name,
                            cordis_abi::schema::join(&violations)
                        ));
                    }
                }
                Some(JsonText::encode(&value).map_err(|e| format!("the structured value of tool `{}` cannot be kept: {e}", self.listed.name))?)
            }
        };
        Ok(ToolOutcome { is_error: false, text: answer.text.into(), value: value.into() })
    }
}

impl Tool for ForwardedTool {
    fn name(&self) -> RString {
        self.listed.name.as_str().into()
    }

    fn description(&self) -> RString {
        self.listed.description.as_str().into()
    }

    fn parameters(&self) -> RString {
        self.parameters.as_str().into()
    }

    fn execute(&self, arguments: RStr<'_>, cx: ExecContextRef<'_>) -> ToolOutcome {
        // A caller holding only text: send it on only when it is JSON.
        match serde_json::from_str::<Value>(arguments.as_str()) {
            Ok(value) => self.forward(&value.to_string(), cx.call_id().as_str()),
            Err(e) => ToolOutcome { is_error: true, text: format!("Error: invalid arguments: {e}").into(), value: ROption::RNone },
        }
    }

    fn present_call(&self, arguments: RStr<'_>) -> RString {
        let args: Value = serde_json::from_str(arguments.as_str()).unwrap_or_else(|_| Value::String(arguments.to_string()));
        serde_json::json!({"kind": "generic", "title": self.listed.name, "arguments": args}).to_string().into()
    }

    fn output_schema(&self) -> RString {
        self.output.as_str().into()
    }

    fn execute_tokens(&self, arguments: RStr<'_>, _tokens: RSlice<'_, ArgToken<'_>>, cx: ExecContextRef<'_>) -> ToolOutcome {
        // The registry checked the text against `parameters`: it is JSON.
        self.forward(arguments.as_str(), cx.call_id().as_str())
    }

    fn extension(&self, _name: RStr<'_>, _version: u32) -> ROption<ServiceBox> {
        ROption::RNone
    }
}
