//! The `todos` service: the current plan of a session, for other plugins of
//! the family (`todo-nudge` reads it at the end of a turn).
//!
//! Requests (JSON in and out):
//! - `get` `{"session": ID}` → `{"todos": [...] | null, "counts":
//!   {"pending", "inProgress", "completed"}, "digest": TEXT}`: the `todos`
//!   projection's state for that session (`null` before any write in the
//!   current turn), its counts, and a digest that changes whenever the plan
//!   does;
//! - `wait` `{"session": ID, "digest": TEXT, "timeoutMs": N}` → the same as
//!   `get` plus `"changed": true|false`: answers as soon as the plan's
//!   digest differs from the one given (it was told of a change), or after
//!   `timeoutMs` (at most 60 000) with `changed: false`;
//! - `value` → `{"service": "todos"}` (what `!!js` expressions see).
//!
//! The plan itself is the host's `todos` projection, read through the
//! `projections` host service: the log stays the one source of truth.

use std::time::{Duration, Instant};

use cordis_abi::prelude::*;
use serde_json::{json, Value};

use crate::item::{Counts, Todo};
use crate::projection::PROJECTION_KEY;

/// The service's name.
pub const SERVICE_NAME: &str = "todos";

/// The longest `wait` accepted, in milliseconds.
pub const MAX_WAIT_MS: u64 = 60_000;

/// How often `wait` looks at the plan again.
const POLL: Duration = Duration::from_millis(20);

/// The `todos` service over the host's `projections` service.
pub struct TodosService {
    /// The host's `projections` service.
    pub projections: ServiceHandle,
}

impl TodosService {
    fn plan(&self, session: &str) -> Result<Value, ServiceError> {
        let state = self.projections.call("state", &json!({"session": session, "key": PROJECTION_KEY}))?;
        let todos: Option<Vec<Todo>> =
            serde_json::from_value(state.clone()).map_err(|e| ServiceError::new(format!("the todos state is not a plan: {e}")))?;
        let counts = Counts::of(todos.as_deref().unwrap_or_default());
        Ok(json!({"todos": state, "counts": counts, "digest": digest(&state)}))
    }
}

/// A short digest of a plan (FNV-1a over its JSON text, as hex).
fn digest(state: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in state.to_string().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn session_of(args: &Value) -> Result<&str, ServiceError> {
    args["session"].as_str().filter(|s| !s.is_empty()).ok_or_else(|| ServiceError::new("todos: `session` (a session id) is required"))
}

impl ServiceProvider for TodosService {
    fn call(&self, method: &str, args: Value) -> Result<Value, ServiceError> {
        match method {
            "get" => self.plan(session_of(&args)?),
            "wait" => {
                let session = session_of(&args)?;
                let known = args["digest"].as_str().unwrap_or_default().to_string();
                let timeout = Duration::from_millis(args["timeoutMs"].as_u64().unwrap_or(0).min(MAX_WAIT_MS));
                let start = Instant::now();
                loop {
                    let mut plan = self.plan(session)?;
                    let changed = plan["digest"].as_str() != Some(known.as_str());
                    if changed || start.elapsed() >= timeout {
                        plan["changed"] = Value::Bool(changed);
                        return Ok(plan);
                    }
                    std::thread::sleep(POLL.min(timeout.saturating_sub(start.elapsed())));
                }
            }
            "value" => Ok(json!({"service": SERVICE_NAME})),
            other => Err(ServiceError::new(format!("todos has no request `{other}` (requests: get, wait)"))),
        }
    }
}
