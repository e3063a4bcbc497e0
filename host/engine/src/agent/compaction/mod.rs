//! Compaction: keeping a long session's history within the model's context.
//!
//! Before each model step the agent loop asks [`Compactor::before_step`]
//! whether the request it is about to send would pass the threshold (a
//! fraction of the model's context window). If so, the oldest part of the
//! history is summarized by the model and replaced, in the log, by one
//! user-side message holding the summary; the most recent part stays
//! verbatim. The log records it as the TypeScript harness does, so its
//! store and reader see the same history:
//!
//! 1. `compaction/start` `{compactionId, turn}` (`turn` null between turns);
//! 2. `compaction/summary` `{compactionId, summary, shadowedRange,
//!    shadowedSeqs, shadowedTokenCount, provider, model, maxTokens,
//!    usage?}`;
//! 3. `user/message` with `surfaceOp` `{"op": "replace", "start", "end"}`
//!    and `sourceEventSeqs` citing the start, the summary and every
//!    replaced event: the summary, framed between `<compacted-summary>`
//!    tags;
//! 4. one `user/message` per projection whose plugin contributes to the
//!    history after a compaction (the `compaction-context` extension of
//!    cordis-abi 1.2): the todo family's standing plan, verbatim, so a plan
//!    never depends on what the summary says of it;
//! 5. `compaction/end` `{compactionId, turn}`, with `error` when the
//!    compaction failed and the history was left as it was.
//!
//! **Token counts.** The size of the next request is the provider's
//! reported usage where there is one (the last `assistant/message`'s
//! `inputTokens + outputTokens`, when no compaction came after it) plus an
//! estimate of what came after; else the estimate alone: a message is
//! `ceil(characters / 4) + 4` tokens, the tool schemas `ceil(characters of
//! their JSON / 4)`. The estimate is a heuristic, not a tokenizer.

pub mod config;
pub mod recover;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

pub use config::{CompactionConfig, Resolved, Retain};
pub use recover::{close_cut_short, CutShort, CUT_SHORT};

use super::{Model, ModelError, ModelRequest, Purpose, StepSink, TurnObserver};
use crate::tools::ToolSchema;
use cordis_session::event::core;
use cordis_session::event::SurfaceOp;
use cordis_session::{surface_nodes, unended_compaction, well_formed_history, AppendError, Appender, Event, Message, Session};
use cordis_sync::LockExt;

/// The tags around a summary in the message that replaces the history it
/// condenses; a later compaction recognizes an earlier summary by them.
pub const SUMMARY_OPEN: &str = "<compacted-summary>";
/// See [`SUMMARY_OPEN`].
pub const SUMMARY_CLOSE: &str = "</compacted-summary>";

/// What the model reads before a summary that replaced older history.
pub const CHECKPOINT_PREFACE: &str = "The conversation before this point was condensed into the summary below to save context. \
Take it as settled background, do not repeat it, and carry on from the messages that follow without mentioning this note.";

/// The last message of a request for a summary.
pub const SUMMARY_REQUEST: &str = "Stop working on the task for a moment and write a checkpoint of the conversation above, \
so that the work can go on from it alone. Use these Markdown sections, in this order, with short bullet points, \
and write (none) under a section with nothing in it:\n\n\
## Goal\n- what the user asked for and how the request changed; quote exact wording where it matters\n\n\
## Context\n- technologies, conventions and decisions in play, with their reasons\n\n\
## Files and code\n- exact paths and identifiers, what changed and why\n\n\
## Problems\n- errors met and how each was resolved\n\n\
## Open work\n- what was asked and is not done yet\n\n\
## Current step\n- what was being done at this point, and the next action\n\n\
Keep exact paths, commands, error messages, names and numbers. \
If the conversation already holds a <compacted-summary> block, merge it: keep what is still true, drop what is stale. \
Write only the checkpoint: no tool calls, no remarks about this request.";

