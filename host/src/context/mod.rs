//! Fibers, effects, services and `inject`.
//!
//! A plugin's `apply` runs against a [`FiberContext`]: the host side of the
//! ABI's `HostContext`. Every registration it makes is recorded as an effect
//! of the fiber, so disposing the fiber (on unload, reload, or a failed
//! `apply`) undoes all of them in reverse order.

mod fiber;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};
use cordis_abi::ffi::{EventValidatorBox, HostContext, LogLevel, ProjectionBox, ToolBox};

pub use fiber::{Effect, Fiber, Owner};

use crate::projection::Projections;
use crate::session::{EventTypes, Sessions};
use crate::tools::ToolRegistry;

/// The services the host provides, by the names plugins `inject`.
pub const SERVICE_NAMES: [&str; 3] = ["tools", "sessions", "projections"];

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
}

impl Services {
    /// Services over the given sessions store setting.
    pub fn new(store: Option<crate::session::Store>, durability: crate::session::Durability) -> Services {
        let events = Arc::new(EventTypes::default());
        let projections = Arc::new(Projections::default());
        let sessions = Arc::new(Sessions::new(store, durability, events.clone(), projections.clone()));
        Services { tools: Arc::new(ToolRegistry::default()), sessions, events, projections }
    }

    /// Whether a service with this name exists.
    pub fn provides(&self, name: &str) -> bool {
        SERVICE_NAMES.contains(&name)
    }

    /// The names of the services provided, in order.
    pub fn names(&self) -> Vec<String> {
        SERVICE_NAMES.iter().map(|s| s.to_string()).collect()
    }

    /// What `ctx.<name>` shows a `!!js` expression for a provided service.
    /// Host services are objects, not data: expressions see
    /// `{"service": NAME}` (enough to test for presence).
    pub fn value(&self, name: &str) -> serde_json::Value {
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
    /// The services the plugin declared.
    pub inject: &'a [String],
}

impl FiberContext<'_> {
    fn injected(&self, service: &str) -> Result<(), RString> {
        if self.inject.iter().any(|s| s == service) {
            Ok(())
        } else {
            Err(format!(
                "plugin {} uses the `{service}` service without listing it in `inject`",
                self.fiber.owner().plugin
            )
            .into())
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
        let owner = self.fiber.owner().clone();
        let fiber = owner.fiber;
        match self.services.events.claim(event_type.as_str(), owner, validator) {
            Ok(()) => {
                let events = self.services.events.clone();
                let kind = event_type.to_string();
                self.fiber.add(Effect::new(format!("event type {kind}"), move || events.release(&kind, fiber)));
                ROk(())
            }
            Err(e) => RErr(e.into()),
        }
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

    fn log(&self, level: LogLevel, message: RStr<'_>) {
        let plugin = &self.fiber.owner().plugin;
        let message = message.as_str();
        match level {
            LogLevel::Debug => tracing::debug!(plugin = %plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin = %plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin = %plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin = %plugin, "{message}"),
        }
    }
}
