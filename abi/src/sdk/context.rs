//! What `Plugin::apply` is given: [`Context`], over the host's raw
//! context, with capabilities, services, tools, event types, projections
//! and turn-end hooks.

use std::sync::Arc;

use abi_stable::{sabi_trait::TD_Opaque, std_types::RBox};
use serde::Serialize;
use serde_json::Value;

use crate::ffi::{
    EventValidatorBox, EventValidator_TO, LogLevel, ProjectionBox, Projection_TO, ServiceBox, Service_TO, ToolBox, Tool_TO, TurnEndHookBox,
    TurnEndHook_TO,
};

use super::projection::{EventInvariant, Fold, FoldAdapter, InvariantAdapter};
use super::raw::{use_capability, RawHost};
use super::service::{ProviderAdapter, ServiceHandle, ServiceProvider};
use super::tool::{read_host_info, ToolAdapter, TypedTool};
use super::turn_end::{TurnEnd, TurnEndAdapter};
use super::{Capability, HostInfo, PluginError};

/// The fiber context `apply` receives.
pub struct Context<'a> {
    pub(super) raw: &'a dyn RawHost,
    pub(super) plugin: &'static str,
    pub(super) inject: &'static [&'static str],
    pub(super) provides: &'static [&'static str],
    pub(super) requires: &'static [Capability],
}

impl<'a> Context<'a> {
    /// The id of the composition entry being applied.
    pub fn entry_id(&self) -> String {
        self.raw.entry_id().into()
    }

