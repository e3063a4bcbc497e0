//! A crash on purpose at one step of a compaction, for proving that a
//! compaction cut short anywhere is closed by the next writer.
//!
//! With the variable [`VARIABLE`] set to a step's name, the process kills
//! itself with SIGKILL right after that step's event is durable in the
//! log, on every store alike, so a test can crash `cordis` where no signal
//! from outside could land in time (the steps follow each other within
//! microseconds). Unset, or any other value, it does nothing. It is a
//! debugging aid for tests; nothing in cordis sets it.
//!
//! | value | the process dies after | what the log holds |
//! | --- | --- | --- |
//! | `start` | `compaction/start`, before the summary is requested | the start alone |
//! | `summary` | `compaction/summary` | start and summary: nothing replaced |
//! | `replaced` | the `user/message` that replaces the history | the summary in place, no plan carried |
//! | `carried` | the first carried-over plan message | all but `compaction/end` |

/// The environment variable naming the step to crash after.
pub const VARIABLE: &str = "CORDIS_DEBUG_KILL_IN_COMPACTION";

/// A step of a compaction after which the process may be killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `compaction/start` appended.
    Start,
    /// `compaction/summary` appended.
    Summary,
    /// The replacing `user/message` appended.
    Replaced,
    /// A carried-over message appended.
    Carried,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Start => "start",
            Step::Summary => "summary",
            Step::Replaced => "replaced",
            Step::Carried => "carried",
        }
    }
}

/// Kills the process with SIGKILL when [`VARIABLE`] names `step`.
pub(crate) fn after(step: Step) {
    if std::env::var_os(VARIABLE).is_some_and(|v| v == step.name()) {
        tracing::warn!("{VARIABLE}={}: killing this process (SIGKILL) after that step of a compaction", step.name());
        let _ = signal_hook::low_level::raise(signal_hook::consts::SIGKILL);
    }
}
