//! Event types and projections: [`EventInvariant`] checks an owned event
//! type's data, [`Fold`] folds events into a projection's state.

use std::sync::Arc;

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RBox, RErr, ROk, ROption, RResult, RStr, RString, RVec},
};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

use crate::ffi::{EventValidator, Projection, ServiceBox, Service_TO};

use super::guard::{guard, guard_named};
use super::service::{ProviderAdapter, ServiceError, ServiceProvider};

/// The durable-log invariant of an owned event type.
pub trait EventInvariant: Send + Sync + 'static {
    /// Checks one event's data (JSON text).
    ///
    /// # Errors
    /// A one-line description of what is wrong.
    fn validate(&self, data: &str) -> Result<(), String>;
}

impl<F> EventInvariant for F
where
    F: Fn(&str) -> Result<(), String> + Send + Sync + 'static,
{
    fn validate(&self, data: &str) -> Result<(), String> {
        self(data)
    }
}

pub(super) struct InvariantAdapter<V> {
    pub(super) inner: V,
    pub(super) plugin: &'static str,
    pub(super) event_type: String,
}

impl<V: EventInvariant> EventValidator for InvariantAdapter<V> {
    fn validate(&self, data: RStr<'_>) -> RResult<(), RString> {
        match guard_named(self.plugin, || format!("the {} invariant", self.event_type), || self.inner.validate(data.as_str())) {
            Ok(()) => ROk(()),
            Err(e) => RErr(e.into()),
        }
    }

    fn extension(&self, _name: RStr<'_>, _version: u32) -> ROption<ServiceBox> {
        ROption::RNone
    }
}

/// A projection: a fold of session events into a typed state.
pub trait Fold: Send + Sync + 'static {
    /// The state; crosses the boundary as JSON.
    type State: Serialize + DeserializeOwned;
    /// The state's key, e.g. `todos`.
    fn key(&self) -> &str;
    /// Bump when the fold changes.
    fn version(&self) -> u32;
    /// The event types folded.
    fn types(&self) -> Vec<String>;
    /// The state before any event.
    fn init(&self) -> Self::State;
    /// Folds one event.
    ///
    /// # Errors
    /// When `data` cannot be read; the host keeps the previous state.
    fn apply(&self, state: Self::State, event_type: &str, data: &str) -> Result<Self::State, String>;
    /// Whether `apply` ignores the state it is given for events of
    /// `event_type` (the event replaces the state). The SDK then does not
    /// decode the current state and passes [`Fold::init`] instead. The
    /// default, `false`, always decodes it.
    fn replaces(&self, _event_type: &str) -> bool {
        false
    }
    /// A multi-line view of the state; empty when there is nothing to show.
    fn render(&self, state: &Self::State) -> String;
    /// A one-line summary; empty when there is nothing to show.
    fn summary(&self, state: &Self::State) -> String;
    /// What the model must still see of this state after the session's
    /// history is compacted (the [`crate::extensions::COMPACTION_CONTEXT`]
    /// extension): the content blocks of a user-side message the host
    /// appends right after the compaction's summary, in the harness's shape
    /// (`[{"type": "text", "text": ...}]`), or `None` for nothing (the
    /// default, and the right answer for an empty state, so that a state
    /// cleared before the compaction is not brought back).
    fn compaction_context(&self, _state: &Self::State) -> Option<Vec<Value>> {
        None
    }
}

pub(super) struct FoldAdapter<F> {
    pub(super) inner: Arc<F>,
    pub(super) plugin: &'static str,
}

/// The [`crate::extensions::COMPACTION_CONTEXT`] service of one projection:
/// `contribute` `{"state": STATE}` → `{"content": [BLOCK, ...]}` or `null`.
pub(super) struct CompactionContext<F> {
    pub(super) inner: Arc<F>,
}

impl<F: Fold> ServiceProvider for CompactionContext<F> {
    fn call(&self, method: &str, args: Value) -> Result<Value, ServiceError> {
        if method != "contribute" {
            return Err(ServiceError(format!("projection {}: unknown compaction-context method `{method}` (known: contribute)", self.inner.key())));
        }
        let state = args.get("state").cloned().unwrap_or(Value::Null);
        let state: F::State =
            serde_json::from_value(state).map_err(|e| ServiceError(format!("projection {} got an unreadable state: {e}", self.inner.key())))?;
        Ok(match self.inner.compaction_context(&state) {
            Some(content) => serde_json::json!({"content": content}),
            None => Value::Null,
        })
    }
}

impl<F: Fold> FoldAdapter<F> {
    fn read(&self, state: &str) -> Result<F::State, String> {
        serde_json::from_str(state).map_err(|e| format!("projection {} got an unreadable state: {e}", self.inner.key()))
    }

    fn entry(&self, method: &str) -> String {
        format!("projection {}.{method}", self.inner.key())
    }

    fn text_or_empty(&self, method: &str, f: impl FnOnce() -> Result<String, String>) -> RString {
        guard(self.plugin, &self.entry(method), f).unwrap_or_default().into()
    }
}

pub(super) fn encode<S: Serialize>(state: &S) -> Result<String, String> {
    serde_json::to_string(state).map_err(|e| format!("cannot encode projection state: {e}"))
}

impl<F: Fold> Projection for FoldAdapter<F> {
    fn key(&self) -> RString {
        self.text_or_empty("key", || Ok(self.inner.key().to_string()))
    }

    fn version(&self) -> u32 {
        guard(self.plugin, &self.entry("version"), || Ok(self.inner.version())).unwrap_or(0)
    }

    fn types(&self) -> RVec<RString> {
        guard(self.plugin, &self.entry("types"), || Ok(self.inner.types())).unwrap_or_default().into_iter().map(RString::from).collect()
    }

    fn init(&self) -> RString {
        self.text_or_empty("init", || encode(&self.inner.init()))
    }

    fn apply(&self, state: RStr<'_>, event_type: RStr<'_>, data: RStr<'_>) -> RResult<RString, RString> {
        let result = guard_named(
            self.plugin,
            || self.entry("apply"),
            || {
                let state = if self.inner.replaces(event_type.as_str()) { self.inner.init() } else { self.read(state.as_str())? };
                let next = self.inner.apply(state, event_type.as_str(), data.as_str())?;
                encode(&next)
            },
        );
        match result {
            Ok(s) => ROk(s.into()),
            Err(e) => RErr(e.into()),
        }
    }

    fn render(&self, state: RStr<'_>) -> RString {
        self.text_or_empty("render", || Ok(self.inner.render(&self.read(state.as_str())?)))
    }

    fn summary(&self, state: RStr<'_>) -> RString {
        self.text_or_empty("summary", || Ok(self.inner.summary(&self.read(state.as_str())?)))
    }

    fn extension(&self, name: RStr<'_>, version: u32) -> ROption<ServiceBox> {
        let wanted = crate::extensions::COMPACTION_CONTEXT;
        if name.as_str() != wanted.0 || version != wanted.1 {
            return ROption::RNone;
        }
        let provider = CompactionContext { inner: self.inner.clone() };
        let adapter = ProviderAdapter { inner: provider, plugin: self.plugin, service: format!("projection {} {}", self.inner.key(), wanted.0) };
        ROption::RSome(Service_TO::from_ptr(RBox::new(adapter), TD_Opaque))
    }
}