    /// The `tools` service.
    ///
    /// # Errors
    /// When the plugin does not list `tools` in `inject`, or the host does not
    /// provide it.
    pub fn tools(&self) -> Result<Tools<'_>, PluginError> {
        self.require("tools")?;
        Ok(Tools { ctx: self })
    }

    fn require(&self, name: &str) -> Result<(), PluginError> {
        if !self.inject.contains(&name) {
            return Err(PluginError(format!("plugin {} uses the `{name}` service without listing it in `inject`", self.plugin)));
        }
        if !self.raw.has_service(name) {
            return Err(PluginError(format!("the `{name}` service is not available to plugin {}", self.plugin)));
        }
        Ok(())
    }

    /// Claims ownership of a session event type, with its durable-log
    /// invariant. Only this plugin may append the type.
    ///
    /// # Errors
    /// When another plugin already owns the type, or the type is a core type.
    pub fn own_event_type<V: EventInvariant>(&self, event_type: &str, invariant: V) -> Result<(), PluginError> {
        let adapter = InvariantAdapter { inner: invariant, plugin: self.plugin, event_type: event_type.to_string() };
        let boxed: EventValidatorBox = EventValidator_TO::from_ptr(RBox::new(adapter), TD_Opaque);
        self.raw.own_event_type(event_type, boxed).into_result().map_err(|e| PluginError(e.into()))
    }

    /// Registers a projection folded over every session's events.
    ///
    /// # Errors
    /// When a projection with the same key is already registered.
    pub fn register_projection<F: Fold>(&self, fold: F) -> Result<(), PluginError> {
        let adapter = FoldAdapter { inner: Arc::new(fold), plugin: self.plugin };
        let boxed: ProjectionBox = Projection_TO::from_ptr(RBox::new(adapter), TD_Opaque);
        self.raw.register_projection(boxed).into_result().map_err(|e| PluginError(e.into()))
    }

    /// Writes a log line attributed to this plugin.
    pub fn log(&self, level: LogLevel, message: &str) {
        self.raw.log(level, message);
    }

    /// Provides the service `name` (listed in [`Plugin::PROVIDES`](super::Plugin::PROVIDES)) in the
    /// entry's realm until the fiber is disposed. Entries that inject it
    /// start once it is there, and are stopped before this fiber is
    /// disposed. Panics in `provider` are caught and become errors of the
    /// call.
    ///
    /// # Errors
    /// When `name` is not in `PROVIDES`, or another entry provides it in
    /// this realm.
    pub fn provide<S: ServiceProvider>(&self, name: &str, provider: S) -> Result<(), PluginError> {
        if !self.provides.contains(&name) {
            return Err(PluginError(format!("plugin {} provides the `{name}` service without listing it in `PROVIDES`", self.plugin)));
        }
        let adapter = ProviderAdapter { inner: provider, plugin: self.plugin, service: name.to_string() };
        let boxed: ServiceBox = Service_TO::from_ptr(RBox::new(adapter), TD_Opaque);
        self.raw.provide(name, boxed).into_result().map_err(|e| PluginError(e.into()))
    }

    /// Claims `event_type` as a surface event type: like
    /// [`Context::own_event_type`], and each event of the type is shown to
    /// the model as a user-side message (its data's `text`; the data must
    /// carry `"role": "user"`).
    ///
    /// # Errors
    /// As [`Context::own_event_type`].
    pub fn own_surface_event_type<V: EventInvariant>(&self, event_type: &str, invariant: V) -> Result<(), PluginError> {
        let adapter = InvariantAdapter { inner: invariant, plugin: self.plugin, event_type: event_type.to_string() };
        let boxed: EventValidatorBox = EventValidator_TO::from_ptr(RBox::new(adapter), TD_Opaque);
        self.raw.own_surface_event_type(event_type, boxed).into_result().map_err(|e| PluginError(e.into()))
    }

    /// Registers `hook`, run by the agent loop when the model ends a turn.
    /// The plugin must inject `agent`.
    ///
    /// # Errors
    /// When `agent` is not injected.
    pub fn on_turn_end<H: TurnEnd>(&self, hook: H) -> Result<(), PluginError> {
        self.require("agent")?;
        let adapter = TurnEndAdapter { inner: hook, plugin: self.plugin };
        let boxed: TurnEndHookBox = TurnEndHook_TO::from_ptr(RBox::new(adapter), TD_Opaque);
        self.raw.on_turn_end(boxed).into_result().map_err(|e| PluginError(e.into()))
    }

    /// A handle on the injected service `name`. Keep it (in a tool, a
    /// provider) to call the service later: each call reaches whichever
    /// provider is live then. Host services (`projections`, `sessions`)
    /// answer too.
    ///
    /// # Errors
    /// When the plugin does not list `name` in `inject` (and the entry does
    /// not inject it), or the host refuses.
    pub fn service(&self, name: &str) -> Result<ServiceHandle, PluginError> {
        let raw = self.raw.service(name).into_result().map_err(|e| PluginError(e.into()))?;
        Ok(ServiceHandle { raw, name: name.to_string() })
    }

    /// Uses a host capability: `Ok(None)` when this host does not offer it
    /// (an older 1.x host), so the plugin can do without; the answer as JSON
    /// otherwise. A capability listed in [`Plugin::REQUIRES`](super::Plugin::REQUIRES) is always
    /// there, since a host without it refuses the plugin.
    ///
    /// # Errors
    /// When the host refuses the request, or answers with text that is not
    /// JSON.
    pub fn capability(&self, capability: &Capability, request: &impl Serialize) -> Result<Option<Value>, PluginError> {
        use_capability(capability, request, |n, v, r| self.raw.capability(n, v, r)).map_err(PluginError)
    }

    /// Uses a host capability that takes an object from the plugin (as
    /// [`crate::capabilities::TOOLS_DYNAMIC`] takes a tool source):
    /// `provider` crosses as a service the host calls, its panics caught on
    /// this side like any provider's. `Ok(None)` when this host does not
    /// offer the capability (the provider is then dropped).
    ///
    /// # Errors
    /// When the host refuses the request, or answers with text that is not
    /// JSON.
    pub fn capability_with<S: ServiceProvider>(
        &self,
        capability: &Capability,
        request: &impl Serialize,
        provider: S,
    ) -> Result<Option<Value>, PluginError> {
        let adapter = ProviderAdapter { inner: provider, plugin: self.plugin, service: capability.name.to_string() };
        let object: ServiceBox = Service_TO::from_ptr(RBox::new(adapter), TD_Opaque);
        use_capability(capability, request, |n, v, r| self.raw.capability_with(n, v, r, object)).map_err(PluginError)
    }

    /// What the host says about itself ([`crate::capabilities::HOST_INFO`]):
    /// `None` from a host older than cordis-abi 1.1.
    ///
    /// # Errors
    /// When the host's answer does not read as a [`HostInfo`].
    pub fn host_info(&self) -> Result<Option<HostInfo>, PluginError> {
        read_host_info(self.capability(&crate::capabilities::HOST_INFO, &serde_json::json!({}))?).map_err(PluginError)
    }

    /// Whether `capability` is one of this plugin's [`Plugin::REQUIRES`](super::Plugin::REQUIRES).
    pub fn requires(&self, capability: &Capability) -> bool {
        self.requires.contains(capability)
    }
}

/// The `tools` service as a plugin sees it.
pub struct Tools<'a> {
    pub(super) ctx: &'a Context<'a>,
}

impl Tools<'_> {
    /// Registers a typed tool. The host validates every call's arguments
    /// against the tool's declared schema ([`TypedTool::parameters`]) before
    /// the tool runs; the SDK then parses them straight into `T::Args`.
    ///
    /// The host compiles the schema at the tool's first call, not here:
    /// loading a composition (`cordis check`, `cordis tools`) pays nothing
    /// for tools it never calls. A schema that does not compile makes every
    /// call an error naming it.
    ///
    /// # Errors
    /// When a tool with the same name is registered, or the schema is not a
    /// JSON object.
    pub fn register<T: TypedTool>(&self, tool: T) -> Result<(), PluginError> {
        let parameters = tool.parameters();
        if !parameters.is_object() {
            return Err(PluginError(format!("tool {} declares parameters that are not a JSON Schema object", tool.name())));
        }
        let adapter = ToolAdapter {
            name: tool.name().to_string(),
            description: tool.description(),
            parameters: parameters.to_string(),
            plugin: self.ctx.plugin,
            tool,
        };
        let boxed: ToolBox = Tool_TO::from_ptr(RBox::new(adapter), TD_Opaque);
        self.ctx.raw.register_tool(boxed).into_result().map_err(|e| PluginError(e.into()))
    }
}
