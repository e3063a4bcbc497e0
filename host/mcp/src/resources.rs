//! Projection states as MCP resources, and who subscribed to them.
//!
//! Every registered projection of every stored session is a resource
//! `cordis://session/{id}/{key}` (the plan is `cordis://session/{id}/todos`).
//! Reading one gives two contents with that URI: the state as JSON
//! (`application/json`, `null` before the first event that sets it) and the
//! projection's own text rendering (`text/plain`, empty when there is
//! nothing to show). A client that subscribes to one gets
//! `notifications/resources/updated` after every event of a type the
//! projection folds (for the plan: each `todo/write`, and `turn/start`,
//! which clears it), whichever connection appended it.

use std::sync::Mutex;

use cordis_sync::LockExt;
use rmcp::service::{Peer, RoleServer};

/// The URI scheme and prefix of session resources.
pub const PREFIX: &str = "cordis://session/";

/// The URI template of session resources (RFC 6570), as `resources/templates/list` gives it.
pub const TEMPLATE: &str = "cordis://session/{id}/{projection}";

/// The URI of projection `key` of session `id`.
pub fn uri(id: &str, key: &str) -> String {
    format!("{PREFIX}{id}/{key}")
}

/// Splits a resource URI into (session id, projection key).
///
/// # Errors
/// A message naming the URI and the expected shape.
pub fn parse(uri: &str) -> Result<(&str, &str), String> {
    let bad = || format!("`{uri}` is not a cordis resource: expected {TEMPLATE}");
    let rest = uri.strip_prefix(PREFIX).ok_or_else(bad)?;
    let (id, key) = rest.split_once('/').ok_or_else(bad)?;
    if id.is_empty() || key.is_empty() || key.contains('/') {
        return Err(bad());
    }
    cordis_session::store::check_id(id).map_err(|e| format!("`{uri}`: {e}"))?;
    Ok((id, key))
}

struct Subscription {
    connection: u64,
    uri: String,
    session: String,
    key: String,
    peer: Peer<RoleServer>,
}

/// The subscriptions of every connection of this server.
#[derive(Default)]
pub struct Hub {
    subscriptions: Mutex<Vec<Subscription>>,
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Subscription>> {
        self.subscriptions.lock_or_recover()
    }

    /// Subscribes `connection` (reached through `peer`) to `uri`, which
    /// names projection `key` of session `session`. Subscribing twice is
    /// one subscription.
    pub fn subscribe(&self, connection: u64, uri: &str, session: &str, key: &str, peer: Peer<RoleServer>) {
        let mut subs = self.lock();
        if !subs.iter().any(|s| s.connection == connection && s.uri == uri) {
            subs.push(Subscription { connection, uri: uri.to_string(), session: session.to_string(), key: key.to_string(), peer });
        }
    }

    /// Ends `connection`'s subscription to `uri`.
    pub fn unsubscribe(&self, connection: u64, uri: &str) {
        self.lock().retain(|s| !(s.connection == connection && s.uri == uri));
    }

    /// Ends every subscription of `connection`.
    pub fn forget(&self, connection: u64) {
        self.lock().retain(|s| s.connection != connection);
    }

    /// The (peer, uri) pairs to notify after events of `kinds` were
    /// appended to session `session`: subscriptions to projections that fold
    /// one of them.
    pub fn affected(&self, session: &str, kinds: &[String], folds: impl Fn(&str, &str) -> bool) -> Vec<(Peer<RoleServer>, String)> {
        self.lock()
            .iter()
            .filter(|s| s.session == session && kinds.iter().any(|k| folds(&s.key, k)))
            .map(|s| (s.peer.clone(), s.uri.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_bad_ones_are_refused() {
        let u = uri("s-1", "todos");
        assert_eq!(u, "cordis://session/s-1/todos");
        assert_eq!(parse(&u).unwrap(), ("s-1", "todos"));
        for bad in
            ["cordis://session/s-1", "cordis://session//todos", "file:///etc/passwd", "cordis://session/../x/todos", "cordis://session/s-1/a/b"]
        {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }
}
