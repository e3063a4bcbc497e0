//! The agent loop: one turn of a conversation, recorded in the session log.
//!
//! A turn appends `turn/start`, `user/message`, then for each model step
//! `step/start`, the `assistant/chunk` events of a streamed answer (see
//! [`stream`]), `assistant/message`, and for each tool call `tool/call` →
//! (events the tool appends, e.g. `todo/write`) → `tool/result`, then
//! `step/end`; a step with no tool calls ends the turn with `turn/end`.
//! Event data follows the shapes of the TypeScript harness's logs.

pub mod compaction;
pub mod interrupt;
pub mod model;
pub mod results;
pub mod scripted;
pub mod service_model;
pub mod stream;

use std::sync::Arc;

use serde_json::json;

pub use interrupt::Interrupt;
pub use model::{Model, ModelError, ModelRequest, ModelStep, NoSink, Purpose, StepSink, ToolCallRequest};
pub use scripted::ScriptedModel;
pub use service_model::{ServiceModel, MODEL_SERVICE};

use abi_stable::sabi_trait::TD_Opaque;
use cordis_abi::ffi::ExecContext_TO;

use crate::context::TurnHooks;
use crate::tools::{CallScope, ToolCall, ToolRegistry, ToolResult};
use compaction::{CompactionError, Compactor, TurnBudget};
use cordis_session::{derive_messages, AppendError, Appender, Event, Session};

/// The most model steps one turn may take.
pub const MAX_STEPS_PER_TURN: u32 = 64;

/// Watches a turn as it happens (the CLI prints from these).
pub trait TurnObserver {
    /// An event was appended.
    fn on_event(&mut self, _session: &Session, _event: &Event) {}
    /// A tool call finished.
    fn on_tool_result(&mut self, _call: &ToolCallRequest, _result: &ToolResult) {}
    /// A notice about the model's request that is not part of the answer
    /// (a retry after HTTP 429).
    fn on_notice(&mut self, _text: &str) {}
}

/// Decides whether a tool call may run, asked after its `tool/call` event
/// is appended and before it runs (an editor's permission prompt).
pub trait Approver {
    /// Whether `call` may run; may block until someone answers.
    fn approve(&self, call: &ToolCallRequest) -> Approval;
}

/// An [`Approver`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// The call runs.
    Allowed,
    /// The call does not run; the model gets this text as an error result.
    Rejected(String),
    /// The turn was cancelled while the question was open: the call does
    /// not run, and the turn ends `interrupted`.
    Cancelled,
}

/// An observer that does nothing.
pub struct Quiet;
impl TurnObserver for Quiet {}

/// A turn could not complete.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The log refused an event.
    #[error("the session log refused an event: {0}")]
    Append(#[from] AppendError),
    /// The model failed.
    #[error("the model failed: {0}")]
    Model(#[from] ModelError),
    /// Too many steps.
    #[error("the turn exceeded {MAX_STEPS_PER_TURN} model steps")]
    TooManySteps,
    /// The user interrupted the turn (Ctrl-C).
    #[error("interrupted (Ctrl-C)")]
    Interrupted,
}

/// What a finished turn did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnSummary {
    /// The turn number.
    pub turn: u64,
    /// Model steps taken.
    pub steps: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tool calls that returned an error.
    pub tool_errors: u32,
    /// The model's final text.
    pub final_text: String,
    /// Why the model's last answer ended, as the provider said (`stop`,
    /// `length` when it was cut at the output limit, ...); `None` when
    /// not said.
    pub finish: Option<String>,
}

/// An agent: a session, the tools it may call, and a model.
pub struct Agent<'m> {
    session: Arc<Session>,
    tools: Arc<ToolRegistry>,
    model: &'m mut dyn Model,
    hooks: Option<Arc<TurnHooks>>,
    interrupt: Option<Interrupt>,
    compaction: Option<Arc<Compactor>>,
    approver: Option<&'m dyn Approver>,
    system: Option<String>,
}

