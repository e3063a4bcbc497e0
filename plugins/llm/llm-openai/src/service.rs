//! The `model` service: a streamed model answer over the services ABI
//! (JSON requests in and out), as a start / next / cancel protocol.
//!
//! Requests:
//! - `describe` (and `value`, what `!!js` expressions see) → `{"service":
//!   "model", "provider": LABEL, "model": NAME, "contextWindow"?: N,
//!   "maxTokens"?: N, "systemPrompt"?: TEXT}` (what a compaction counts as
//!   fixed parts of every request);
//! - `start` `{"messages": [...], "tools": [{"name", "description",
//!   "parameters"}], "maxTokens"?, "purpose"?, "system"?}` → `{"stream": ID}`: sends
//!   the request and streams the answer in the background (see
//!   [`crate::wire::HistoryMessage`] for the messages); `system` replaces
//!   the configured system prompt for this request; `maxTokens` caps the
//!   answer, and `purpose: "compaction"` (a summary of older history) sends
//!   no tools and turns thinking off: no `reasoning_effort`, and
//!   `thinking: {type: disabled}` where the entry sends a `thinking` switch
//!   at all (DeepSeek's);
//! - `next` `{"stream": ID, "waitMs": N}` → `{"events": [...], "done":
//!   BOOL}`: the events received since the last `next`, after waiting up to
//!   `waitMs` (at most [`MAX_WAIT_MS`]) for the first one; `done` once the
//!   stream has ended and every event was taken (the stream is then
//!   forgotten);
//! - `cancel` `{"stream": ID}` → `{"cancelled": BOOL}`: stops the stream
//!   (the connection is dropped at its next read).
//!
//! Events: `{"type": "reasoning-delta" | "text-delta", "text"}`,
//! `{"type": "tool-call-delta", "call": N, "id"?, "name"?,
//! "argumentsDelta"}` (`call` is the API's tool-call index; `id` and `name`
//! come with a call's first delta), `{"type": "usage", "usage":
//! {"inputTokens", "outputTokens", "cacheReadTokens"?,
//! "reasoningTokens"?}}`, `{"type": "finish", "reason": {"kind"}}`,
//! `{"type": "retry", "attempt", "retries", "delayMs", "reason"}` (a notice:
//! the request is sent again after `delayMs`), and, last, at most one
//! `{"type": "error", "kind", "message", "status"?}` with `kind` one of
//! `auth`, `rate-limit`, `server`, `context-length`, `timeout`,
//! `connection`, `malformed`, `http`, `internal`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordis_abi::prelude::*;

use crate::stream::{spawn, Endpoint, StreamState};
use crate::wire::{request_body, HistoryMessage, Sampling, ToolSpec};

/// The service's name.
pub const SERVICE_NAME: &str = "model";

/// The longest `next` wait, in milliseconds: a provider being reloaded
/// waits for calls in flight, so they stay short.
pub const MAX_WAIT_MS: u64 = 1000;

/// The most events one `next` returns.
pub const MAX_EVENTS_PER_NEXT: usize = 1024;

/// The most streams open at once (a host that never drains them cannot
/// pile up threads).
pub const MAX_OPEN_STREAMS: usize = 16;

/// What a request is made of besides the history.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The model name sent as `model`.
    pub model: String,
    /// The label recorded as the answer's provider.
    pub provider: String,
    /// The system prompt, if any.
    pub system: Option<String>,
    /// Temperature and token limit.
    pub sampling: Sampling,
    /// The model's context window in tokens, when configured.
    pub context_window: Option<u64>,
    /// What a request that must not think sends: DeepSeek's API thinks
    /// unless told not to, so its entry sends `thinking: {type: disabled}`;
    /// other APIs get neither switch.
    pub no_thinking: crate::wire::Thinking,
}

/// The `model` service of one `llm-openai` entry.
pub struct ModelService {
    endpoint: Arc<Endpoint>,
    settings: Settings,
    streams: Mutex<HashMap<u64, Arc<StreamState>>>,
    next_id: AtomicU64,
}

impl ModelService {
    /// A service sending requests to `endpoint`.
    pub fn new(endpoint: Endpoint, settings: Settings) -> ModelService {
        ModelService { endpoint: Arc::new(endpoint), settings, streams: Mutex::default(), next_id: AtomicU64::new(1) }
    }

