//! Ownership of session event types.
//!
//! The host owns the core types. A plugin owns further types (tool-todo owns
//! `todo/write`): it registers each with a validator, the durable-log
//! invariant that runs on every append and on replay. A type has one owner at
//! a time; appending a type nobody owns is rejected, while events of such a
//! type already in a log are kept and replayed as opaque.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use cordis_abi::ffi::EventValidatorBox;

use crate::event::core;
use crate::owner::Owner;
use cordis_sync::RwLockExt;

/// An owned event type.
pub struct OwnedType {
    /// Who owns it.
    pub owner: Owner,
    /// Whether each event of the type is a surface event: a user-side
    /// message for the model (its data's `text`).
    pub surface: bool,
    validator: EventValidatorBox,
}

impl OwnedType {
    /// Runs the owner's validator on `data` (JSON text).
    ///
    /// # Errors
    /// The validator's message.
    pub fn validate(&self, data: &str) -> Result<(), String> {
        self.validator.validate(data.into()).into_result().map_err(|e| e.to_string())
    }
}

/// The registry of owned event types.
#[derive(Default)]
pub struct EventTypes {
    owned: RwLock<HashMap<String, Arc<OwnedType>>>,
}

impl EventTypes {
    /// Gives `event_type` to `owner`.
    ///
    /// # Errors
    /// When the type is a core type, malformed, or already owned.
    pub fn claim(&self, event_type: &str, owner: Owner, validator: EventValidatorBox) -> Result<(), String> {
        self.claim_as(event_type, owner, validator, false)
    }

    /// [`EventTypes::claim`], marking the type as a surface event type when
    /// `surface` is true.
    ///
    /// # Errors
    /// As [`EventTypes::claim`].
    pub fn claim_as(&self, event_type: &str, owner: Owner, validator: EventValidatorBox, surface: bool) -> Result<(), String> {
        if core::is_core(event_type) {
            return Err(format!("`{event_type}` is a core event type owned by the host"));
        }
        let well_formed = !event_type.is_empty()
            && event_type.len() <= 128
            && event_type.contains('/')
            && event_type.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'));
        if !well_formed {
            return Err(format!("`{event_type}` is not a valid event type (use `family/name`)"));
        }
        let mut owned = self.owned.write_or_recover();
        if let Some(existing) = owned.get(event_type) {
            return Err(format!("event type `{event_type}` is already owned by {}", existing.owner));
        }
        owned.insert(event_type.to_string(), Arc::new(OwnedType { owner, surface, validator }));
        Ok(())
    }

    /// Releases `event_type` if `fiber` owns it.
    pub fn release(&self, event_type: &str, fiber: u64) {
        let mut owned = self.owned.write_or_recover();
        if owned.get(event_type).is_some_and(|o| o.owner.fiber == fiber) {
            owned.remove(event_type);
        }
    }

    /// The owner of `event_type`, if a loaded plugin owns it.
    pub fn get(&self, event_type: &str) -> Option<Arc<OwnedType>> {
        self.owned.read_or_recover().get(event_type).cloned()
    }
}
