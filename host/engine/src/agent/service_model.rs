//! A model provided by a plugin: the `model` service of the composition
//! (for example `llm-openai`), streamed over the services ABI.
//!
//! The protocol (JSON requests through `Service::call`, so the ABI stays
//! as it is): `describe` → `{"provider", "model", "contextWindow"?,
//! "maxTokens"?, "systemPrompt"?}` (the answer's token cap and the system
//! prompt the provider adds, which a compaction counts);
//! `start` `{"messages", "tools", "maxTokens"?, "purpose"?}` → `{"stream":
//! ID}` (`purpose` is `"compaction"` for a compaction's summary, which a
//! provider may report to its API; a provider that knows neither key
//! ignores them); `next` `{"stream", "waitMs"}` →
//! `{"events": [...], "done"}`, waiting at most `waitMs` for the first
//! event; `cancel` `{"stream"}`. The events are assembled by
//! [`Assembler`], whose chunks go to the step's
//! sink as they arrive.

use std::sync::Arc;

use serde_json::{json, Value};

use super::model::{Model, ModelError, ModelRequest, ModelStep, Purpose, StepSink};
use super::stream::{Assembler, Fed};
use crate::context::{RealmKey, ServiceRegistry};

/// The service name a model provider registers.
pub const MODEL_SERVICE: &str = "model";

/// How long one `next` waits for events, in milliseconds: the loop checks
/// for Ctrl-C at least this often.
const NEXT_WAIT_MS: u64 = 100;

/// The `model` service of the root realm, as a [`Model`].
pub struct ServiceModel {
    registry: Arc<ServiceRegistry>,
    realm: RealmKey,
    provider: String,
    name: String,
    context_window: Option<u64>,
    max_output: Option<u64>,
    system_prompt: Option<String>,
    step: u32,
}

impl ServiceModel {
    /// The composition's model, when an entry provides the `model` service
    /// in the root realm; `None` otherwise.
    ///
    /// # Errors
    /// When the provider does not answer `describe`.
    pub fn from_composition(registry: &Arc<ServiceRegistry>) -> Result<Option<ServiceModel>, ModelError> {
        if !registry.provides(&RealmKey::Root, MODEL_SERVICE) {
            return Ok(None);
        }
        let mut model = ServiceModel {
            registry: registry.clone(),
            realm: RealmKey::Root,
            provider: String::new(),
            name: String::new(),
            context_window: None,
            max_output: None,
            system_prompt: None,
            step: 0,
        };
        model.describe()?;
        Ok(Some(model))
    }

    fn call(&self, method: &str, args: &Value) -> Result<Value, ModelError> {
        let text = self
            .registry
            .call(&self.realm, MODEL_SERVICE, method, &args.to_string())
            .map_err(|e| ModelError::Failed(format!("the model service failed ({method}): {e}")))?;
        serde_json::from_str(&text).map_err(|e| ModelError::Failed(format!("the model service answered {method} with text that is not JSON: {e}")))
    }

    /// Asks the provider for its names again (a reloaded provider may
    /// serve another model).
    fn describe(&mut self) -> Result<(), ModelError> {
        let d = self.call("describe", &Value::Null)?;
        self.provider = d.get("provider").and_then(Value::as_str).unwrap_or(MODEL_SERVICE).to_string();
        self.name = d.get("model").and_then(Value::as_str).unwrap_or("unknown").to_string();
        self.context_window = d.get("contextWindow").and_then(Value::as_u64).filter(|n| *n > 0);
        self.max_output = d.get("maxTokens").and_then(Value::as_u64).filter(|n| *n > 0);
        self.system_prompt = d.get("systemPrompt").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        Ok(())
    }

    fn stream(&mut self, stream: &str, sink: &mut dyn StepSink) -> Result<ModelStep, ModelError> {
        let mut assembler = Assembler::new(self.step);
        let mut chunks = Vec::new();
        loop {
            if sink.interrupted() {
                return Err(ModelError::Interrupted);
            }
            let answer = self.call("next", &json!({"stream": stream, "waitMs": NEXT_WAIT_MS}))?;
            let events = answer.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
            for event in &events {
                let fed = assembler.feed(event, &mut chunks).map_err(|e| ModelError::Failed(format!("the model service sent a bad event: {e}")))?;
                for c in chunks.drain(..) {
                    sink.chunk(c)?;
                }
                match fed {
                    Fed::Chunks => {}
                    Fed::Notice(text) => sink.notice(&text),
                    Fed::Failed(_, message) => return Err(ModelError::Failed(message)),
                }
            }
            if answer.get("done").and_then(Value::as_bool).unwrap_or(false) {
                break;
            }
        }
        let step = assembler.end(&mut chunks).map_err(|e| ModelError::Failed(format!("the model service's answer cannot be used: {e}")))?;
        for c in chunks {
            sink.chunk(c)?;
        }
        Ok(step)
    }
}

impl Model for ServiceModel {
    fn provider(&self) -> &str {
        &self.provider
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> Option<u64> {
        self.context_window
    }

    fn system_prompt(&self) -> Option<&str> {
        self.system_prompt.as_deref()
    }

    fn max_output(&self) -> Option<u64> {
        self.max_output
    }

    fn next_step(&mut self, request: &ModelRequest<'_>, sink: &mut dyn StepSink) -> Result<ModelStep, ModelError> {
        self.describe()?;
        self.step += 1;
        let tools: Vec<Value> =
            request.tools.iter().map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters})).collect();
        let mut args = json!({"messages": request.messages, "tools": tools});
        if let Some(cap) = request.max_tokens {
            args["maxTokens"] = json!(cap);
        }
        if request.purpose == Purpose::Compaction {
            args["purpose"] = json!("compaction");
        }
        if let Some(system) = request.system {
            args["system"] = json!(system);
        }
        let started = self.call("start", &args)?;
        let stream = match started.get("stream") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return Err(ModelError::Failed("the model service answered start without a `stream` id".into())),
        };
        let result = self.stream(&stream, sink);
        if result.is_err() {
            // Stop the request (a no-op when it already ended).
            let _ = self.call("cancel", &json!({"stream": stream}));
        }
        result
    }
}
