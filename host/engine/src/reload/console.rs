//! The line protocol that drives a running `cordis dev` (for tests and for
//! people): one command per line on stdin, one JSON line per answer on
//! stdout. Notices about reloads go to stderr.
//!
//! | command | answer |
//! | --- | --- |
//! | `call NAME [ARGS]` | runs tool NAME with the raw argument text ARGS (`{}` when left out) as the dev session's agent (opening a turn if none is open): `{"isError","text","value"}` |
//! | `plan` | every projection's state for the dev session: `{"todos": ...}` |
//! | `tools` | `[{"name","description"}]` |
//! | `status [--show-values]` | `{"reloads", "restarts", "entries": [{"id","plugin","fiber","library","abi","config","status"?,"heldBack"?}], "waiting": [ids], "notRunning": [{"id","name","reason"}]}`; config values the plugin's schema marks `writeOnly` (secrets) read `(hidden)` unless `--show-values` |
//! | `end` | ends the open turn: `{"ended": N}` |
//! | `turn PROMPT` | runs one agent turn for PROMPT with the composition's `model` service (the provider as it is now, after any reload): `{"turn", "reason": "completed", "steps", "toolCalls", "toolErrors", "text", "provider", "model"}`, or `{"turn", "reason": "error" \| "interrupted", "error"}` |
//! | `compact` | compacts the dev session's history now with the composition's `model` service and `compaction-basic` entry: `{"compacted": {"compactionId", "range": [FIRST, LAST], "replaced", "replacedTokens", "summaryTokens", "carried": [PLUGIN]}}`, `{"compacted": null}` when there is nothing to replace, or `{"error"}` |
//! | `help` | `{"commands": [...]}` |
//!
//! The first line printed is `{"ready": true, "session": ID, "pid": PID}`
//! (not again after a restart in place: the console goes on as if nothing
//! happened).
//!
//! The console reads its input itself, unbuffered by std, waiting on the
//! input and on the dev host's wake-up descriptor at once: a restart in
//! place ([`super::restart`]) is made between two commands, handing over
//! the input already read and not yet answered.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use serde_json::{json, Value};

use super::DevHost;
use crate::agent::{call_tool, close_open_step, Agent, Interrupt, Model, Quiet, ServiceModel, ToolCallRequest, TurnError};
use cordis_session::{Appender, Session};

/// Console input: bytes read from a descriptor (stdin), split into lines.
pub struct Input<'a> {
    fd: BorrowedFd<'a>,
    /// Read and not yet answered.
    pending: Vec<u8>,
    ended: bool,
}

/// What [`Input::next`] found.
enum Next {
    Line(String),
    Restart,
    End,
}

impl<'a> Input<'a> {
    /// Input read from `fd`, after `pending` (bytes handed over by the
    /// process this one replaced).
    pub fn new(fd: BorrowedFd<'a>, pending: Vec<u8>) -> Input<'a> {
        Input { fd, pending, ended: false }
    }

    /// The next line (without its line break, invalid UTF-8 replaced), a
    /// due restart (checked before each line), or the end of the input.
    fn next(&mut self, dev: &DevHost) -> Next {
        use rustix::event::{poll, PollFd, PollFlags};
        loop {
            if dev.restart_due().is_some() {
                return Next::Restart;
            }
            if let Some(at) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=at).collect();
                return Next::Line(String::from_utf8_lossy(&line[..at]).into_owned());
            }
            if self.ended {
                if self.pending.is_empty() {
                    return Next::End;
                }
                let line = std::mem::take(&mut self.pending);
                return Next::Line(String::from_utf8_lossy(&line).into_owned());
            }
            let wake = dev.wake_fd();
            let mut fds = [PollFd::new(&self.fd, PollFlags::IN), PollFd::new(&wake, PollFlags::IN)];
            match poll(&mut fds, None) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => self.ended = true,
            }
            if fds[1].revents().contains(PollFlags::IN) {
                let mut count = [0u8; 8];
                let _ = rustix::io::read(dev.wake_fd(), &mut count);
            }
            if fds[0].revents().intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
                let mut buf = [0u8; 64 * 1024];
                match rustix::io::read(self.fd, &mut buf) {
                    Ok(0) => self.ended = true,
                    Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                    Err(_) => self.ended = true,
                }
            }
        }
    }
}

