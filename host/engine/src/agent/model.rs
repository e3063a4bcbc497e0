//! The model interface the agent loop drives.

use serde_json::Value;

use crate::tools::ToolSchema;
use cordis_session::Message;

/// What the model is given for one step.
#[derive(Debug)]
pub struct ModelRequest<'a> {
    /// The history, from `deriveMessages()`.
    pub messages: &'a [Message],
    /// The tools it may call.
    pub tools: &'a [ToolSchema],
    /// What the request is for.
    pub purpose: Purpose,
    /// A cap on the tokens of the answer, when the caller sets one (a
    /// compaction's summary); else the provider's configured limit.
    pub max_tokens: Option<u32>,
    /// A system prompt for this request in place of the provider's own
    /// (an ACP entry's `persona`); `None` keeps the provider's.
    pub system: Option<&'a str>,
}

impl<'a> ModelRequest<'a> {
    /// A conversation step over `messages` with `tools`.
    pub fn step(messages: &'a [Message], tools: &'a [ToolSchema]) -> ModelRequest<'a> {
        ModelRequest { messages, tools, purpose: Purpose::Step, max_tokens: None, system: None }
    }
}

/// What a model request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The next step of the conversation.
    Step,
    /// A summary of older history for a compaction: the last message asks
    /// for it, and the answer's text is the summary (tool calls ignored).
    Compaction,
}

/// One tool call a model asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallRequest {
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The raw argument text, exactly as the model emitted it (possibly not
    /// even JSON).
    pub arguments: String,
}

/// One model response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelStep {
    /// Text for the user.
    pub text: String,
    /// Tools to call, in order. No calls ends the turn.
    pub tool_calls: Vec<ToolCallRequest>,
    /// The model's reasoning (thinking), when it streamed any; recorded as
    /// the message's first `reasoning` block.
    pub reasoning: String,
    /// Token counts the provider reported, in the harness's shape
    /// (`{"inputTokens", "outputTokens", "cacheReadTokens"?,
    /// "reasoningTokens"?}`); recorded on the `assistant/message`.
    pub usage: Option<Value>,
    /// How the answer ended, as the harness names it (`stop`,
    /// `tool-calls`, `length` for the output limit, ...), when the model
    /// said.
    pub finish: Option<String>,
}

/// A model failed to answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// It failed; the message says why (for a provider: the HTTP status or
    /// network fault, and what to do).
    #[error("{0}")]
    Failed(String),
    /// The user interrupted the answer (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
}

/// Where a model sends its answer as it streams: the agent loop records
/// each chunk in the session log (`assistant/chunk`) and shows it.
pub trait StepSink {
    /// One chunk of the answer, in the harness's shape: `{"type":
    /// "block-start" | "reasoning-delta" | "text-delta" | "tool-call-delta" |
    /// "block-end" | "usage" | "finish", ...}`.
    ///
    /// # Errors
    /// [`ModelError::Failed`] when the log refused the chunk; the model
    /// should stop streaming and return the error.
    fn chunk(&mut self, chunk: Value) -> Result<(), ModelError>;
    /// A notice for the terminal that is not part of the answer (a retry).
    fn notice(&mut self, text: &str);
    /// Whether the user asked to stop (Ctrl-C): a streaming model cancels
    /// its request and returns [`ModelError::Interrupted`].
    fn interrupted(&self) -> bool;
}

/// A sink that records nothing and is never interrupted.
pub struct NoSink;

impl StepSink for NoSink {
    fn chunk(&mut self, _chunk: Value) -> Result<(), ModelError> {
        Ok(())
    }
    fn notice(&mut self, _text: &str) {}
    fn interrupted(&self) -> bool {
        false
    }
}

/// A language model, as the agent loop sees it.
pub trait Model {
    /// The provider name recorded in `assistant/message` (`scripted`).
    fn provider(&self) -> &str;
    /// The model name recorded in `assistant/message`.
    fn name(&self) -> &str;
    /// The next step. A streaming model sends the answer's chunks to `sink`
    /// as they arrive; a model that answers at once sends none.
    ///
    /// # Errors
    /// [`ModelError`] when the model cannot answer or was interrupted.
    fn next_step(&mut self, request: &ModelRequest<'_>, sink: &mut dyn StepSink) -> Result<ModelStep, ModelError>;

    /// The context window of the model, in tokens, when known (what a
    /// compaction's threshold is a fraction of).
    fn context_window(&self) -> Option<u64> {
        None
    }

    /// The system prompt the provider sends before the history, when it
    /// has one: a part of every request no compaction shrinks.
    fn system_prompt(&self) -> Option<&str> {
        None
    }

    /// The tokens the provider reserves for an answer (its `max_tokens`),
    /// when known: a request fits only when its input and this fit the
    /// window.
    fn max_output(&self) -> Option<u64> {
        None
    }
}