impl<'m> Agent<'m> {
    /// An agent over `session`.
    pub fn new(session: Arc<Session>, tools: Arc<ToolRegistry>, model: &'m mut dyn Model) -> Agent<'m> {
        Agent { session, tools, model, hooks: None, interrupt: None, compaction: None, approver: None, system: None }
    }

    /// Keeps the history within the model's context with `compactor`:
    /// checked before each step, and once more when the provider refuses a
    /// request as too long (see [`crate::agent::compaction`]). A failed compaction
    /// is reported as a notice and the turn goes on with the history as it
    /// is.
    pub fn with_compaction(mut self, compactor: Option<Arc<Compactor>>) -> Agent<'m> {
        self.compaction = compactor;
        self
    }

    /// Stops the turn when `interrupt` is set (Ctrl-C): between steps,
    /// between tool calls, and during a streamed answer. The turn then ends
    /// with reason `interrupted`.
    pub fn with_interrupt(mut self, interrupt: Interrupt) -> Agent<'m> {
        self.interrupt = Some(interrupt);
        self
    }

    fn interrupted(&self) -> bool {
        self.interrupt.as_ref().is_some_and(Interrupt::is_set)
    }

    /// Asks `approver` before each tool call runs; a rejected call gets
    /// the approver's text as its error result, a cancelled question ends
    /// the turn `interrupted`.
    pub fn with_approver(mut self, approver: &'m dyn Approver) -> Agent<'m> {
        self.approver = Some(approver);
        self
    }

    /// Sends `system` as the system prompt of every step's request, in
    /// place of the provider's own (see [`ModelRequest::system`]).
    pub fn with_system_prompt(mut self, system: Option<String>) -> Agent<'m> {
        self.system = system;
        self
    }

    /// Runs `hooks` when the model ends a turn (the `agent` host service's
    /// turn-end hooks): a hook may append its plugin's events (a reminder)
    /// and let the model take another step.
    pub fn with_turn_hooks(mut self, hooks: Arc<TurnHooks>) -> Agent<'m> {
        self.hooks = Some(hooks);
        self
    }

    /// Runs the turn-end hooks; returns whether one asked for another step.
    fn turn_end_hooks(&self, turn: u64, step: u32, text: &str, obs: &mut dyn TurnObserver) -> bool {
        let Some(hooks) = &self.hooks else { return false };
        let info = json!({"session": self.session.id(), "turn": turn, "step": step, "text": text}).to_string();
        let mut again = false;
        for (owner, hook) in hooks.all() {
            let before = self.session.len();
            let scope = CallScope { call_id: "", session: Some(&self.session), owner: &owner };
            match hook.turn_end(info.as_str().into(), ExecContext_TO::from_ptr(&scope, TD_Opaque)).into_result() {
                Ok(more) => again |= more,
                Err(e) => tracing::warn!("the turn-end hook of {owner} failed: {e}"),
            }
            let appended: Vec<Event> = self.session.with_events(|all| all[before.min(all.len())..].to_vec());
            for e in &appended {
                obs.on_event(&self.session, e);
            }
        }
        again
    }

    fn append(&self, obs: &mut dyn TurnObserver, kind: &str, data: serde_json::Value) -> Result<Event, AppendError> {
        let event = self.session.append_value(kind, &data, Appender::Host)?;
        obs.on_event(&self.session, &event);
        Ok(event)
    }

    /// Runs one turn for `prompt`. A compaction a crash cut short is first
    /// closed ([`compaction::close_cut_short`]), then a turn left open by a
    /// crash is closed with reason `interrupted`.
    ///
    /// # Errors
    /// [`TurnError`]; the turn is then closed with reason `error` when the
    /// log still accepts events.
    pub fn run_turn(&mut self, prompt: &str, obs: &mut dyn TurnObserver) -> Result<TurnSummary, TurnError> {
        if let Some(cut) = compaction::close_cut_short(&self.session, obs)? {
            obs.on_notice(&cut.describe());
        }
        if self.session.open_turn().is_some() {
            self.close_open_turn(json!({"kind": "interrupted"}), obs)?;
        }
        let turn = self.session.next_turn();
        self.append(obs, "turn/start", json!({"turn": turn}))?;
        let watch =
            self.interrupt.clone().map(|interrupt| interrupt::CancelOnInterrupt::start(interrupt, self.tools.clone(), self.session.id().to_string()));
        let result = self.turn_body(turn, prompt, obs);
        drop(watch);
        let reason = match &result {
            Ok(_) => json!({"kind": "completed"}),
            Err(TurnError::Interrupted) => json!({"kind": "interrupted"}),
            Err(e) => json!({"kind": "error", "message": e.to_string()}),
        };
        self.close_open_turn(reason, obs)?;
        result
    }

    /// Closes the open turn (if any) the way the log's structure rules
    /// require: every call of the open step without a result gets an error
    /// result (a model API refuses a call with no result), the step ends,
    /// then the turn ends with `reason`. A call the log shows started
    /// (`tool/call`) is answered "outcome unknown" (`TOOL_OUTCOME_UNKNOWN`);
    /// one only the assistant message names, "not started"
    /// (`TOOL_NOT_STARTED`), as the harness's recovery does.
    fn close_open_turn(&self, reason: serde_json::Value, obs: &mut dyn TurnObserver) -> Result<(), AppendError> {
        let Some(turn) = self.session.open_turn() else { return Ok(()) };
        close_open_step(&self.session, obs)?;
        self.append(obs, "turn/end", json!({"turn": turn, "reason": reason}))?;
        Ok(())
    }

    fn turn_body(&mut self, turn: u64, prompt: &str, obs: &mut dyn TurnObserver) -> Result<TurnSummary, TurnError> {
        self.append(
            obs,
            "user/message",
            json!({"content": [{"type": "text", "text": prompt}], "source": {"kind": "user"}, "role": "user", "id": new_id()}),
        )?;
        let mut summary = TurnSummary { turn, steps: 0, tool_calls: 0, tool_errors: 0, final_text: String::new(), finish: None };
        let mut budget = TurnBudget::default();
        loop {
            if summary.steps >= MAX_STEPS_PER_TURN {
                return Err(TurnError::TooManySteps);
            }
            if self.interrupted() {
                return Err(TurnError::Interrupted);
            }
            summary.steps += 1;
            let step = summary.steps;
            let schemas = self.tools.schemas();
            if let Some(compactor) = self.compaction.clone() {
                let interrupt = self.interrupt.clone();
                let interrupted = move || interrupt.as_ref().is_some_and(Interrupt::is_set);
                match compactor.before_step(&self.session, &mut *self.model, &schemas, &mut budget, &interrupted, obs) {
                    Ok(Some(outcome)) => obs.on_notice(&outcome.describe()),
                    Ok(None) => {}
                    Err(CompactionError::Append(e)) => return Err(TurnError::Append(e)),
                    Err(CompactionError::Interrupted) => return Err(TurnError::Interrupted),
                    Err(e) => obs.on_notice(&format!("compaction: {e}")),
                }
            }
            self.append(obs, "step/start", json!({"turn": turn, "step": step}))?;
            let mut overflows = 0;
            let answer = loop {
                let mut messages = self.session.with_events(derive_messages);
                // The log keeps each result whole; the model gets a bounded part.
                results::bound_results(&mut messages, results::result_cap(self.model.context_window()));
                let mut sink = LogSink { session: &self.session, obs: &mut *obs, turn, step, interrupt: self.interrupt.as_ref(), refused: None };
                let result =
                    self.model.next_step(&ModelRequest { system: self.system.as_deref(), ..ModelRequest::step(&messages, &schemas) }, &mut sink);
                let refused = sink.refused.take();
                match result {
                    Ok(answer) => break answer,
                    Err(e) => {
                        if let Some(refused) = refused {
                            return Err(TurnError::Append(refused));
                        }
                        if let (Some(compactor), ModelError::Failed(text)) = (self.compaction.clone(), &e) {
                            if context_overflow(text) && overflows < compactor.overflow_retries(&*self.model) {
                                overflows += 1;
                                let interrupt = self.interrupt.clone();
                                let interrupted = move || interrupt.as_ref().is_some_and(Interrupt::is_set);
                                match compactor.compact_now(&self.session, &mut *self.model, &schemas, Some(&mut budget), &interrupted, obs) {
                                    Ok(Ok(outcome)) => {
                                        obs.on_notice(&format!("the request was too long for the model's context; {}", outcome.describe()));
                                        continue;
                                    }
                                    Ok(Err(skip)) => obs.on_notice(&format!(
                                        "the request was too long for the model's context, and nothing can be compacted: {skip}"
                                    )),
                                    Err(CompactionError::Append(e)) => return Err(TurnError::Append(e)),
                                    Err(CompactionError::Interrupted) => return Err(TurnError::Interrupted),
                                    Err(c) => obs.on_notice(&format!("compaction after a context overflow: {c}")),
                                }
                            }
                        }
                        return Err(match e {
                            ModelError::Interrupted => TurnError::Interrupted,
                            other => TurnError::Model(other),
                        });
                    }
                }
            };
            let mut content = Vec::new();
            if !answer.reasoning.is_empty() {
                content.push(json!({"type": "reasoning", "text": answer.reasoning}));
            }
            if !answer.text.is_empty() {
                content.push(json!({"type": "text", "text": answer.text}));
            }
            for call in &answer.tool_calls {
                content.push(json!({"type": "tool-call", "id": call.id, "name": call.name, "arguments": call.arguments}));
            }
            let mut data = json!({"turn": turn, "step": step, "message": {
                "role": "assistant",
                "content": content,
                "source": {"kind": "model", "provider": self.model.provider(), "model": self.model.name()},
                "id": new_id(),
            }});
            if let Some(usage) = &answer.usage {
                data["usage"] = usage.clone();
            }
            self.append(obs, "assistant/message", data)?;
            for call in &answer.tool_calls {
                // Calls not started when Ctrl-C comes get "not started"
                // results as the turn is closed.
                if self.interrupted() {
                    return Err(TurnError::Interrupted);
                }
                let at_limit = answer.finish.as_deref() == Some("length");
                // A call cut off mid-arguments is answered without running.
                let result = match cut_off(call, at_limit) {
                    Some(cut) => record_call(&self.session, turn, step, call, obs, || cut)?,
                    None => match self.approver {
                        None => call_tool(&self.session, &self.tools, turn, step, call, obs)?,
                        Some(approver) => {
                            let tools = &self.tools;
                            let session = &self.session;
                            record_call(session, turn, step, call, obs, || match approver.approve(call) {
                                Approval::Allowed => {
                                    tools.execute(&ToolCall { id: &call.id, name: &call.name, arguments: &call.arguments }, Some(session))
                                }
                                Approval::Rejected(text) => ToolResult::error(text),
                                Approval::Cancelled => {
                                    ToolResult::error(format!("the call to {} was cancelled before it was approved; nothing was run", call.name))
                                }
                            })?
                        }
                    },
                };
                summary.tool_calls += 1;
                if result.is_error {
                    summary.tool_errors += 1;
                }
            }
            self.append(obs, "step/end", json!({"turn": turn, "step": step}))?;
            if answer.tool_calls.is_empty() {
                // A hook may ask for another step only while one is left.
                if summary.steps < MAX_STEPS_PER_TURN && self.turn_end_hooks(turn, step, &answer.text, obs) {
                    continue;
                }
                summary.final_text = answer.text;
                summary.finish = answer.finish;
                return Ok(summary);
            }
        }
    }
}