/// A compaction could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// The model's context window is unknown, so no threshold applies.
    #[error(
        "no context window is known for {provider}/{model}; give the model's provider a context window (llm-openai: `contextWindow`; a script: `contextWindow:`)"
    )]
    NoContextWindow {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
    },
    /// A compaction of this session is already under way (its
    /// `compaction/start` has no `compaction/end`).
    #[error("a compaction of this session is already under way (compaction/start at seq {0} has no compaction/end)")]
    Busy(u64),
    /// Every try at a summary failed; the history was left as it was.
    #[error("no usable summary after {tries} tries ({last}); the history is left as it was")]
    Summary {
        /// How many tries were made.
        tries: u32,
        /// Why the last one failed.
        last: String,
    },
    /// The history was compacted, and the next request is still over the
    /// threshold after every try.
    #[error("{} — and the next request is still over the threshold of {threshold} tokens", outcome.describe())]
    StillAbove {
        /// What the compactions did, together.
        outcome: Box<Outcome>,
        /// The threshold, in tokens.
        threshold: u64,
    },
    /// Ctrl-C stopped the summary request; the compaction was closed as
    /// interrupted and the history left as it was.
    #[error("interrupted (Ctrl-C) while the summary was requested; the history is left as it was")]
    Interrupted,
    /// The compaction's config breaks a rule.
    #[error("{0}")]
    Config(String),
    /// The log refused an event.
    #[error("the session log refused an event: {0}")]
    Append(#[from] AppendError),
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The compaction's id.
    pub compaction_id: String,
    /// The first and last seq of the replaced history.
    pub range: (u64, u64),
    /// How many history entries were replaced.
    pub replaced: usize,
    /// Their estimated tokens.
    pub replaced_tokens: u64,
    /// The estimated tokens of the message that replaced them.
    pub summary_tokens: u64,
    /// The plugins whose context was carried over (`tool-todo`).
    pub carried: Vec<String>,
    /// Estimated tokens of the next request, before and after.
    pub request_tokens: (u64, u64),
}

impl Outcome {
    /// One line for a terminal.
    pub fn describe(&self) -> String {
        let carried = if self.carried.is_empty() { String::new() } else { format!("; carried over: {}", self.carried.join(", ")) };
        format!(
            "compacted {} history entries (~{} tokens, from seq {} to seq {} in history order) into a summary of ~{} tokens; next request ~{} → ~{} tokens{carried}",
            self.replaced, self.replaced_tokens, self.range.0, self.range.1, self.summary_tokens, self.request_tokens.0, self.request_tokens.1
        )
    }

    /// Folds a later compaction of the same step into this one.
    fn merge(&mut self, later: &Outcome) {
        if later.compaction_id == self.compaction_id {
            return;
        }
        self.replaced += later.replaced;
        self.replaced_tokens += later.replaced_tokens;
        self.summary_tokens = later.summary_tokens;
        self.request_tokens.1 = later.request_tokens.1;
        self.range.1 = later.range.1;
        for p in &later.carried {
            if !self.carried.contains(p) {
                self.carried.push(p.clone());
            }
        }
    }
}

/// The host's compaction, as the composition configured it.
#[derive(Debug)]
pub struct Compactor {
    config: CompactionConfig,
    /// Models already warned about (no context window), by `provider/model`.
    warned: Mutex<HashSet<String>>,
    /// The sessions this compactor is compacting now, by id: a
    /// `compaction/start` without an end in any other session was cut
    /// short.
    compacting: Mutex<HashSet<String>>,
}

/// Marks a session as being compacted by this process until dropped.
struct Compacting<'a> {
    set: &'a Mutex<HashSet<String>>,
    id: String,
}

impl Drop for Compacting<'_> {
    fn drop(&mut self) {
        self.set.lock_or_recover().remove(&self.id);
    }
}

impl Compactor {
    /// A compactor with `config` (already checked).
    pub fn new(config: CompactionConfig) -> Compactor {
        Compactor { config, warned: Mutex::new(HashSet::new()), compacting: Mutex::new(HashSet::new()) }
    }