    fn describe(&self) -> Value {
        let mut d = json!({"service": SERVICE_NAME, "provider": self.settings.provider, "model": self.settings.model});
        if let Some(window) = self.settings.context_window {
            d["contextWindow"] = json!(window);
        }
        if let Some(cap) = self.settings.sampling.max_tokens {
            d["maxTokens"] = json!(cap);
        }
        if let Some(system) = &self.settings.system {
            d["systemPrompt"] = json!(system);
        }
        d
    }

    fn start(&self, args: &Value) -> Result<Value, ServiceError> {
        let messages: Vec<HistoryMessage> = serde_json::from_value(args.get("messages").cloned().unwrap_or(Value::Null))
            .map_err(|e| ServiceError::new(format!("model start: `messages` is not a history: {e}")))?;
        let summary = args.get("purpose").and_then(Value::as_str) == Some("compaction");
        let tools: Vec<ToolSpec> = match args.get("tools") {
            _ if summary => Vec::new(),
            None | Some(Value::Null) => Vec::new(),
            Some(t) => serde_json::from_value(t.clone()).map_err(|e| ServiceError::new(format!("model start: `tools` is not a tool list: {e}")))?,
        };
        // A caller's cap (a compaction's summary) wins over the configured one.
        let mut sampling = self.settings.sampling.clone();
        if let Some(cap) = args.get("maxTokens").and_then(Value::as_u64) {
            sampling.max_tokens = Some(cap);
        }
        if summary {
            sampling.thinking = self.settings.no_thinking;
        }
        // A caller's system prompt (an ACP persona) replaces the configured one.
        let system = args.get("system").and_then(Value::as_str).or(self.settings.system.as_deref());
        let body = request_body(&self.settings.model, system, &messages, &tools, &sampling);
        let mut streams = self.streams.lock().map_err(|_| ServiceError::new("model: the stream table is poisoned"))?;
        if streams.len() >= MAX_OPEN_STREAMS {
            return Err(ServiceError::new(format!("model start: {MAX_OPEN_STREAMS} streams are open already; cancel or drain one first")));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(StreamState::default());
        spawn(self.endpoint.clone(), body.to_string(), state.clone())
            .map_err(|e| ServiceError::new(format!("model start: cannot start the stream: {e}")))?;
        streams.insert(id, state);
        Ok(json!({"stream": id.to_string()}))
    }

    fn stream_id(args: &Value) -> Result<u64, ServiceError> {
        args.get("stream")
            .and_then(|s| s.as_str().and_then(|s| s.parse().ok()).or_else(|| s.as_u64()))
            .ok_or_else(|| ServiceError::new("model: `stream` (the id `start` answered) is required"))
    }

    fn next(&self, args: &Value) -> Result<Value, ServiceError> {
        let id = Self::stream_id(args)?;
        let state = self
            .streams
            .lock()
            .map_err(|_| ServiceError::new("model: the stream table is poisoned"))?
            .get(&id)
            .cloned()
            .ok_or_else(|| ServiceError::new(format!("model next: no open stream {id} (it ended, was cancelled, or the provider restarted)")))?;
        let wait = Duration::from_millis(args.get("waitMs").and_then(Value::as_u64).unwrap_or(200).min(MAX_WAIT_MS));
        let (events, done) = state.take(wait, MAX_EVENTS_PER_NEXT);
        if done {
            if let Ok(mut streams) = self.streams.lock() {
                streams.remove(&id);
            }
        }
        Ok(json!({"events": events, "done": done}))
    }

    fn cancel(&self, args: &Value) -> Result<Value, ServiceError> {
        let id = Self::stream_id(args)?;
        let state = self.streams.lock().map_err(|_| ServiceError::new("model: the stream table is poisoned"))?.remove(&id);
        if let Some(s) = &state {
            s.cancel();
        }
        Ok(json!({"cancelled": state.is_some()}))
    }
}

impl Drop for ModelService {
    fn drop(&mut self) {
        // A provider disposed (reloaded, reconfigured, stopped) stops its
        // streams: their workers give up at their next read.
        if let Ok(streams) = self.streams.get_mut() {
            for s in streams.values() {
                s.cancel();
            }
        }
    }
}

impl ServiceProvider for ModelService {
    fn call(&self, method: &str, args: Value) -> Result<Value, ServiceError> {
        match method {
            "describe" | "value" => Ok(self.describe()),
            "start" => self.start(&args),
            "next" => self.next(&args),
            "cancel" => self.cancel(&args),
            other => Err(ServiceError::new(format!("model has no request `{other}` (requests: describe, start, next, cancel)"))),
        }
    }
}