/// Whether a provider's error says the request was too long for the
/// model's context (OpenAI's and DeepSeek's wordings and codes).
fn context_overflow(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("context_length_exceeded") || m.contains("maximum context length") || m.contains("context window") && m.contains("exceed")
}

/// Records a streamed answer's chunks as `assistant/chunk` events of the
/// open step, and shows them.
struct LogSink<'a> {
    session: &'a Arc<Session>,
    obs: &'a mut dyn TurnObserver,
    turn: u64,
    step: u32,
    interrupt: Option<&'a Interrupt>,
    /// The log refused a chunk: the turn fails with this.
    refused: Option<AppendError>,
}

impl StepSink for LogSink<'_> {
    fn chunk(&mut self, chunk: serde_json::Value) -> Result<(), ModelError> {
        let data = json!({"turn": self.turn, "step": self.step, "chunk": chunk});
        match self.session.append_value(cordis_session::event::core::ASSISTANT_CHUNK, &data, Appender::Host) {
            Ok(event) => {
                self.obs.on_event(self.session, &event);
                Ok(())
            }
            Err(e) => {
                let message = format!("the session log refused a chunk: {e}");
                self.refused = Some(e);
                Err(ModelError::Failed(message))
            }
        }
    }

    fn notice(&mut self, text: &str) {
        self.obs.on_notice(text);
    }

    fn interrupted(&self) -> bool {
        self.interrupt.is_some_and(Interrupt::is_set)
    }
}

