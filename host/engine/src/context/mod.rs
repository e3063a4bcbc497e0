//! Fibers, effects, services and `inject`.
//!
//! A plugin's `apply` runs against a [`FiberContext`]: the host side of the
//! ABI's `HostContext`. Every registration it makes is recorded as an effect
//! of the fiber, so disposing the fiber (on unload, reload, or a failed
//! `apply`) undoes all of them in reverse order.

mod fiber;
pub mod service;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};
use cordis_abi::ffi::{EventValidatorBox, HostContext, LogLevel, ProjectionBox, Service, ServiceBox, Service_TO, ToolBox};

pub use fiber::{Effect, Fiber, Owner};
pub use service::{RealmKey, Realms, ServiceRegistry};

use crate::tools::ToolRegistry;
use cordis_session::projection::Projections;
use cordis_session::{EventTypes, Sessions};
use cordis_sync::LockExt;

/// The services the host provides, by the names plugins `inject`.
pub const SERVICE_NAMES: [&str; 4] = ["tools", "sessions", "projections", "agent"];

/// The host's services.
pub struct Services {
    /// `tools`: the tool registry.
    pub tools: Arc<ToolRegistry>,
    /// `sessions`: session logs.
    pub sessions: Arc<Sessions>,
    /// Owned event types (part of the session log).
    pub events: Arc<EventTypes>,
    /// `projections`: folds over session events.
    pub projections: Arc<Projections>,
    /// Services plugins provide, by realm and name.
    pub registry: Arc<ServiceRegistry>,
    /// `agent`: hooks the agent loop runs at the end of a turn.
    pub turn_hooks: Arc<TurnHooks>,
}

/// The turn-end hooks plugins registered, in registration order.
#[derive(Default)]
pub struct TurnHooks {
    hooks: std::sync::Mutex<Vec<(u64, Owner, Arc<cordis_abi::ffi::TurnEndHookBox>)>>,
}

impl TurnHooks {
    /// Registers `hook` for `owner`; returns the token that removes it.
    pub fn add(&self, owner: Owner, hook: cordis_abi::ffi::TurnEndHookBox) -> u64 {
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        self.hooks.lock_or_recover().push((token, owner, Arc::new(hook)));
        token
    }

    /// Removes the hook registered with `token`.
    pub fn remove(&self, token: u64) {
        self.hooks.lock_or_recover().retain(|(t, _, _)| *t != token);
    }

    /// The hooks, in registration order.
    pub fn all(&self) -> Vec<(Owner, Arc<cordis_abi::ffi::TurnEndHookBox>)> {
        self.hooks.lock_or_recover().iter().map(|(_, o, h)| (o.clone(), h.clone())).collect()
    }
}

impl Services {
    /// Services over the given sessions store setting.
    pub fn new(store: Option<cordis_session::Store>, durability: cordis_session::Durability) -> Services {
        let events = Arc::new(EventTypes::default());
        let projections = Arc::new(Projections::default());
        let sessions = Arc::new(Sessions::new(store, durability, events.clone(), projections.clone()));
        Services { tools: Arc::new(ToolRegistry::default()), sessions, events, projections, registry: Arc::default(), turn_hooks: Arc::default() }
    }

    /// Whether the host provides a service with this name.
    pub fn provides(&self, name: &str) -> bool {
        SERVICE_NAMES.contains(&name)
    }

    /// Whether `name` is available to an entry with `realms`: a host
    /// service, or a plugin's in the entry's realm for `name`.
    pub fn available(&self, name: &str, realms: &Realms) -> bool {
        self.provides(name) || self.registry.provides(&realms.of(name), name)
    }

    /// The names of the services provided, in order.
    pub fn names(&self) -> Vec<String> {
        SERVICE_NAMES.iter().map(|s| s.to_string()).collect()
    }

