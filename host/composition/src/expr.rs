//! `!!js` expressions, evaluated with JavaScript semantics by
//! [`cordis_expr`] (QuickJS).
//!
//! One evaluator per thread is created at the first expression and reused,
//! so a composition without `!!js` pays nothing. Expressions see
//! `process.env`, `process.cwd()`, `process.platform`,
//! `process.execPath` and `ctx.<service>` for the services the entry
//! injects; nothing else of the machine.

use std::cell::RefCell;

use cordis_expr::{Environment, Evaluator, ExprError};
use serde_json::{Map, Value};

thread_local! {
    static EVALUATOR: RefCell<Option<Evaluator>> = const { RefCell::new(None) };
}

fn with_evaluator<R>(f: impl FnOnce(&Evaluator) -> Result<R, ExprError>) -> Result<R, ExprError> {
    EVALUATOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        let evaluator = match &mut *slot {
            Some(evaluator) => evaluator,
            empty => empty.insert(Evaluator::new(&Environment::current())?),
        };
        f(evaluator)
    })
}

/// Evaluates `source`; `None` is JavaScript's `undefined`.
///
/// # Errors
/// [`ExprError`]: an unknown name, a service the entry does not inject, a
/// thrown error, a syntax error, a value with no JSON form, or a limit.
pub fn evaluate(source: &str, services: &Map<String, Value>) -> Result<Option<Value>, ExprError> {
    with_evaluator(|e| e.eval(source, services))
}

/// The JavaScript truthiness of `source`'s value (for `disabled`).
///
/// # Errors
/// As [`evaluate`].
pub fn truthy(source: &str, services: &Map<String, Value>) -> Result<bool, ExprError> {
    with_evaluator(|e| e.truthy(source, services))
}