/// The result for a model's call whose argument text stops before its
/// JSON is complete (the answer was cut off: at the output limit when
/// `at_limit`, the finish reason `length`): the call is not run, and the
/// model is told so, to send it again whole. `None` for any other call
/// (complete JSON, or JSON that is wrong, which the tool reports).
pub fn cut_off(call: &ToolCallRequest, at_limit: bool) -> Option<ToolResult> {
    let eof = match serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments) {
        Ok(_) => false,
        Err(e) => e.is_eof(),
    };
    if !eof {
        return None;
    }
    let why = if at_limit { "was cut off at the model's output limit" } else { "was cut off" };
    Some(ToolResult::error(format!(
        "the call to {} {why} before its arguments were complete ({} characters arrived); nothing was run. Send the call again, whole{}",
        call.name,
        call.arguments.chars().count(),
        if at_limit { ", shorter if it does not fit" } else { "" }
    )))
}

/// The `tool/result` event's data for `result`.
fn result_event(turn: u64, step: u32, call: &ToolCallRequest, result: &ToolResult) -> serde_json::Value {
    let mut part =
        json!({"type": "tool-result", "toolCallId": call.id, "content": [{"type": "text", "text": result.text}], "isError": result.is_error});
    // The structured value of a tool source's tool (an MCP tool's
    // `structuredContent`) is kept with the text, so an export or a
    // replay of the log has it; a plugin's own tools record theirs in
    // their events, and their results stay as the harness writes them.
    if result.value_in_log {
        if let Ok(Some(value)) = result.parsed_value() {
            part["structuredContent"] = value;
        }
    }
    json!({"turn": turn, "step": step, "message": {
        "source": {"kind": "tool", "callId": call.id},
        "content": [part],
        "role": "user",
        "id": new_id(),
    }})
}