    /// The config.
    pub fn config(&self) -> &CompactionConfig {
        &self.config
    }

    /// The check the agent loop makes before each step of an open turn:
    /// compacts when the next request would pass the threshold (and `auto`
    /// is on). `Ok(None)` when nothing was needed. A model without a known
    /// context window is reported once, then skipped silently.
    ///
    /// # Errors
    /// [`CompactionError`]: the turn goes on with the history as it is.
    pub fn before_step(
        &self,
        session: &Arc<Session>,
        model: &mut dyn Model,
        tools: &[ToolSchema],
        interrupted: &dyn Fn() -> bool,
        obs: &mut dyn TurnObserver,
    ) -> Result<Option<Outcome>, CompactionError> {
        if !self.config.auto() {
            return Ok(None);
        }
        let target = format!("{}/{}", model.provider(), model.name());
        let Some(window) = model.context_window() else {
            if self.warned.lock_or_recover().insert(target) {
                return Err(CompactionError::NoContextWindow { provider: model.provider().into(), model: model.name().into() });
            }
            return Ok(None);
        };
        let policy = self.policy(model)?;
        let threshold = scaled(window, policy.threshold_ratio);
        let before = session.with_events(|events| request_tokens(events, tools));
        if before < threshold {
            return Ok(None);
        }
        let retain = match policy.retain {
            Retain::Ratio(r) => scaled(window, r),
            Retain::Tokens(t) => t,
        };
        // Up to 1 + compactionRetries compactions: a failed summary, or a
        // history still over the threshold, calls for another.
        let tries = policy.compaction_retries.saturating_add(1);
        let mut done: Option<Outcome> = None;
        let mut failed = None;
        for _ in 0..tries {
            // Ctrl-C stops the tries; the turn then ends as interrupted.
            if interrupted() {
                break;
            }
            match self.bracket(session, model, tools, &policy, retain, interrupted, obs) {
                Ok(Some(outcome)) => {
                    let after = outcome.request_tokens.1;
                    let first = done.get_or_insert_with(|| outcome.clone());
                    first.merge(&outcome);
                    if after < threshold {
                        return Ok(done);
                    }
                }
                Ok(None) => break,
                Err(CompactionError::Summary { last, .. }) => failed = Some(last),
                Err(e) => return Err(e),
            }
        }
        match (done, failed) {
            (Some(outcome), _) => Err(CompactionError::StillAbove { outcome: Box::new(outcome), threshold }),
            (None, Some(last)) => Err(CompactionError::Summary { tries, last }),
            (None, None) => Ok(None),
        }
    }

    /// How many times one step may be retried after the provider refused
    /// it as too long (each retry after a [`Compactor::compact_now`]).
    pub fn overflow_retries(&self, model: &dyn Model) -> u32 {
        self.config.resolve_policy(Some((model.provider(), model.name()))).map_or(0, |p| p.max_overflow_retries)
    }

    /// A compaction asked for by hand (`cordis session compact`, the dev
    /// console's `compact`), or after the provider refused a request as too
    /// long for its context: everything but the newest history entry is
    /// summarized, whatever the threshold; between turns the events carry
    /// `turn: null`. `Ok(None)` when there is nothing to replace.
    ///
    /// # Errors
    /// [`CompactionError`].
    pub fn compact_now(
        &self,
        session: &Arc<Session>,
        model: &mut dyn Model,
        tools: &[ToolSchema],
        interrupted: &dyn Fn() -> bool,
        obs: &mut dyn TurnObserver,
    ) -> Result<Option<Outcome>, CompactionError> {
        let policy = self.policy(model)?;
        self.until_summarized(session, model, tools, &policy, interrupted, obs)
    }

