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
//!    cordis-abi 1.2): the todo family's standing plan, verbatim, so the
//!    plan of the current turn does not depend on what the summary says of
//!    it (a new turn clears the plan);
//! 5. `compaction/end` `{compactionId, turn}`, with `error` when the
//!    compaction failed and the history was left as it was.
//!
//! **Token counts.** The size of the next request is the provider's
//! reported usage where there is one (the last `assistant/message`'s
//! `inputTokens + outputTokens`, when no compaction came after it) plus a
//! count of what came after; else the count alone, over the messages, the
//! tool schemas' JSON and the provider's system prompt. Counts come from
//! the model's own tokenizer when the config names a `tokenizer.json`, else
//! from a calibrated estimate ([`tokens`]). The limit a request is held to
//! is the threshold, or the window less the provider's reserved output,
//! whichever is smaller ([`Compactor::limit`]).
//!
//! **Faults.** A compaction cut short by a killed process is closed by the
//! next writer ([`recover`]); Ctrl-C stops a pending summary request; a
//! turn's summary requests are bounded by its [`TurnBudget`].

pub mod config;
pub mod crash;
pub mod recover;
pub mod tokens;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

pub use config::{CompactionConfig, Resolved, Retain};
pub use recover::{close_cut_short, CutShort, CUT_SHORT};
pub use tokens::{message_tokens, request_tokens, text_tokens, tools_tokens, Counter, Counters, Vocabulary};

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

/// The sections of a checkpoint, in order (see [`SUMMARY_REQUEST`]).
pub const SECTIONS: [&str; 6] = ["Goal", "Context", "Files and code", "Problems", "Open work", "Current step"];

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
    /// This process is compacting the session already (another thread
    /// asked while its `compaction/start`, at this seq, has no end yet).
    #[error("this process is compacting the session already (compaction/start at seq {0}); try again when it has ended")]
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
    /// limit; automatic compaction stops for the turn.
    #[error("{} — and the next request is still over the limit of {threshold} tokens; no more compaction in this turn", outcome.describe())]
    StillAbove {
        /// What the compaction did.
        outcome: Box<Outcome>,
        /// The limit, in tokens.
        threshold: u64,
    },
    /// Ctrl-C stopped the summary request; the compaction was closed as
    /// interrupted and the history left as it was.
    #[error("interrupted (Ctrl-C) while the summary was requested; the history is left as it was")]
    Interrupted,
    /// The parts of the request no compaction shrinks leave no room under
    /// the limit; automatic compaction stops for the turn.
    #[error("the fixed parts of the request alone reach the limit of {limit} tokens ({parts}; ~{total} in all), so compacting the history cannot bring it under; no more compaction in this turn — shorten the system prompt, offer fewer tools, or lower the provider's max_tokens")]
    NoRoom {
        /// Each part and its size.
        parts: String,
        /// Their sum.
        total: u64,
        /// The limit, in tokens.
        limit: u64,
    },
    /// Nothing could be replaced; automatic compaction stops for the turn.
    #[error("the history is over the limit, but nothing can be replaced: {0}; no more compaction in this turn")]
    Nothing(Skip),
    /// Summary requests of this turn failed as often as
    /// `compactionRetries` allows; no more are sent in this turn.
    #[error("{failed} summary requests of this turn failed (the last: {last}); no more compaction in this turn, the history is left as it is")]
    BackedOff {
        /// Failed summary requests in the turn.
        failed: u32,
        /// Why the last one failed.
        last: String,
    },
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
}