/// Runs one tool call inside an open turn, recording it: `tool/call`, the
/// events the tool appends (e.g. `todo/write`), then `tool/result`.
///
/// # Errors
/// [`AppendError`] when the log refuses the call or result event.
pub fn call_tool(
    session: &Arc<Session>,
    tools: &ToolRegistry,
    turn: u64,
    step: u32,
    call: &ToolCallRequest,
    obs: &mut dyn TurnObserver,
) -> Result<ToolResult, AppendError> {
    record_call(session, turn, step, call, obs, || {
        tools.execute(&ToolCall { id: &call.id, name: &call.name, arguments: &call.arguments }, Some(session))
    })
}

/// Records one call of an open turn around `run`, which gives its result:
/// `tool/call`, the events `run` appends (reported after it, in order),
/// then `tool/result`.
///
/// # Errors
/// [`AppendError`] when the log refuses the call or result event.
fn record_call(
    session: &Arc<Session>,
    turn: u64,
    step: u32,
    call: &ToolCallRequest,
    obs: &mut dyn TurnObserver,
    run: impl FnOnce() -> ToolResult,
) -> Result<ToolResult, AppendError> {
    let record = |obs: &mut dyn TurnObserver, kind: &str, data: serde_json::Value| -> Result<(), AppendError> {
        let event = session.append_value(kind, &data, Appender::Host)?;
        obs.on_event(session, &event);
        Ok(())
    };
    record(obs, "tool/call", json!({"turn": turn, "step": step, "callId": call.id, "name": call.name, "arguments": call.arguments}))?;
    let before = session.len();
    let result = run();
    // Events the tool appended (e.g. todo/write) are reported after the
    // fact, in order.
    let appended: Vec<Event> = session.with_events(|all| all[before.min(all.len())..].to_vec());
    for e in &appended {
        obs.on_event(session, e);
    }
    obs.on_tool_result(call, &result);
    record(obs, "tool/result", result_event(turn, step, call, &result))?;
    Ok(result)
}

