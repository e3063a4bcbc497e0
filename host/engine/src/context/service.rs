//! Services plugins provide to each other, and the realms they live in.
//!
//! A provider's `apply` calls `provide(name, service)`: the service is
//! registered under `name` in the provider's realm for that name, and
//! withdrawn when its fiber is disposed. A consumer gets a [`ServiceHandle`]
//! from `service(name)`; each call looks the provider up again, so a handle
//! never reaches a disposed provider: withdrawing waits for the calls in
//! flight, then later calls fail with a clear message.
//!
//! Realms follow the cordis loader's `isolate` (docs/guide/composition.md):
//! an entry whose
//! `isolate` lists a name with `true` gives itself and its descendants a
//! private realm for that name; a label joins the realm of every entry using
//! the same label; names not listed resolve in the realm of the parent, up
//! to the root realm.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};
use cordis_abi::ffi::{Service, ServiceBox};

use super::Owner;
pub use cordis_composition::realm::{RealmKey, Realms};
use cordis_sync::{LockExt, RwLockExt};

/// One live provider.
struct Provided {
    owner: Owner,
    token: u64,
    service: ServiceBox,
    /// Calls hold it shared; withdrawing takes it exclusively (so it waits
    /// for calls in flight) and marks the provider gone.
    live: RwLock<bool>,
}

/// The services plugins provide, by realm and name.
#[derive(Default)]
pub struct ServiceRegistry {
    providers: Mutex<HashMap<(RealmKey, String), Arc<Provided>>>,
    next: std::sync::atomic::AtomicU64,
}

impl ServiceRegistry {
    /// Registers `service` as `name` in `realm` for `owner`; returns the
    /// token that withdraws it.
    ///
    /// # Errors
    /// When another live entry provides `name` in `realm`; the message names
    /// both entries.
    pub fn provide(&self, realm: RealmKey, name: &str, owner: Owner, service: ServiceBox) -> Result<u64, String> {
        let mut providers = self.providers.lock_or_recover();
        let key = (realm, name.to_string());
        if let Some(existing) = providers.get(&key) {
            if existing.owner.fiber == owner.fiber {
                return Err(format!("plugin {} provides the service `{name}` twice in {}", owner.plugin, key.0));
            }
            return Err(format!(
                "the service `{name}` is already provided in {} by entry `{}` (plugin {}); entry `{}` cannot provide it there too (give one of them its own realm with `isolate`)",
                key.0, existing.owner.entry, existing.owner.plugin, owner.entry
            ));
        }
        let token = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        providers.insert(key, Arc::new(Provided { owner, token, service, live: RwLock::new(true) }));
        Ok(token)
    }

    /// Withdraws the provider registered with `token`, after the calls in
    /// flight to it have returned.
    pub fn withdraw(&self, realm: &RealmKey, name: &str, token: u64) {
        let removed = {
            let mut providers = self.providers.lock_or_recover();
            let key = (realm.clone(), name.to_string());
            match providers.get(&key) {
                Some(p) if p.token == token => providers.remove(&key),
                _ => None,
            }
        };
        if let Some(p) = removed {
            *p.live.write_or_recover() = false;
        }
    }

    /// Whether a provider of `name` is live in `realm`.
    pub fn provides(&self, realm: &RealmKey, name: &str) -> bool {
        self.providers.lock_or_recover().contains_key(&(realm.clone(), name.to_string()))
    }

    /// The owner of the provider of `name` in `realm`, if any.
    pub fn provider(&self, realm: &RealmKey, name: &str) -> Option<Owner> {
        self.providers.lock_or_recover().get(&(realm.clone(), name.to_string())).map(|p| p.owner.clone())
    }

    /// What the fiber `fiber` provides: `(realm, name)` pairs.
    pub fn provided_by(&self, fiber: u64) -> Vec<(RealmKey, String)> {
        let providers = self.providers.lock_or_recover();
        let mut out: Vec<(RealmKey, String)> = providers.iter().filter(|(_, p)| p.owner.fiber == fiber).map(|(k, _)| k.clone()).collect();
        out.sort();
        out
    }

    /// Calls `method` on the provider of `name` in `realm`.
    ///
    /// # Errors
    /// When no provider is live, or the provider's own error.
    pub fn call(&self, realm: &RealmKey, name: &str, method: &str, args: &str) -> Result<String, String> {
        let provider = self.providers.lock_or_recover().get(&(realm.clone(), name.to_string())).cloned();
        let Some(provider) = provider else {
            return Err(format!("the service `{name}` is not available in {realm} (its provider is not running)"));
        };
        let live = provider.live.read_or_recover();
        if !*live {
            return Err(format!("the service `{name}` is not available in {realm} (its provider was stopped)"));
        }
        provider.service.call(method.into(), args.into()).into_result().map(RString::into_string).map_err(RString::into_string)
    }
}

/// A host-side handle on a service, given to a consumer: every call
/// resolves the provider again in the consumer's realm.
pub struct ServiceHandle {
    /// The registry.
    pub registry: Arc<ServiceRegistry>,
    /// The realm the consumer sees `name` in.
    pub realm: RealmKey,
    /// The service name.
    pub name: String,
}

impl Service for ServiceHandle {
    fn call(&self, method: RStr<'_>, args: RStr<'_>) -> RResult<RString, RString> {
        match self.registry.call(&self.realm, &self.name, method.as_str(), args.as_str()) {
            Ok(text) => ROk(text.into()),
            Err(e) => RErr(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_isolate_wins_and_other_names_resolve_at_the_root() {
        let outer = Realms::default().child([("svc".to_string(), RealmKey::Label("shared".into()))]);
        let inner = outer.child([("svc".to_string(), RealmKey::Private("g".into()))]);
        assert_eq!(outer.of("svc"), RealmKey::Label("shared".into()));
        assert_eq!(inner.of("svc"), RealmKey::Private("g".into()));
        assert_eq!(inner.of("other"), RealmKey::Root);
    }
}