/// The host's compaction, as the composition configured it.
#[derive(Debug)]
pub struct Compactor {
    config: CompactionConfig,
    /// The tokenizers the config names, read as the compactor starts.
    counters: Counters,
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
        let counters = Counters::start(config.tokenizers());
        Compactor { config, counters, warned: Mutex::new(HashSet::new()), compacting: Mutex::new(HashSet::new()) }
    }

    /// The config.
    pub fn config(&self) -> &CompactionConfig {
        &self.config
    }

    /// The check the agent loop makes before each step of an open turn:
    /// compacts when the next request would pass the limit (see
    /// [`Compactor::limit`]) and `auto` is on. `Ok(None)` when nothing was
    /// needed, or when `budget` has stopped automatic compaction for the
    /// turn. A model without a known context window is reported once, then
    /// skipped silently.
    ///
    /// Cost is bounded by `budget`: a summary request is sent only while
    /// the turn's failed ones number at most `compactionRetries`, so a turn
    /// sends at most its successful compactions + `compactionRetries` + 1
    /// of them; a compaction that fails, that cannot find anything to
    /// replace, or that leaves the request over the limit stops automatic
    /// compaction for the rest of the turn, and so do fixed parts that
    /// leave no room. Each of these is an error, given once per turn.
    ///
    /// # Errors
    /// [`CompactionError`]: the turn goes on with the history as it is.
    pub fn before_step(
        &self,
        session: &Arc<Session>,
        model: &mut dyn Model,
        tools: &[ToolSchema],
        budget: &mut TurnBudget,
        interrupted: &dyn Fn() -> bool,
        obs: &mut dyn TurnObserver,
    ) -> Result<Option<Outcome>, CompactionError> {
        if !self.config.auto() || budget.stopped {
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
        let counter = self.counter(&policy, obs);
        let limit = Compactor::limit(window, &policy, model);
        let system = model.system_prompt().map_or(0, |s| counter.text(s));
        let before = session.with_events(|events| counter.request(events, tools, system));
        if before < limit {
            return Ok(None);
        }
        // The parts no compaction shrinks.
        let carried: u64 = contributions(session, obs, &counter).iter().map(|c| c.tokens).sum();
        let fixed = FixedParts {
            system,
            tools: counter.tools(tools),
            tool_count: tools.len(),
            carried,
            reserved: model.max_output().unwrap_or(0),
            summary_frame: counter.message(&framed("")),
        };
        if fixed.total() >= limit {
            budget.stopped = true;
            return Err(CompactionError::NoRoom { parts: fixed.describe(), total: fixed.total(), limit });
        }
        let retain = match policy.retain {
            Retain::Ratio(r) => scaled(window, r),
            Retain::Tokens(t) => t,
        };
        let mut last = None;
        while budget.failed <= policy.compaction_retries {
            // Ctrl-C stops the tries; the turn then ends as interrupted.
            if interrupted() {
                return Err(CompactionError::Interrupted);
            }
            match self.bracket(session, model, tools, &policy, retain, interrupted, obs) {
                Ok(Ok(outcome)) => {
                    budget.sent += 1;
                    budget.succeeded += 1;
                    if outcome.request_tokens.1 < limit {
                        return Ok(Some(outcome));
                    }
                    budget.stopped = true;
                    return Err(CompactionError::StillAbove { outcome: Box::new(outcome), threshold: limit });
                }
                Ok(Err(skip)) => {
                    budget.stopped = true;
                    return Err(CompactionError::Nothing(skip));
                }
                Err(CompactionError::Summary { last: why, .. }) => {
                    budget.sent += 1;
                    budget.failed += 1;
                    last = Some(why);
                }
                Err(e) => {
                    if matches!(e, CompactionError::Interrupted) {
                        budget.sent += 1;
                    }
                    return Err(e);
                }
            }
        }
        budget.stopped = true;
        Err(CompactionError::BackedOff { failed: budget.failed, last: last.unwrap_or_else(|| "earlier summary requests of this turn failed".into()) })
    }

    /// The size the next request may reach before a compaction: the
    /// threshold (`thresholdRatio` of the window), or the window less the
    /// output the provider reserves for the answer (its `max_tokens`),
    /// whichever is smaller.
    pub fn limit(window: u64, policy: &Resolved, model: &dyn Model) -> u64 {
        let threshold = scaled(window, policy.threshold_ratio);
        match model.max_output() {
            Some(reserved) => threshold.min(window.saturating_sub(reserved)),
            None => threshold,
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
    /// `turn: null`. `Ok(Err(skip))` says why there was nothing to replace.
    /// Inside a turn, `budget` bounds the summary requests as
    /// [`Compactor::before_step`] does.
    ///
    /// # Errors
    /// [`CompactionError`].
    pub fn compact_now(
        &self,
        session: &Arc<Session>,
        model: &mut dyn Model,
        tools: &[ToolSchema],
        budget: Option<&mut TurnBudget>,
        interrupted: &dyn Fn() -> bool,
        obs: &mut dyn TurnObserver,
    ) -> Result<Result<Outcome, Skip>, CompactionError> {
        let policy = self.policy(model)?;
        let mut own = TurnBudget::default();
        let budget = budget.unwrap_or(&mut own);
        let mut last = None;
        while budget.failed <= policy.compaction_retries {
            match self.bracket(session, model, tools, &policy, 0, interrupted, obs) {
                Err(CompactionError::Summary { last: why, .. }) => {
                    budget.sent += 1;
                    budget.failed += 1;
                    last = Some(why);
                }
                Ok(Ok(outcome)) => {
                    budget.sent += 1;
                    budget.succeeded += 1;
                    return Ok(Ok(outcome));
                }
                other => return other,
            }
        }
        Err(match last {
            Some(last) => CompactionError::Summary { tries: budget.failed, last },
            None => CompactionError::BackedOff { failed: budget.failed, last: "earlier summary requests of this turn failed".into() },
        })
    }

    fn policy(&self, model: &dyn Model) -> Result<Resolved, CompactionError> {
        self.config.resolve_policy(Some((model.provider(), model.name()))).map_err(CompactionError::Config)
    }

    /// How tokens are counted under `policy`: its tokenizer, once read, or
    /// the estimate (a tokenizer that cannot be read is told to `obs` once).
    fn counter(&self, policy: &Resolved, obs: &mut dyn TurnObserver) -> Counter {
        self.counters.counter(policy.tokenizer.as_deref(), &mut |text| obs.on_notice(text))
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
    ) -> Result<Result<Outcome, Skip>, CompactionError> {
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
        let counter = self.counter(policy, obs);
        let system = model.system_prompt().map_or(0, |s| counter.text(s));
        let (nodes, before) = session.with_events(|events| (surface_nodes(events), counter.request(events, tools, system)));
        let keep_from = match keep_from(&nodes, retain, &counter) {
            Ok(at) => at,
            Err(skip) => return Ok(Err(skip)),
        };
        let region: Vec<(u64, Option<Message>)> = nodes[..keep_from].to_vec();
        let range = (region[0].0, region[keep_from - 1].0);
        let replaced_tokens: u64 = region.iter().map(|(_, m)| m.as_ref().map_or(0, |m| counter.message(m))).sum();
        let shadowed: Vec<u64> = region.iter().map(|(s, _)| *s).collect();
        let mut messages = well_formed_history(region);
        messages.push(Message::User { text: SUMMARY_REQUEST.to_string() });

        // What the plugins carry over comes back after the summary: a
        // compaction must shrink the history by more than the summary's
        // framing and that, or it is not worth a model call.
        let carried = contributions(session, obs, &counter);
        let carried_tokens: u64 = carried.iter().map(|c| c.tokens).sum();
        let framing = counter.message(&framed(""));
        if replaced_tokens <= framing + carried_tokens {
            return Ok(Err(Skip::TooSmall { replaced: replaced_tokens, framing, carried: carried_tokens }));
        }

        let turn = session.open_turn();
        let compaction_id = uuid::Uuid::new_v4().to_string();
        let lifecycle = json!({"compactionId": compaction_id, "turn": turn});
        let start = append(session, obs, core::COMPACTION_START, &lifecycle)?;
        crash::after(crash::Step::Start);

        let summary = summarize(model, &messages, policy.max_tokens, replaced_tokens.saturating_sub(carried_tokens), interrupted, &counter);
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
        crash::after(crash::Step::Summary);
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
        crash::after(crash::Step::Replaced);

        let carried = carry_over(session, carried, &compaction_id, obs)?;
        append(session, obs, core::COMPACTION_END, &lifecycle)?;
        let after = session.with_events(|events| counter.request(events, tools, system));
        Ok(Ok(Outcome { compaction_id, range, replaced: shadowed.len(), replaced_tokens, summary_tokens, carried, request_tokens: (before, after) }))
    }
}

/// What one turn has spent on compaction, and whether automatic
/// compaction is stopped for the rest of it (see
/// [`Compactor::before_step`]). A turn makes one and passes it to every
/// compaction it asks for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TurnBudget {
    /// Summary requests sent.
    pub sent: u32,
    /// Compactions that replaced history.
    pub succeeded: u32,
    /// Summary requests that gave no usable summary.
    pub failed: u32,
    /// No more automatic compaction in this turn.
    pub stopped: bool,
}

/// Why a compaction found nothing to replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The history has fewer than two entries.
    OneEntry,
    /// The tail kept verbatim (`retainRatio` / `retainTokens`) takes the
    /// whole history.
    KeptTail {
        /// The tokens kept verbatim.
        retain: u64,
    },
    /// Every cut before the kept tail would separate a tool call from its
    /// result.
    NoCleanCut {
        /// History entries before the kept tail.
        entries: usize,
    },
    /// What could be replaced is no larger than the summary's framing and
    /// what is carried over after it.
    TooSmall {
        /// Estimated tokens of the replaceable history.
        replaced: u64,
        /// Estimated tokens of the summary's framing.
        framing: u64,
        /// Estimated tokens of what the plugins carry over.
        carried: u64,
    },
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::OneEntry => write!(f, "the history has fewer than two entries"),
            Skip::KeptTail { retain } => {
                write!(f, "the newest ~{retain} tokens are kept verbatim (retainRatio / retainTokens), and that is the whole history")
            }
            Skip::NoCleanCut { entries } => write!(
                f,
                "each of the {entries} history entries before the kept tail is followed by a result of a tool call made before it, so no cut keeps calls and results together"
            ),
            Skip::TooSmall { replaced, framing, carried } => write!(
                f,
                "the replaceable history (~{replaced} tokens) is no larger than a summary's framing (~{framing} tokens) plus what is carried over after it (~{carried} tokens, the standing plan)"
            ),
        }
    }
}

