//! A scripted model: replays steps from a YAML script file.
//!
//! ```yaml
//! model: plan-and-ship          # optional name recorded in the log
//! prompt: Fix the parser bug    # optional default prompt
//! steps:
//!   - text: "I'll plan first."
//!     calls:
//!       - name: todo_write
//!         arguments: '{"todos": [{"content": "read the code", "status": "in_progress"}]}'
//!   - text: Done.
//! ```
//!
//! Two optional keys serve compaction: `contextWindow: N` is the model's
//! context window in tokens, and `summaries: [TEXT, ...]` answers, in
//! order, the requests for a compaction's summary (an empty text scripts a
//! summary that fails). A script for `cordis session compact` may hold
//! `summaries` alone.
//!
//! A step may also give `reasoning` (the model's thinking, before its
//! text), `pauseMs` (the answer comes after that many milliseconds, or
//! not at all when the turn is interrupted first), `error` (the
//! request fails with that message instead of answering) and `finish`
//! (why the answer ended, as a provider says it: `length` when it was cut
//! at the output limit).
//!
//! `arguments` is the raw text a model would emit, so malformed arguments can
//! be scripted too. A call may give its `id`; otherwise ids are
//! `call_<step>_<index>`. Each step answers one model request; a step with no
//! calls ends the turn.

use std::path::Path;

use serde::Deserialize;

use super::model::{Model, ModelError, ModelRequest, ModelStep, Purpose, StepSink, ToolCallRequest};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
struct Script {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    context_window: Option<u64>,
    #[serde(default)]
    summaries: Vec<String>,
    #[serde(default)]
    steps: Vec<ScriptStep>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
struct ScriptStep {
    #[serde(default)]
    text: String,
    #[serde(default)]
    reasoning: String,
    #[serde(default)]
    pause_ms: u64,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    finish: Option<String>,
    #[serde(default)]
    calls: Vec<ScriptCall>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    arguments: String,
}

/// A model that answers from a script.
#[derive(Debug)]
pub struct ScriptedModel {
    name: String,
    prompt: Option<String>,
    context_window: Option<u64>,
    summaries: std::vec::IntoIter<String>,
    steps: std::vec::IntoIter<Scripted>,
}

/// One scripted answer: the step, how long it takes, or the error instead.
#[derive(Debug)]
struct Scripted {
    step: ModelStep,
    pause: std::time::Duration,
    error: Option<String>,
}

impl ScriptedModel {
    /// Reads a script file.
    ///
    /// # Errors
    /// [`ModelError`] naming the file (and line, for YAML errors).
    pub fn from_file(path: &Path) -> Result<ScriptedModel, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Failed(format!("cannot read script {}: {e}", path.display())))?;
        ScriptedModel::parse(&text, &path.display().to_string())
    }

    /// Parses script text; `file` names it in errors.
    ///
    /// # Errors
    /// [`ModelError`].
    pub fn parse(text: &str, file: &str) -> Result<ScriptedModel, ModelError> {
        let script: Script = serde_yaml::from_str(text).map_err(|e| {
            let at = e.location().map(|l| format!("{}:{}:", l.line(), l.column())).unwrap_or_default();
            let mut message = e.to_string();
            if let Some(cut) = message.find(" at line ") {
                message.truncate(cut);
            }
            ModelError::Failed(format!("{file}:{at} not a valid script: {message}"))
        })?;
        let name = script.model.unwrap_or_else(|| Path::new(file).file_stem().and_then(|s| s.to_str()).unwrap_or("script").to_string());
        let steps: Vec<Scripted> = script
            .steps
            .into_iter()
            .enumerate()
            .map(|(i, s)| Scripted {
                pause: std::time::Duration::from_millis(s.pause_ms),
                error: s.error,
                step: ModelStep {
                    text: s.text,
                    reasoning: s.reasoning,
                    finish: s.finish,
                    tool_calls: s
                        .calls
                        .into_iter()
                        .enumerate()
                        .map(|(j, c)| ToolCallRequest {
                            id: c.id.unwrap_or_else(|| format!("call_{}_{}", i + 1, j + 1)),
                            name: c.name,
                            arguments: c.arguments,
                        })
                        .collect(),
                    ..ModelStep::default()
                },
            })
            .collect();
        if steps.is_empty() && script.summaries.is_empty() {
            return Err(ModelError::Failed(format!("{file}: the script has no steps (and no summaries)")));
        }
        Ok(ScriptedModel {
            name,
            prompt: script.prompt,
            context_window: script.context_window.filter(|n| *n > 0),
            summaries: script.summaries.into_iter(),
            steps: steps.into_iter(),
        })
    }
}

impl ScriptedModel {
    /// The prompt the script was written for (`prompt:`), used when the
    /// command line gives none.
    pub fn prompt(&self) -> Option<&str> {
        self.prompt.as_deref()
    }
}

impl Model for ScriptedModel {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn next_step(&mut self, request: &ModelRequest<'_>, sink: &mut dyn StepSink) -> Result<ModelStep, ModelError> {
        if request.purpose == Purpose::Compaction {
            let text = self.summaries.next().ok_or_else(|| ModelError::Failed("the script has no more summaries".into()))?;
            return Ok(ModelStep { text, finish: Some("stop".into()), ..ModelStep::default() });
        }
        let scripted = self.steps.next().ok_or_else(|| ModelError::Failed("the script has no more steps".into()))?;
        let until = std::time::Instant::now() + scripted.pause;
        while std::time::Instant::now() < until {
            if sink.interrupted() {
                return Err(ModelError::Interrupted);
            }
            std::thread::sleep(std::time::Duration::from_millis(5).min(until.saturating_duration_since(std::time::Instant::now())));
        }
        match scripted.error {
            Some(message) => Err(ModelError::Failed(message)),
            None => Ok(scripted.step),
        }
    }

    fn context_window(&self) -> Option<u64> {
        self.context_window
    }
}
