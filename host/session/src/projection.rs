//! The `projections` service: folds of session events into small states.
//!
//! A plugin registers a projection (`key`, `types`, `init`, `apply`,
//! `version`); the host keeps one state per open session and projection,
//! calls the plugin only for the event types it lists, and re-folds from the
//! log when a projection is registered (or re-registered with another
//! version, as after a reload).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, RwLock};

use cordis_abi::ffi::ProjectionBox;

use crate::owner::Owner;
use cordis_sync::RwLockExt;

/// A registered projection.
pub struct RegisteredProjection {
    /// The state's key, e.g. `todos`.
    pub key: String,
    /// The fold's version.
    pub version: u32,
    /// The event types it folds.
    pub types: HashSet<String>,
    /// The initial state, JSON text.
    pub init: String,
    /// Who registered it.
    pub owner: Owner,
    projection: ProjectionBox,
    token: u64,
}

impl RegisteredProjection {
    /// Folds one event into `state`.
    ///
    /// # Errors
    /// The plugin's message; the caller keeps the previous state.
    pub fn apply(&self, state: &str, event_type: &str, data: &str) -> Result<String, String> {
        self.projection.apply(state.into(), event_type.into(), data.into()).into_result().map(Into::into).map_err(Into::into)
    }

    /// The state as a multi-line view (empty: nothing to show).
    pub fn render(&self, state: &str) -> String {
        self.projection.render(state.into()).into()
    }

    /// The state as a one-line summary (empty: nothing to show).
    pub fn summary(&self, state: &str) -> String {
        self.projection.summary(state.into()).into()
    }

    /// A number unique to this registration: a fold made under another
    /// registration (an older version, a reloaded library) is stale.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Whether this projection folds `event_type`.
    pub fn folds(&self, event_type: &str) -> bool {
        // A projection lists a few types: comparing them is cheaper than
        // hashing the type.
        if self.types.len() <= 8 {
            self.types.iter().any(|t| t == event_type)
        } else {
            self.types.contains(event_type)
        }
    }

    /// Whether the plugin offers the `compaction-context` extension (of
    /// cordis-abi 1.2), so that a compaction can carry its state over.
    pub fn offers_compaction_context(&self) -> bool {
        let (name, version) = cordis_abi::extensions::COMPACTION_CONTEXT;
        self.projection.extension(name.into(), version).into_option().is_some()
    }

    /// What the model must still see of `state` after a compaction, as the
    /// content blocks of a user-side message (the plugin's
    /// `compaction-context` extension, cordis-abi 1.2): `Ok(None)` when the
    /// plugin has nothing to add or does not know the extension.
    ///
    /// # Errors
    /// The plugin's refusal, or an answer that is not `null` or
    /// `{"content": [BLOCK, ...]}` with at least one block.
    pub fn compaction_context(&self, state: &str) -> Result<Option<Vec<serde_json::Value>>, String> {
        let (name, version) = cordis_abi::extensions::COMPACTION_CONTEXT;
        let Some(service) = self.projection.extension(name.into(), version).into_option() else { return Ok(None) };
        let args = format!("{{\"state\":{state}}}");
        let answer: String = service.call("contribute".into(), args.as_str().into()).into_result().map_err(|e| e.to_string())?.into();
        let value: serde_json::Value = serde_json::from_str(&answer).map_err(|e| format!("an answer that is not JSON: {e}"))?;
        match value {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::Object(mut o) => match o.remove("content") {
                Some(serde_json::Value::Array(blocks)) if !blocks.is_empty() => Ok(Some(blocks)),
                _ => Err("an answer without content blocks (expected {\"content\": [BLOCK, ...]} or null)".into()),
            },
            other => Err(format!("an answer that is neither null nor an object: {other}")),
        }
    }
}

/// The projection registry.
#[derive(Default)]
pub struct Projections {
    by_key: RwLock<BTreeMap<String, Arc<RegisteredProjection>>>,
}

impl Projections {
    /// Registers `projection` for `owner`; returns its key and a token for
    /// [`Projections::unregister`].
    ///
    /// # Errors
    /// When the key is empty or already registered.
    pub fn register(&self, projection: ProjectionBox, owner: Owner, token: u64) -> Result<Arc<RegisteredProjection>, String> {
        let key: String = projection.key().into();
        if key.is_empty() {
            return Err("a projection needs a non-empty key".into());
        }
        let registered = Arc::new(RegisteredProjection {
            version: projection.version(),
            types: projection.types().into_iter().map(String::from).collect(),
            init: projection.init().into(),
            key: key.clone(),
            owner,
            projection,
            token,
        });
        if serde_json::from_str::<serde_json::Value>(&registered.init).is_err() {
            return Err(format!("projection `{key}` has an initial state that is not JSON"));
        }
        let mut by_key = self.by_key.write_or_recover();
        if let Some(existing) = by_key.get(&key) {
            return Err(format!("a projection `{key}` is already registered by {}", existing.owner));
        }
        by_key.insert(key, registered.clone());
        Ok(registered)
    }

    /// Removes the projection registered under `token`; returns whether it
    /// was removed.
    pub fn unregister(&self, key: &str, token: u64) -> bool {
        let mut by_key = self.by_key.write_or_recover();
        if by_key.get(key).is_some_and(|p| p.token == token) {
            by_key.remove(key);
            return true;
        }
        false
    }

    /// Every registered projection, by key.
    pub fn all(&self) -> Vec<Arc<RegisteredProjection>> {
        self.by_key.read_or_recover().values().cloned().collect()
    }

    /// The projection with `key`.
    pub fn get(&self, key: &str) -> Option<Arc<RegisteredProjection>> {
        self.by_key.read_or_recover().get(key).cloned()
    }
}