    /// What `ctx.<name>` shows a `!!js` expression for a service available
    /// in `realms`: a plugin's service answers the request `value` (no
    /// arguments) with JSON; host services, and providers that refuse
    /// `value`, show `{"service": NAME}` (enough to test for presence).
    pub fn value(&self, name: &str, realms: &Realms) -> serde_json::Value {
        if !self.provides(name) {
            if let Ok(text) = self.registry.call(&realms.of(name), name, "value", "null") {
                if let Ok(v) = serde_json::from_str(&text) {
                    return v;
                }
            }
        }
        serde_json::json!({ "service": name })
    }
}

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// The context one `apply` call sees: its fiber, the services, and the
/// plugin's `inject` list.
pub struct FiberContext<'a> {
    /// The fiber effects are recorded on.
    pub fiber: &'a Fiber,
    /// The host's services.
    pub services: &'a Services,
    /// The services the plugin and its entry inject.
    pub inject: &'a [String],
    /// The services the plugin declares it provides.
    pub provides: &'a [String],
    /// Where the entry's service names resolve.
    pub realms: &'a Realms,
}

impl FiberContext<'_> {
    fn own(&self, event_type: RStr<'_>, validator: EventValidatorBox, surface: bool) -> RResult<(), RString> {
        let owner = self.fiber.owner().clone();
        let fiber = owner.fiber;
        match self.services.events.claim_as(event_type.as_str(), owner, validator, surface) {
            Ok(()) => {
                let events = self.services.events.clone();
                let kind = event_type.to_string();
                self.fiber.add(Effect::new(format!("event type {kind}"), move || events.release(&kind, fiber)));
                ROk(())
            }
            Err(e) => RErr(e.into()),
        }
    }

    /// `tools.dynamic` version 1: follows the tool source `object` for this
    /// fiber until it is disposed.
    fn follow_tools(&self, request: &str, object: abi_stable::std_types::ROption<ServiceBox>) -> Result<String, String> {
        self.injected("tools").map_err(String::from)?;
        let request: serde_json::Value = serde_json::from_str(request).map_err(|e| format!("tools.dynamic: the request is not JSON: {e}"))?;
        if !request.as_object().is_some_and(serde_json::Map::is_empty) {
            return Err(format!("tools.dynamic version 1 takes the request {{}}, not {request}"));
        }
        let abi_stable::std_types::RSome(source) = object else {
            return Err("tools.dynamic version 1 takes the plugin's tool source as its object, and none was given".into());
        };
        let (count, undo) = crate::dynamic_tools::follow(self.services.tools.clone(), self.fiber.owner().clone(), source)?;
        self.fiber.add(Effect::new("dynamic tools", undo));
        Ok(serde_json::json!({ "tools": count }).to_string())
    }

    fn injected(&self, service: &str) -> Result<(), RString> {
        if self.inject.iter().any(|s| s == service) {
            Ok(())
        } else {
            Err(format!("plugin {} uses the `{service}` service without listing it in `inject`", self.fiber.owner().plugin).into())
        }
    }
}