    /// Compacts everything but the newest entry, trying again after a
    /// failed summary up to `compactionRetries` times.
    fn until_summarized(
        &self,
        session: &Arc<Session>,
        model: &mut dyn Model,
        tools: &[ToolSchema],
        policy: &Resolved,
        interrupted: &dyn Fn() -> bool,
        obs: &mut dyn TurnObserver,
    ) -> Result<Option<Outcome>, CompactionError> {
        let tries = policy.compaction_retries.saturating_add(1);
        let mut last = String::new();
        for _ in 0..tries {
            match self.bracket(session, model, tools, policy, 0, interrupted, obs) {
                Err(CompactionError::Summary { last: why, .. }) => last = why,
                other => return other,
            }
        }
        Err(CompactionError::Summary { tries, last })
    }

    fn policy(&self, model: &dyn Model) -> Result<Resolved, CompactionError> {
        self.config.resolve_policy(Some((model.provider(), model.name()))).map_err(CompactionError::Config)
    }

    /// One compaction, bracketed by `compaction/start` and `compaction/end`
    /// in the log, keeping at least `retain` tokens of recent history. A
    /// compaction of the session that another process cut short is closed
    /// first ([`close_cut_short`]).
    #[allow(clippy::too_many_arguments)]
    fn bracket(
        &self,
        session: &Arc<Session>,
        model: &mut dyn Model,
        tools: &[ToolSchema],
        policy: &Resolved,
        retain: u64,
        interrupted: &dyn Fn() -> bool,
        obs: &mut dyn TurnObserver,
    ) -> Result<Option<Outcome>, CompactionError> {
        let _compacting = {
            let mut set = self.compacting.lock_or_recover();
            if !set.insert(session.id().to_string()) {
                let open = session.with_events(|events| unended_compaction(events).map_or(0, |e| e.seq));
                return Err(CompactionError::Busy(open));
            }
            Compacting { set: &self.compacting, id: session.id().to_string() }
        };
        if let Some(cut) = close_cut_short(session, obs)? {
            obs.on_notice(&cut.describe());
        }
        let (nodes, before) = session.with_events(|events| (surface_nodes(events), request_tokens(events, tools)));
        let Some(keep_from) = keep_from(&nodes, retain) else { return Ok(None) };
        let region: Vec<(u64, Option<Message>)> = nodes[..keep_from].to_vec();
        let range = (region[0].0, region[keep_from - 1].0);
        let replaced_tokens: u64 = region.iter().map(|(_, m)| m.as_ref().map_or(0, message_tokens)).sum();
        let shadowed: Vec<u64> = region.iter().map(|(s, _)| *s).collect();
        let mut messages = well_formed_history(region);
        messages.push(Message::User { text: SUMMARY_REQUEST.to_string() });

        // What the plugins carry over comes back after the summary: a
        // compaction must shrink the history by more than the summary's
        // framing and that, or it is not worth a model call.
        let carried = contributions(session, obs);
        let carried_tokens: u64 = carried.iter().map(|c| c.tokens).sum();
        let framing = message_tokens(&framed(""));
        if replaced_tokens <= framing + carried_tokens {
            return Ok(None);
        }

        let turn = session.open_turn();
        let compaction_id = uuid::Uuid::new_v4().to_string();
        let lifecycle = json!({"compactionId": compaction_id, "turn": turn});
        let start = append(session, obs, core::COMPACTION_START, &lifecycle)?;

        let summary = summarize(model, &messages, policy.max_tokens, replaced_tokens.saturating_sub(carried_tokens), interrupted);
        let (text, usage, summary_tokens) = match summary {
            Ok(s) => s,
            Err(Failed::Interrupted) => {
                let mut end = lifecycle.clone();
                end["error"] =
                    json!({"message": "interrupted (Ctrl-C) while the summary was requested; the history is as it was", "kind": "interrupted"});
                append(session, obs, core::COMPACTION_END, &end)?;
                return Err(CompactionError::Interrupted);
            }
            Err(Failed::Unusable(last)) => {
                let mut end = lifecycle.clone();
                end["error"] = json!({"message": last});
                append(session, obs, core::COMPACTION_END, &end)?;
                return Err(CompactionError::Summary { tries: 1, last });
            }
        };

        let mut record = json!({
            "compactionId": compaction_id,
            "summary": [{"type": "text", "text": text}],
            "shadowedRange": {"start": range.0, "end": range.1},
            "shadowedSeqs": shadowed,
            "shadowedTokenCount": replaced_tokens,
            "provider": model.provider(),
            "model": model.name(),
            "maxTokens": policy.max_tokens,
        });
        if let Some(usage) = usage {
            record["usage"] = usage;
        }
        let summary_event = append(session, obs, core::COMPACTION_SUMMARY, &record)?;
        let mut sources = vec![start.seq, summary_event.seq];
        sources.extend(&shadowed);
        let checkpoint = json!({
            "role": "user",
            "content": [
                {"type": "text", "text": format!("{CHECKPOINT_PREFACE}\n\n{SUMMARY_OPEN}")},
                {"type": "text", "text": text},
                {"type": "text", "text": SUMMARY_CLOSE},
            ],
            "source": {"kind": "plugin", "plugin": "compact", "compactionId": compaction_id},
            "id": uuid::Uuid::new_v4().to_string(),
        });
        let replaced = session.append_surface(core::USER_MESSAGE, &checkpoint, SurfaceOp::Replace { start: range.0, end: range.1 }, sources)?;
        obs.on_event(session, &replaced);

        let carried = carry_over(session, carried, &compaction_id, obs)?;
        append(session, obs, core::COMPACTION_END, &lifecycle)?;
        let after = session.with_events(|events| request_tokens(events, tools));
        Ok(Some(Outcome {
            compaction_id,
            range,
            replaced: shadowed.len(),
            replaced_tokens,
            summary_tokens,
            carried,
            request_tokens: (before, after),
        }))
    }
}