/// Runs the console on stdin and stdout until the input ends, restarting
/// in place when the dev host says a restart is due.
pub fn run_stdio(dev: &Arc<DevHost>, session: &Arc<Session>, pending: Vec<u8>) {
    let stdin = std::io::stdin();
    run(dev, session, Input::new(stdin.as_fd(), pending), std::io::stdout().lock());
}

/// Runs the console until `input` ends.
pub fn run(dev: &Arc<DevHost>, session: &Arc<Session>, mut input: Input<'_>, mut output: impl Write) {
    if dev.handover().is_none() {
        let _ = writeln!(output, "{}", json!({"ready": true, "session": session.id(), "pid": std::process::id()}));
        let _ = output.flush();
    }
    let mut step = 0u32;
    let interrupt = Interrupt::new();
    if let Err(e) = interrupt.install_sigint() {
        eprintln!("warning: Ctrl-C cannot be caught ({e}); it will stop the process without closing a turn");
    }
    loop {
        let line = match input.next(dev) {
            Next::Line(line) => line,
            Next::Restart => {
                let _ = output.flush();
                // Returns only when the restart failed; the host goes on.
                dev.restart(session.id(), &input.pending);
                continue;
            }
            Next::End => break,
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let answer = answer(dev, session, line, &mut step, &interrupt);
        let _ = writeln!(output, "{answer}");
        let _ = output.flush();
    }
}

fn answer(dev: &DevHost, session: &Arc<Session>, line: &str, step: &mut u32, interrupt: &Interrupt) -> Value {
    let (command, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    // A word after a command that takes none is a mistake, not a detail.
    if matches!(command, "plan" | "tools" | "status" | "end" | "help")
        && !rest.trim().is_empty()
        && !(command == "status" && rest.trim() == "--show-values")
    {
        return json!({"error": format!("`{command}` takes no arguments, and got `{}` (try `help`)", rest.trim())});
    }
    match command {
        "call" => {
            let (name, arguments) = rest.trim_start().split_once(char::is_whitespace).unwrap_or((rest.trim(), ""));
            if name.is_empty() {
                return json!({"error": "usage: call NAME [ARGS] (ARGS: the arguments as JSON, {} when left out)"});
            }
            // A tool without parameters is called with an empty object.
            let arguments = if arguments.trim().is_empty() { "{}" } else { arguments };
            let turn = match session.open_turn() {
                Some(t) => t,
                None => {
                    let t = session.next_turn();
                    if let Err(e) = session.append_value("turn/start", &json!({"turn": t}), Appender::Host) {
                        return json!({"error": e.to_string()});
                    }
                    *step = 0;
                    t
                }
            };
            // A step left open by a process that stopped mid-call is ended
            // first (its calls answered), as the log's structure rules
            // require; then the next step of the open turn, also when the
            // turn was opened by an earlier process.
            if let Err(e) = close_open_step(session, &mut Quiet) {
                return json!({"error": e.to_string()});
            }
            *step = u32::try_from(session.next_step()).unwrap_or(u32::MAX);
            let call = ToolCallRequest { id: format!("dev_{turn}_{step}"), name: name.to_string(), arguments: arguments.to_string() };
            let run = || -> Result<Value, cordis_session::AppendError> {
                session.append_value("step/start", &json!({"turn": turn, "step": *step}), Appender::Host)?;
                // The call is recorded as the agent's message, so the session's
                // history pairs every tool result with its call; the developer
                // at the console stands in for the model (the harness requires
                // a model source on assistant messages).
                session.append_value(
                    "assistant/message",
                    &json!({"turn": turn, "step": *step, "message": {
                        "role": "assistant",
                        "content": [{"type": "tool-call", "id": call.id, "name": call.name, "arguments": call.arguments}],
                        "source": {"kind": "model", "provider": "cordis-dev", "model": "console"},
                        "id": uuid::Uuid::new_v4().to_string(),
                    }}),
                    Appender::Host,
                )?;
                let result = call_tool(session, &dev.host.services.tools, turn, *step, &call, &mut Quiet)?;
                session.append_value("step/end", &json!({"turn": turn, "step": *step}), Appender::Host)?;
                Ok(match result.parsed_value() {
                    Ok(value) => json!({"isError": result.is_error, "text": result.text, "value": value}),
                    Err(e) => {
                        json!({"isError": result.is_error, "text": result.text, "value": null, "valueError": format!("the tool's value cannot be read: {e}")})
                    }
                })
            };
            run().unwrap_or_else(|e| json!({"error": e.to_string()}))
        }
        "plan" => {
            let states: serde_json::Map<String, Value> =
                session.states().into_iter().map(|(p, state)| (p.key.clone(), serde_json::from_str(&state).unwrap_or(Value::Null))).collect();
            Value::Object(states)
        }
        "tools" => {
            Value::Array(dev.host.services.tools.schemas().into_iter().map(|s| json!({"name": s.name, "description": s.description})).collect())
        }
        "status" => dev.status_with(rest.trim() == "--show-values"),
        "end" => match session.open_turn() {
            Some(t) => match session.append_value("turn/end", &json!({"turn": t, "reason": {"kind": "completed"}}), Appender::Host) {
                Ok(_) => json!({"ended": t}),
                Err(e) => json!({"error": e.to_string()}),
            },
            None => json!({"error": "no turn is open"}),
        },
        "turn" => model_turn(dev, session, rest.trim(), interrupt),
        "compact" => compact(dev, session),
        "help" => json!({"commands": ["call NAME [ARGS]", "turn PROMPT", "compact", "plan", "tools", "status [--show-values]", "end", "help"]}),
        other => json!({"error": format!("unknown command `{other}` (try `help`)")}),
    }
}

/// `compact`: compacts the dev session now (see [`crate::agent::compaction`]).
fn compact(dev: &DevHost, session: &Arc<Session>) -> Value {
    let Some(compactor) = dev.host.compaction.clone() else {
        return json!({"error": "the composition has no compaction entry (add `- name: compaction-basic`)"});
    };
    let mut model = match ServiceModel::from_composition(&dev.host.services.registry) {
        Ok(Some(m)) => m,
        Ok(None) => return json!({"error": "no entry provides a `model` service to summarize with (add llm-openai to the composition)"}),
        Err(e) => return json!({"error": e.to_string()}),
    };
    match compactor.compact_now(session, &mut model, &dev.host.services.tools.schemas(), None, &|| false, &mut Quiet) {
        Ok(Ok(o)) => json!({"compacted": {
            "compactionId": o.compaction_id,
            "range": [o.range.0, o.range.1],
            "replaced": o.replaced,
            "replacedTokens": o.replaced_tokens,
            "summaryTokens": o.summary_tokens,
            "carried": o.carried,
        }}),
        Ok(Err(skip)) => json!({"compacted": null, "reason": skip.to_string()}),
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// `turn PROMPT`: one agent turn with the composition's model.
fn model_turn(dev: &DevHost, session: &Arc<Session>, prompt: &str, interrupt: &Interrupt) -> Value {
    if prompt.is_empty() {
        return json!({"error": "usage: turn PROMPT"});
    }
    let mut model = match ServiceModel::from_composition(&dev.host.services.registry) {
        Ok(Some(m)) => m,
        Ok(None) => return json!({"error": "no entry provides a `model` service (add llm-openai to the composition)"}),
        Err(e) => return json!({"error": e.to_string()}),
    };
    let result = {
        let mut agent = Agent::new(session.clone(), dev.host.services.tools.clone(), &mut model)
            .with_turn_hooks(dev.host.services.turn_hooks.clone())
            .with_interrupt(interrupt.clone())
            .with_compaction(dev.host.compaction.clone());
        let _armed = interrupt.arm();
        agent.run_turn(prompt, &mut Quiet)
    };
    let turn = session.next_turn().saturating_sub(1);
    match result {
        Ok(s) => json!({
            "turn": s.turn, "reason": "completed", "steps": s.steps, "toolCalls": s.tool_calls, "toolErrors": s.tool_errors,
            "text": s.final_text, "provider": model.provider(), "model": model.name(),
        }),
        Err(TurnError::Interrupted) => json!({"turn": turn, "reason": "interrupted", "error": TurnError::Interrupted.to_string()}),
        Err(e) => json!({"turn": turn, "reason": "error", "error": e.to_string()}),
    }
}