/// Ends the open step of `session`'s open turn, if a step is open (a
/// process that stopped mid-step leaves one): every call of the step
/// without a result gets an error result first ("outcome unknown" when the
/// log shows it started with `tool/call`, `TOOL_OUTCOME_UNKNOWN`; "not
/// started" when only the assistant message names it, `TOOL_NOT_STARTED`),
/// as the harness's recovery does, then `step/end`.
///
/// # Errors
/// [`AppendError`] when the log refuses an event.
pub fn close_open_step(session: &Arc<Session>, obs: &mut dyn TurnObserver) -> Result<(), AppendError> {
    let Some(turn) = session.open_turn() else { return Ok(()) };
    let append = |obs: &mut dyn TurnObserver, kind: &str, data: serde_json::Value| -> Result<Event, AppendError> {
        let event = session.append_value(kind, &data, Appender::Host)?;
        obs.on_event(session, &event);
        Ok(event)
    };
    if let Some(step) = session.open_step() {
        let unanswered: Vec<(String, bool)> = session.with_events(|events| {
            let start = events.iter().rposition(|e| e.kind == "step/start").unwrap_or(0);
            let mut open: Vec<(String, bool)> = Vec::new();
            for e in &events[start..] {
                let data = e.data_value();
                match e.kind.as_str() {
                    "assistant/message" => {
                        for block in data["message"]["content"].as_array().into_iter().flatten() {
                            if block["type"] == "tool-call" {
                                if let Some(id) = block["id"].as_str() {
                                    open.push((id.to_string(), false));
                                }
                            }
                        }
                    }
                    "tool/call" => {
                        let id = data["callId"].as_str().unwrap_or_default();
                        match open.iter_mut().find(|(c, _)| c == id) {
                            Some(entry) => entry.1 = true,
                            None => open.push((id.to_string(), true)),
                        }
                    }
                    "tool/result" => {
                        let id = &data["message"]["source"]["callId"];
                        open.retain(|(c, _)| id.as_str() != Some(c.as_str()));
                    }
                    _ => {}
                }
            }
            open
        });
        for (call_id, started) in unanswered {
            let (text, error) = if started {
                (
                    "Error: the call was interrupted: the host stopped before its result was recorded, so its outcome is unknown",
                    json!({"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}),
                )
            } else {
                (
                    "Error: the call was interrupted before it started; call it again if it is still needed",
                    json!({"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}),
                )
            };
            append(
                obs,
                "tool/result",
                json!({"turn": turn, "step": step, "message": {
                    "source": {"kind": "tool", "callId": call_id},
                    "content": [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}], "isError": true}],
                    "role": "user",
                    "id": new_id(),
                }, "error": error}),
            )?;
        }
        append(obs, "step/end", json!({"turn": turn, "step": step}))?;
    }
    Ok(())
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