pub(crate) fn append(session: &Arc<Session>, obs: &mut dyn TurnObserver, kind: &str, data: &Value) -> Result<Event, AppendError> {
    let event = session.append_value(kind, data, Appender::Host)?;
    obs.on_event(session, &event);
    Ok(event)
}

/// Why a summary request gave no summary.
enum Failed {
    /// Ctrl-C stopped it.
    Interrupted,
    /// The model failed, or its answer is not a usable summary; why.
    Unusable(String),
}

/// The sink of a summary request: records nothing, and stops the request
/// on Ctrl-C.
struct SummarySink<'a> {
    interrupted: &'a dyn Fn() -> bool,
}

impl StepSink for SummarySink<'_> {
    fn chunk(&mut self, _chunk: Value) -> Result<(), ModelError> {
        Ok(())
    }
    fn notice(&mut self, _text: &str) {}
    fn interrupted(&self) -> bool {
        (self.interrupted)()
    }
}

/// Asks the model for a summary of `messages` (the region and the request
/// for it), with no tools offered: the text, the provider's usage, and the
/// framed message's estimated tokens.
fn summarize(
    model: &mut dyn Model,
    messages: &[Message],
    max_tokens: u32,
    replaced: u64,
    interrupted: &dyn Fn() -> bool,
) -> Result<(String, Option<Value>, u64), Failed> {
    let request = ModelRequest { messages, tools: &[], purpose: Purpose::Compaction, max_tokens: Some(max_tokens) };
    let answer = match model.next_step(&request, &mut SummarySink { interrupted }) {
        Ok(answer) => answer,
        Err(ModelError::Interrupted) => return Err(Failed::Interrupted),
        Err(e) if interrupted() => {
            tracing::debug!("the summary request failed after Ctrl-C: {e}");
            return Err(Failed::Interrupted);
        }
        Err(e) => return Err(Failed::Unusable(e.to_string())),
    };
    if answer.finish.as_deref() == Some("length") {
        return Err(Failed::Unusable(format!("the summary was cut off at maxTokens ({max_tokens})")));
    }
    let text = answer.text.trim().to_string();
    if text.is_empty() {
        let why =
            if answer.reasoning.trim().is_empty() { "the model gave no summary text" } else { "the model gave reasoning only, no summary text" };
        return Err(Failed::Unusable(why.into()));
    }
    let tokens = message_tokens(&framed(&text));
    if tokens >= replaced {
        return Err(Failed::Unusable(format!(
            "the summary (~{tokens} tokens) is not smaller than what it replaces, less what is carried over after it (~{replaced} tokens)"
        )));
    }
    Ok((text, answer.usage, tokens))
}

