//! Closing a compaction that was cut short.
//!
//! A compaction appends `compaction/start`, `compaction/summary`, the
//! replacing `user/message`, the carried-over plan messages and
//! `compaction/end`. A process killed between the first and the last leaves
//! a start with no end, which would refuse every later compaction. The next
//! writer of the session closes it before anything else, so that the log
//! reads as a compaction that either landed whole or never happened:
//!
//! - the replacing `user/message` did not land: `compaction/end` with an
//!   `error` saying the compaction was cut short; the history is the one
//!   from before it (a `compaction/summary` alone changes nothing the model
//!   sees);
//! - it landed: what the plugins carry over after a compaction and is not
//!   there yet is carried over now, then a plain `compaction/end`.

use std::sync::Arc;

use serde_json::json;

use super::{append, carry_over, contributions};
use crate::agent::TurnObserver;
use cordis_session::event::core;
use cordis_session::{cut_short_compaction, AppendError, CutShortCompaction, Session};

/// The message of the `error` a cut-short compaction is closed with.
pub const CUT_SHORT: &str =
    "cut short: the process stopped before this compaction ended; closed when the session was next opened, with the history as it was before it";

/// How a compaction that was cut short was closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutShort {
    /// The compaction's id.
    pub compaction_id: String,
    /// The seq of its `compaction/start`.
    pub start: u64,
    /// Whether its replacing message had landed (the compaction is then
    /// kept, and completed).
    pub landed: bool,
    /// The plugins whose context was carried over while closing it.
    pub carried: Vec<String>,
}

impl CutShort {
    /// One line for a terminal.
    pub fn describe(&self) -> String {
        if self.landed {
            let carried = if self.carried.is_empty() { String::new() } else { format!(", carrying over {}", self.carried.join(", ")) };
            format!(
                "compaction {} (compaction/start at seq {}) was cut short after its summary replaced the history; it was completed{carried}",
                self.compaction_id, self.start
            )
        } else {
            format!(
                "compaction {} (compaction/start at seq {}) was cut short before its summary replaced anything; it was closed as failed and the history is as it was",
                self.compaction_id, self.start
            )
        }
    }
}

/// Closes the compaction of `session` that has a `compaction/start` and no
/// `compaction/end` (see the [module](self) notes). `Ok(None)` when there
/// is none. Call it only where no compaction of the session can be under
/// way: right after opening the session for writing, or from the compactor
/// when it is not compacting that session itself.
///
/// # Errors
/// [`AppendError`] when the log refuses an event.
pub fn close_cut_short(session: &Arc<Session>, obs: &mut dyn TurnObserver) -> Result<Option<CutShort>, AppendError> {
    let Some(found) = session.with_events(cut_short_compaction) else {
        return Ok(None);
    };
    let CutShortCompaction { compaction_id: id, start, turn, landed, carried: already } = found;
    let mut lifecycle = json!({"compactionId": id, "turn": turn});
    let mut carried = Vec::new();
    if landed {
        let missing: Vec<_> =
            contributions(session, obs, &super::Counter::Estimate).into_iter().filter(|c| !already.contains(&c.projection)).collect();
        carried = carry_over(session, missing, &id, obs)?;
    } else {
        lifecycle["error"] = json!({"message": CUT_SHORT, "kind": "cut-short"});
    }
    append(session, obs, core::COMPACTION_END, &lifecycle)?;
    Ok(Some(CutShort { compaction_id: id, start, landed, carried }))
}