/// The parts of a request no compaction shrinks, in estimated tokens
/// (the reserved output is already taken off the limit they are compared
/// with, and is named for the reader).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FixedParts {
    system: u64,
    tools: u64,
    tool_count: usize,
    carried: u64,
    reserved: u64,
    summary_frame: u64,
}

impl FixedParts {
    fn total(&self) -> u64 {
        self.system + self.tools + self.carried + self.summary_frame
    }

    fn describe(&self) -> String {
        format!(
            "system prompt ~{} tokens, tool schemas ~{} tokens ({} {}), carried plan ~{} tokens, summary framing ~{} tokens; the limit already leaves {} tokens for the answer (max_tokens)",
            self.system,
            self.tools,
            self.tool_count,
            if self.tool_count == 1 { "tool" } else { "tools" },
            self.carried,
            self.summary_frame,
            self.reserved
        )
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
    counter: &Counter,
) -> Result<(String, Option<Value>, u64), Failed> {
    let request = ModelRequest { messages, tools: &[], purpose: Purpose::Compaction, max_tokens: Some(max_tokens), system: None };
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
    if let Some(why) = not_a_checkpoint(&text) {
        return Err(Failed::Unusable(format!("the answer is not a checkpoint: {why}")));
    }
    let tokens = counter.message(&framed(&text));
    if tokens >= replaced {
        return Err(Failed::Unusable(format!(
            "the summary (~{tokens} tokens) is not smaller than what it replaces, less what is carried over after it (~{replaced} tokens)"
        )));
    }
    Ok((text, answer.usage, tokens))
}

/// Why `text` is not a checkpoint in the structure [`SUMMARY_REQUEST`]
/// asks for, if it is not: it must open with the `## Goal` heading, and
/// its second-level headings must be [`SECTIONS`], each at most once, in
/// their order (a section with nothing to say may be left out).
pub fn not_a_checkpoint(text: &str) -> Option<String> {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    if first != "## Goal" {
        let shown: String = first.chars().take(60).collect();
        return Some(format!("it opens with {shown:?}, not with the heading \"## Goal\""));
    }
    let mut next = 0;
    for heading in text.lines().filter_map(|l| l.trim_end().strip_prefix("## ")) {
        let heading = heading.trim();
        match SECTIONS.iter().position(|s| *s == heading) {
            Some(at) if at >= next => next = at + 1,
            Some(_) => return Some(format!("the section \"## {heading}\" is repeated or out of order")),
            None => return Some(format!("\"## {heading}\" is not one of its sections ({})", SECTIONS.join(", "))),
        }
    }
    None
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
pub(crate) fn contributions(session: &Arc<Session>, obs: &mut dyn TurnObserver, counter: &Counter) -> Vec<Contribution> {
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
            tokens: counter.message(&Message::User { text }),
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
        crash::after(crash::Step::Carried);
        plugins.push(c.plugin);
    }
    Ok(plugins)
}

/// Where the kept tail starts: the first node from the end at which the
/// tail holds at least `retain` tokens (at least the newest node), moved
/// back to a cut no tool call crosses. A call with no result anywhere in the
/// history crosses no cut: the history answers it with an error result
/// right after its message, on whichever side it lands. [`Skip`] when that
/// leaves nothing to replace.
fn keep_from(nodes: &[(u64, Option<Message>)], retain: u64, counter: &Counter) -> Result<usize, Skip> {
    if nodes.len() < 2 {
        return Err(Skip::OneEntry);
    }
    let mut kept = 0u64;
    let mut from = nodes.len();
    for (i, (_, m)) in nodes.iter().enumerate().rev() {
        kept += m.as_ref().map_or(0, |m| counter.message(m));
        from = i;
        if kept >= retain {
            break;
        }
    }
    // Open calls after each prefix: a cut is clean where none are open.
    let answered: HashSet<&str> = nodes
        .iter()
        .filter_map(|(_, m)| match m {
            Some(Message::Tool { call_id, .. }) => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let mut open: Vec<&str> = Vec::new();
    let mut clean = vec![true; nodes.len() + 1];
    for (i, (_, m)) in nodes.iter().enumerate() {
        match m {
            Some(Message::Assistant { tool_calls, .. }) => open.extend(tool_calls.iter().map(|c| c.id.as_str()).filter(|id| answered.contains(id))),
            Some(Message::Tool { call_id, .. }) => open.retain(|c| c != call_id),
            _ => {}
        }
        clean[i + 1] = open.is_empty();
    }
    let wanted = from;
    while from > 0 && !clean[from] {
        from -= 1;
    }
    if wanted == 0 {
        return Err(Skip::KeptTail { retain });
    }
    if from == 0 {
        return Err(Skip::NoCleanCut { entries: wanted });
    }
    Ok(from)
}

fn scaled(window: u64, ratio: f64) -> u64 {
    // A window of at most 2^53 tokens is exact in f64.
    (window as f64 * ratio).floor() as u64
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
        assert_eq!(keep_from(&nodes, 0, &Counter::Estimate), Ok(3));
        assert_eq!(keep_from(&nodes, 10, &Counter::Estimate), Ok(3));
        // A tail that needs everything leaves nothing to replace.
        assert_eq!(keep_from(&nodes, 100_000, &Counter::Estimate), Err(Skip::KeptTail { retain: 100_000 }));
        assert_eq!(keep_from(&nodes[..1], 0, &Counter::Estimate), Err(Skip::OneEntry));
    }

    #[test]
    fn a_call_never_answered_does_not_block_every_cut() {
        // c0 has no result anywhere (an imported log): the history answers
        // it in place, so cuts after it are clean.
        let nodes = vec![(0, user("task")), (1, call("c0")), (2, user("go on")), (3, call("c1")), (4, result("c1")), (5, user("next"))];
        assert_eq!(keep_from(&nodes, 0, &Counter::Estimate), Ok(5));
        // A call answered later still blocks the cuts between the two.
        assert_eq!(keep_from(&nodes[..5], 0, &Counter::Estimate), Ok(3));
    }

    #[test]
    fn a_checkpoint_is_recognized_by_its_sections() {
        assert_eq!(not_a_checkpoint("## Goal\n- x\n## Open work\n- y"), None);
        assert_eq!(not_a_checkpoint("\n## Goal\n- x\n### a detail\n## Current step\n- z"), None);
        let chatty = not_a_checkpoint("Sure! Continuing with the next item: I'll now call todo_write").unwrap();
        assert!(chatty.contains("opens with"), "{chatty}");
        assert!(not_a_checkpoint("## Goal\n## Open work\n## Goal").unwrap().contains("out of order"));
        assert!(not_a_checkpoint("## Goal\n## Next steps").unwrap().contains("not one of its sections"));
        assert!(not_a_checkpoint("").is_some());
    }
}
