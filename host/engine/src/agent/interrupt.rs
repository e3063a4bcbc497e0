//! Ctrl-C during a turn: a flag the agent loop (and a streaming model)
//! checks, set by SIGINT.
//!
//! While a turn runs (the interrupt is [armed](Interrupt::arm)), the first
//! SIGINT only sets the flag: the model's request is cancelled, the step
//! is closed as the log's rules require, and the turn ends with reason
//! `interrupted`, so the log stays well-formed. A second SIGINT while the
//! flag is still set exits at once with status 130 (the open turn is then
//! closed when the session continues). Outside a turn SIGINT keeps its
//! default action (the process ends).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The interrupt flag of the turns of one process.
#[derive(Debug, Clone)]
pub struct Interrupt {
    flag: Arc<AtomicBool>,
    /// No turn is running: SIGINT takes its default action.
    idle: Arc<AtomicBool>,
}

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt { flag: Arc::default(), idle: Arc::new(AtomicBool::new(true)) }
    }
}

impl Interrupt {
    /// A flag that is not set, and not armed.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Whether the user asked to stop.
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Asks the turn to stop (what SIGINT does while armed).
    pub fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Routes SIGINT to this flag for the rest of the process (call once).
    ///
    /// # Errors
    /// When the handlers cannot be installed.
    pub fn install_sigint(&self) -> std::io::Result<()> {
        use signal_hook::consts::SIGINT;
        // The order matters: the default action when idle; else exit when
        // the flag is already set (a second Ctrl-C); else set it.
        signal_hook::flag::register_conditional_default(SIGINT, self.idle.clone())?;
        signal_hook::flag::register_conditional_shutdown(SIGINT, 130, self.flag.clone())?;
        signal_hook::flag::register(SIGINT, self.flag.clone())?;
        Ok(())
    }

    /// Arms the interrupt for one turn (clearing the flag) until the guard
    /// is dropped.
    pub fn arm(&self) -> Armed {
        self.flag.store(false, Ordering::SeqCst);
        self.idle.store(false, Ordering::SeqCst);
        Armed { idle: self.idle.clone() }
    }
}

/// Keeps an [`Interrupt`] armed; dropping it gives SIGINT its default
/// action again.
#[derive(Debug)]
pub struct Armed {
    idle: Arc<AtomicBool>,
}

impl Drop for Armed {
    fn drop(&mut self) {
        self.idle.store(true, Ordering::SeqCst);
    }
}

/// While a turn runs, cancels the calls in flight that can be cancelled
/// (a tool source's, such as an MCP server's) as soon as the interrupt is
/// set, so that Ctrl-C does not wait for a hung call; stopped when
/// dropped.
pub(crate) struct CancelOnInterrupt {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CancelOnInterrupt {
    /// Starts watching `interrupt` for the calls session `session` makes
    /// through `tools` (other sessions' calls go on). Without a thread
    /// (none could be started) calls are not cancelled, only waited for.
    pub(crate) fn start(interrupt: Interrupt, tools: Arc<crate::tools::ToolRegistry>, session: String) -> CancelOnInterrupt {
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::Builder::new()
            .name("interrupt-calls".into())
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if interrupt.is_set() {
                        tools.cancel_session_calls(&session, "interrupted (Ctrl-C)");
                        return;
                    }
                    std::thread::park_timeout(std::time::Duration::from_millis(50));
                }
            })
            .ok();
        CancelOnInterrupt { done, thread }
    }
}

impl Drop for CancelOnInterrupt {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
