//! Panics kept on the plugin side: every entry point the SDK hands to the
//! host runs in [`guard`], which turns a panic into an error naming the
//! plugin, the entry point and where it panicked.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static LAST_PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Inside a plugin library (which carries its own copy of `std`), replaces
/// the default panic hook, which prints to the host's stderr, with one that
/// records where the panic happened; [`guard`] puts that place in the error
/// it returns, so the host reports the panic once, as an error.
pub(super) fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
        LAST_PANIC_AT.with(|slot| *slot.borrow_mut() = at);
    }));
}

#[doc(hidden)]
/// Runs `f`, turning a panic into an error naming the plugin and the entry
/// point.
pub fn guard<T>(plugin: &str, entry: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    guard_named(plugin, || entry.to_string(), f)
}

/// [`guard`] with the entry point's name built only when `f` panics: the
/// entry points a host calls on every tool call and append do not format a
/// name they almost never need.
pub(super) fn guard_named<T>(plugin: &str, entry: impl FnOnce() -> String, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let at = LAST_PANIC_AT.with(|slot| slot.borrow_mut().take());
            let at = at.map(|a| format!(" (at {a})")).unwrap_or_default();
            Err(format!("plugin {plugin} panicked in {}: {}{at}", entry(), panic_message(&*payload)))
        }
    }
}

pub(super) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-text panic payload".into()
    }
}
