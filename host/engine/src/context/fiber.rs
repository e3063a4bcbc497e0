//! Fibers: one applied instance of a plugin for one entry, owning every
//! effect its `apply` registered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static NEXT_FIBER: AtomicU64 = AtomicU64::new(1);

pub use cordis_session::Owner;
use cordis_sync::LockExt;

/// Something registered, with the code that undoes it.
pub struct Effect {
    /// What it is, e.g. `tool todo_write`.
    pub label: String,
    undo: Box<dyn FnOnce() + Send>,
}

impl Effect {
    /// An effect undone by `undo`.
    pub fn new(label: impl Into<String>, undo: impl FnOnce() + Send + 'static) -> Effect {
        Effect { label: label.into(), undo: Box::new(undo) }
    }
}

/// One applied instance of a plugin for one entry.
pub struct Fiber {
    owner: Owner,
    effects: Mutex<Vec<Effect>>,
}

impl Fiber {
    /// A new, empty fiber for `plugin` applied for `entry`.
    pub fn new(plugin: &str, entry: &str) -> Fiber {
        Fiber {
            owner: Owner { fiber: NEXT_FIBER.fetch_add(1, Ordering::Relaxed), plugin: plugin.to_string(), entry: entry.to_string() },
            effects: Mutex::new(Vec::new()),
        }
    }

    /// Who this fiber is.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Records an effect; it is undone when the fiber is disposed.
    pub fn add(&self, effect: Effect) {
        self.effects.lock_or_recover().push(effect);
    }

    /// Labels of the live effects, in registration order.
    pub fn effects(&self) -> Vec<String> {
        self.effects.lock_or_recover().iter().map(|e| e.label.clone()).collect()
    }

    /// Undoes every effect, newest first. Idempotent.
    pub fn dispose(&self) {
        let effects = std::mem::take(&mut *self.effects.lock_or_recover());
        for effect in effects.into_iter().rev() {
            tracing::debug!(fiber = self.owner.fiber, effect = %effect.label, "disposing");
            (effect.undo)();
        }
    }
}

impl Drop for Fiber {
    fn drop(&mut self) {
        self.dispose();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn disposes_in_reverse_order_once() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let fiber = Fiber::new("p", "e");
        for i in 0..3 {
            let log = log.clone();
            fiber.add(Effect::new(format!("e{i}"), move || log.lock().unwrap().push(i)));
        }
        assert_eq!(fiber.effects(), vec!["e0", "e1", "e2"]);
        fiber.dispose();
        fiber.dispose();
        assert_eq!(*log.lock().unwrap(), vec![2, 1, 0]);
    }
}