impl HostContext for FiberContext<'_> {
    fn entry_id(&self) -> RString {
        self.fiber.owner().entry.as_str().into()
    }

    fn has_service(&self, name: RStr<'_>) -> bool {
        self.services.provides(name.as_str()) && self.inject.iter().any(|s| s == name.as_str())
    }

    fn register_tool(&self, tool: ToolBox) -> RResult<(), RString> {
        if let Err(e) = self.injected("tools") {
            return RErr(e);
        }
        match self.services.tools.register(tool, self.fiber.owner().clone()) {
            Ok((name, token)) => {
                let tools = self.services.tools.clone();
                let label = format!("tool {name}");
                self.fiber.add(Effect::new(label, move || tools.unregister(&name, token)));
                ROk(())
            }
            Err(e) => RErr(e.to_string().into()),
        }
    }

    fn own_event_type(&self, event_type: RStr<'_>, validator: EventValidatorBox) -> RResult<(), RString> {
        self.own(event_type, validator, false)
    }

    fn own_surface_event_type(&self, event_type: RStr<'_>, validator: EventValidatorBox) -> RResult<(), RString> {
        self.own(event_type, validator, true)
    }

    fn on_turn_end(&self, hook: cordis_abi::ffi::TurnEndHookBox) -> RResult<(), RString> {
        if let Err(e) = self.injected("agent") {
            return RErr(e);
        }
        let token = self.services.turn_hooks.add(self.fiber.owner().clone(), hook);
        let hooks = self.services.turn_hooks.clone();
        self.fiber.add(Effect::new("turn-end hook", move || hooks.remove(token)));
        ROk(())
    }

    fn register_projection(&self, projection: ProjectionBox) -> RResult<(), RString> {
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        match self.services.projections.register(projection, self.fiber.owner().clone(), token) {
            Ok(p) => {
                let projections = self.services.projections.clone();
                let key = p.key.clone();
                self.fiber.add(Effect::new(format!("projection {key}"), move || {
                    projections.unregister(&key, token);
                }));
                ROk(())
            }
            Err(e) => RErr(e.into()),
        }
    }

    fn provide(&self, name: RStr<'_>, service: ServiceBox) -> RResult<(), RString> {
        let name = name.as_str();
        let owner = self.fiber.owner().clone();
        if self.services.provides(name) {
            return RErr(format!("plugin {} cannot provide `{name}`: it is a host service", owner.plugin).into());
        }
        if !self.provides.iter().any(|p| p == name) {
            return RErr(format!("plugin {} provides the `{name}` service without declaring it (PROVIDES)", owner.plugin).into());
        }
        let realm = self.realms.of(name);
        match self.services.registry.provide(realm.clone(), name, owner, service) {
            Ok(token) => {
                let registry = self.services.registry.clone();
                let label = format!("service {name}");
                let name = name.to_string();
                self.fiber.add(Effect::new(label, move || registry.withdraw(&realm, &name, token)));
                ROk(())
            }
            Err(e) => RErr(e.into()),
        }
    }

    fn service(&self, name: RStr<'_>) -> RResult<ServiceBox, RString> {
        let name = name.as_str();
        if let Err(e) = self.injected(name) {
            return RErr(e);
        }
        if name == "projections" {
            let handle = ProjectionsService { sessions: self.services.sessions.clone() };
            return ROk(Service_TO::from_value(handle, TD_Opaque));
        }
        if self.services.provides(name) {
            return RErr(format!("the host service `{name}` has no request handle; use the plugin API for it").into());
        }
        let handle = service::ServiceHandle { registry: self.services.registry.clone(), realm: self.realms.of(name), name: name.to_string() };
        ROk(Service_TO::from_value(handle, TD_Opaque))
    }

    fn capabilities(&self) -> abi_stable::std_types::RVec<cordis_abi::ffi::CapabilityId> {
        crate::capabilities::offered().into_iter().collect()
    }

    fn capability(
        &self,
        name: RStr<'_>,
        version: u32,
        request: RStr<'_>,
        object: abi_stable::std_types::ROption<ServiceBox>,
    ) -> RResult<RString, RString> {
        let dynamic = &cordis_abi::capabilities::TOOLS_DYNAMIC;
        if name.as_str() == dynamic.name && version == dynamic.version {
            return match self.follow_tools(request.as_str(), object) {
                Ok(answer) => ROk(answer.into()),
                Err(e) => RErr(e.into()),
            };
        }
        crate::capabilities::answer_raw(name, version, request, object)
    }

    fn log(&self, level: LogLevel, message: RStr<'_>) {
        let owner = self.fiber.owner();
        let (plugin, entry) = (&owner.plugin, &owner.entry);
        let message = message.as_str();
        match level {
            LogLevel::Debug => tracing::debug!(entry = %entry, plugin = %plugin, "{message}"),
            LogLevel::Info => tracing::info!(entry = %entry, plugin = %plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(entry = %entry, plugin = %plugin, "{message}"),
            LogLevel::Error => tracing::error!(entry = %entry, plugin = %plugin, "{message}"),
        }
    }
}

/// The `projections` host service as a request handle: `state` with
/// `{"session": ID, "key": KEY}` answers the projection's current state for
/// that session (from the open session, or replayed from its stored log).
struct ProjectionsService {
    sessions: Arc<Sessions>,
}

impl Service for ProjectionsService {
    fn call(&self, method: RStr<'_>, args: RStr<'_>) -> RResult<RString, RString> {
        let answer = || -> Result<String, String> {
            if method.as_str() != "state" {
                return Err(format!("the projections service has no request `{}` (requests: state)", method.as_str()));
            }
            let args: serde_json::Value =
                serde_json::from_str(args.as_str()).map_err(|e| format!("projections.state: the arguments are not JSON: {e}"))?;
            let (Some(session), Some(key)) = (args["session"].as_str(), args["key"].as_str()) else {
                return Err("projections.state takes {\"session\": ID, \"key\": KEY}".into());
            };
            self.sessions.projection_state(session, key)
        };
        match answer() {
            Ok(text) => ROk(text.into()),
            Err(e) => RErr(e.into()),
        }
    }
}