/// The summary as the model reads it, framed.
fn framed(text: &str) -> Message {
    Message::User { text: format!("{CHECKPOINT_PREFACE}\n\n{SUMMARY_OPEN}\n{text}\n{SUMMARY_CLOSE}") }
}

/// What one projection's plugin carries over a compaction.
pub(crate) struct Contribution {
    plugin: String,
    entry: String,
    pub(crate) projection: String,
    blocks: Vec<Value>,
    /// The event its state stands on (the last one it folded).
    source: Option<u64>,
    tokens: u64,
}

/// Asks each projection's plugin what the model must still see of its
/// state after the compaction (the standing plan).
pub(crate) fn contributions(session: &Arc<Session>, obs: &mut dyn TurnObserver) -> Vec<Contribution> {
    let mut out = Vec::new();
    for (projection, state) in session.states() {
        let blocks = match projection.compaction_context(&state) {
            Ok(Some(blocks)) => blocks,
            Ok(None) => continue,
            Err(e) => {
                obs.on_notice(&format!(
                    "compaction: projection {} of {}: its context after the compaction is left out: {e}",
                    projection.key, projection.owner
                ));
                continue;
            }
        };
        let text: String = blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n");
        let source = session.with_events(|events| events.iter().rev().find(|e| projection.folds(&e.kind)).map(|e| e.seq));
        out.push(Contribution {
            plugin: projection.owner.plugin.clone(),
            entry: projection.owner.entry.clone(),
            projection: projection.key.clone(),
            blocks,
            source,
            tokens: message_tokens(&Message::User { text }),
        });
    }
    out
}

/// Appends the contributions as user-side messages naming their plugin,
/// each citing the event its state stands on.
pub(crate) fn carry_over(
    session: &Arc<Session>,
    carried: Vec<Contribution>,
    compaction_id: &str,
    obs: &mut dyn TurnObserver,
) -> Result<Vec<String>, AppendError> {
    let mut plugins = Vec::new();
    for c in carried {
        let message = json!({
            "role": "user",
            "content": c.blocks,
            "source": {"kind": "plugin", "plugin": c.plugin, "entry": c.entry, "projection": c.projection, "compactionId": compaction_id},
            "id": uuid::Uuid::new_v4().to_string(),
        });
        let sources = c.source.map_or_else(|| session.with_events(|e| e.last().map(|e| vec![e.seq]).unwrap_or_default()), |s| vec![s]);
        let event = session.append_surface(core::USER_MESSAGE, &message, SurfaceOp::Append, sources)?;
        obs.on_event(session, &event);
        plugins.push(c.plugin);
    }
    Ok(plugins)
}

/// Where the kept tail starts: the first node from the end at which the
/// tail holds at least `retain` tokens (at least the newest node), moved
/// back to a cut no tool call crosses. `None` when that leaves nothing to
/// replace.
fn keep_from(nodes: &[(u64, Option<Message>)], retain: u64) -> Option<usize> {
    if nodes.len() < 2 {
        return None;
    }
    let mut kept = 0u64;
    let mut from = nodes.len();
    for (i, (_, m)) in nodes.iter().enumerate().rev() {
        kept += m.as_ref().map_or(0, message_tokens);
        from = i;
        if kept >= retain {
            break;
        }
    }
    // Open calls after each prefix: a cut is clean where none are open.
    let mut open: Vec<&str> = Vec::new();
    let mut clean = vec![true; nodes.len() + 1];
    for (i, (_, m)) in nodes.iter().enumerate() {
        match m {
            Some(Message::Assistant { tool_calls, .. }) => open.extend(tool_calls.iter().map(|c| c.id.as_str())),
            Some(Message::Tool { call_id, .. }) => open.retain(|c| c != call_id),
            _ => {}
        }
        clean[i + 1] = open.is_empty();
    }
    while from > 0 && !clean[from] {
        from -= 1;
    }
    (from > 0).then_some(from)
}

