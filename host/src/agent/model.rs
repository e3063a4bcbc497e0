//! The model interface the agent loop drives.

use crate::session::Message;
use crate::tools::ToolSchema;

/// What the model is given for one step.
#[derive(Debug)]
pub struct ModelRequest<'a> {
    /// The history, from `deriveMessages()`.
    pub messages: &'a [Message],
    /// The tools it may call.
    pub tools: &'a [ToolSchema],
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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelStep {
    /// Text for the user.
    pub text: String,
    /// Tools to call, in order. No calls ends the turn.
    pub tool_calls: Vec<ToolCallRequest>,
}

/// A model failed to answer.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

/// A language model, as the agent loop sees it.
pub trait Model {
    /// The provider name recorded in `assistant/message` (`scripted`).
    fn provider(&self) -> &str;
    /// The model name recorded in `assistant/message`.
    fn name(&self) -> &str;
    /// The next step.
    ///
    /// # Errors
    /// [`ModelError`] when the model cannot answer.
    fn next_step(&mut self, request: &ModelRequest<'_>) -> Result<ModelStep, ModelError>;
}