fn scaled(window: u64, ratio: f64) -> u64 {
    // A window of at most 2^53 tokens is exact in f64.
    (window as f64 * ratio).floor() as u64
}

/// The estimated tokens of one history message: `ceil(characters / 4) + 4`.
pub fn message_tokens(message: &Message) -> u64 {
    let chars = match message {
        Message::User { text } => text.chars().count(),
        Message::Assistant { text, tool_calls, reasoning } => {
            text.chars().count()
                + reasoning.chars().count()
                + tool_calls.iter().map(|c| c.name.len() + c.arguments.chars().count() + c.id.len()).sum::<usize>()
        }
        Message::Tool { text, call_id, .. } => text.chars().count() + call_id.len(),
    };
    (chars as u64).div_ceil(4) + 4
}

/// The estimated tokens of the tool schemas a request sends.
pub fn tools_tokens(tools: &[ToolSchema]) -> u64 {
    let chars: usize = tools.iter().map(|t| t.name.len() + t.description.chars().count() + t.parameters.to_string().chars().count()).sum();
    (chars as u64).div_ceil(4)
}

/// The size of the request the next step would send, in tokens: the last
/// reported usage plus an estimate of what came after it, or the estimate
/// of the whole history (see the [module](self) notes).
pub fn request_tokens(events: &[Event], tools: &[ToolSchema]) -> u64 {
    let nodes = surface_nodes(events);
    let reported = events.iter().rev().find_map(|e| {
        if e.kind != core::ASSISTANT_MESSAGE {
            return None;
        }
        let usage = e.data_value().get("usage").cloned()?;
        let input = usage.get("inputTokens").and_then(Value::as_u64)?;
        let output = usage.get("outputTokens").and_then(Value::as_u64).unwrap_or(0);
        Some((e.seq, input + output))
    });
    // A usage reported before a replacement no longer describes the history.
    let usable = reported.filter(|(seq, _)| !events.iter().any(|e| e.seq > *seq && matches!(e.surface_op, Some(SurfaceOp::Replace { .. }))));
    match usable {
        Some((seq, tokens)) => tokens + nodes.iter().filter(|(s, _)| *s > seq).map(|(_, m)| m.as_ref().map_or(0, message_tokens)).sum::<u64>(),
        None => nodes.iter().map(|(_, m)| m.as_ref().map_or(0, message_tokens)).sum::<u64>() + tools_tokens(tools),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordis_session::history::ToolCallPart;

    fn user(t: &str) -> Option<Message> {
        Some(Message::User { text: t.into() })
    }

    fn call(id: &str) -> Option<Message> {
        Some(Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCallPart { id: id.into(), name: "todo_write".into(), arguments: "{}".into() }],
            reasoning: String::new(),
        })
    }

    fn result(id: &str) -> Option<Message> {
        Some(Message::Tool { call_id: id.into(), text: "ok".into(), is_error: false })
    }

    #[test]
    fn the_kept_tail_never_splits_a_call_from_its_result() {
        let nodes = vec![(0, user("a".repeat(400).as_str())), (1, call("c1")), (2, result("c1")), (3, call("c2")), (4, result("c2"))];
        // Keeping only the last node would cut c2's call from its result.
        assert_eq!(keep_from(&nodes, 0), Some(3));
        assert_eq!(keep_from(&nodes, 10), Some(3));
        // A tail that needs everything leaves nothing to replace.
        assert_eq!(keep_from(&nodes, 100_000), None);
        assert_eq!(keep_from(&nodes[..1], 0), None);
    }

    #[test]
    fn estimates_round_up_and_count_every_part() {
        assert_eq!(message_tokens(&Message::User { text: "abcde".into() }), 2 + 4);
        assert_eq!(message_tokens(&Message::User { text: String::new() }), 4);
    }
}
