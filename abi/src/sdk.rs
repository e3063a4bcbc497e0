//! The plugin-author SDK: plain Rust traits on the plugin side of the
//! boundary, adapted to the raw [`crate::ffi`] types.
//!
//! Every entry point the SDK hands to the host runs inside `catch_unwind`: a
//! panic becomes an error value naming the plugin and the entry point
//! (`plugin tool-todo panicked in todo_write.execute: ...`), never an unwind
//! across the boundary.
//!
//! A plugin is declared with [`Plugin`], exported with
//! [`export_plugin!`](crate::export_plugin) (collected with `inventory`), and
//! the library's root module is generated once per crate with
//! [`export_library!`](crate::export_library).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use abi_stable::{
    sabi_trait::TD_Opaque,
    std_types::{RBox, RErr, ROk, ROption, RResult, RSlice, RStr, RString, RVec},
};
use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;

use crate::ffi::{
    AbiVersion, CapabilityId, EventValidator, EventValidatorBox, EventValidator_TO, ExecContextRef, ExecContext_TO, HostContextRef, HostContext_TO,
    LogLevel, PackageName, PluginDecl, PluginLibrary, PluginLibraryRef, Projection, ProjectionBox, Projection_TO, ProvidedService, Requirement,
    Service, ServiceBox, Service_TO, Tool, ToolBox, ToolOutcome, Tool_TO, TurnEndHook, TurnEndHookBox, TurnEndHook_TO,
};
use crate::json::{JsonStr, JsonText};
use crate::schema;
#[cfg(feature = "checker")]
use crate::schema::Checker;
use crate::tape::{self, ArgToken};

/// Everything a plugin crate usually needs.
pub mod prelude {
    pub use super::{
        Capability, Context, EncodedReply, EventInvariant, Fold, HostInfo, ParsedArgs, Plugin, PluginError, ServiceError, ServiceHandle,
        ServiceProvider, ToolContext, ToolError, ToolReply, TurnEnd, TurnInfo, TypedTool,
    };
    pub use crate::ffi::LogLevel;
    pub use crate::json::{JsonStr, JsonText};
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{json, Value};
}

/// A plugin: a name, the services it injects, a typed config and `apply`.
pub trait Plugin: 'static {
    /// The plugin's name, e.g. `tool-todo`.
    const NAME: &'static str;
    /// The host services `apply` uses (`tools`, `sessions`). The host checks
    /// they exist before `apply`, and [`Context::tools`] refuses a service
    /// that is not listed here.
    const INJECT: &'static [&'static str] = &[];
    /// Package names this plugin also answers to, so compositions written
    /// for the TypeScript harness load it unchanged (tool-todo:
    /// `@deepseek-ai/dsh-tool-todo`). The host finds them by reading the
    /// declarations of the libraries on its plugin path; none by default.
    const PACKAGES: &'static [&'static str] = &[];
    /// Services this plugin provides from `apply` with
    /// [`Context::provide`]; providing a name not listed is an error. `cordis
    /// plugins` lists them without running `apply`. None by default.
    const PROVIDES: &'static [&'static str] = &[];
    /// Host capabilities (see [`crate::capabilities`]) the plugin cannot
    /// work without: a host that lacks one refuses the plugin, naming it
    /// and the ABI version that brings it, before `apply` runs. None by
    /// default.
    const REQUIRES: &'static [Capability] = &[];
    /// Host capabilities the plugin uses when the host has them and does
    /// without otherwise; listed by `cordis plugins`. None by default.
    const USES: &'static [Capability] = &[];
    /// The config; its JSON Schema (from `schemars`) is what the host
    /// validates the entry's `config` against. Use
    /// `#[serde(deny_unknown_fields)]` so a misspelled key is an error.
    type Config: DeserializeOwned + JsonSchema;
    /// Registers the plugin's effects for one entry. An error (or panic)
    /// makes the host dispose every effect registered so far.
    fn apply(ctx: &Context<'_>, config: Self::Config) -> Result<(), PluginError>;
}

/// A failure of `apply` or of a registration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PluginError(pub String);

impl PluginError {
    /// A plugin error with the given message.
    pub fn new(message: impl Into<String>) -> Self {
        PluginError(message.into())
    }
}

#[doc(hidden)]
/// One plugin declaration submitted with [`export_plugin!`](crate::export_plugin).
pub struct PluginRegistration {
    /// Builds the declaration.
    pub declare: fn() -> PluginDecl,
    /// The plugin's name, package names and provided services.
    pub meta: fn() -> PluginMeta,
}

#[doc(hidden)]
/// What a library lists about a plugin besides its declaration.
#[derive(Debug, Clone, Copy)]
pub struct PluginMeta {
    /// The plugin's name.
    pub name: &'static str,
    /// [`Plugin::PACKAGES`].
    pub packages: &'static [&'static str],
    /// [`Plugin::PROVIDES`].
    pub provides: &'static [&'static str],
}

#[doc(hidden)]
/// The [`PluginMeta`] of `P`, for [`PluginRegistration::meta`].
pub fn meta_of<P: Plugin>() -> PluginMeta {
    PluginMeta { name: P::NAME, packages: P::PACKAGES, provides: P::PROVIDES }
}

inventory::collect!(PluginRegistration);

/// Builds the raw declaration of `P`.
#[doc(hidden)]
pub fn declare<P: Plugin>() -> PluginDecl {
    PluginDecl {
        name: P::NAME.into(),
        inject: P::INJECT.iter().map(|s| RString::from(*s)).collect(),
        config_schema: schema::schema_for::<P::Config>().to_string().into(),
        requires: P::REQUIRES.iter().map(|c| Requirement { capability: c.id(), since: c.since }).collect(),
        uses: P::USES.iter().map(Capability::id).collect(),
        apply: apply_plugin::<P>,
        extension: no_extension,
    }
}

/// The plugin-side extension lookup of an SDK plugin: the SDK implements
/// no contract beyond 1.0 yet.
extern "C" fn no_extension(_name: RStr<'_>, _version: u32) -> ROption<ServiceBox> {
    ROption::RNone
}

/// A host capability: a named, versioned contract the host may offer, and
/// the ABI version that brought it. The ones this SDK knows are in
/// [`crate::capabilities`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// The name (`host.info`).
    pub name: &'static str,
    /// The contract's version.
    pub version: u32,
    /// The ABI version that brought it.
    pub since: AbiVersion,
}

impl Capability {
    /// The raw (name, version).
    pub fn id(&self) -> CapabilityId {
        CapabilityId { name: self.name.into(), version: self.version }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} version {} (cordis-abi {})", self.name, self.version, self.since)
    }
}

/// What the host says about itself through [`crate::capabilities::HOST_INFO`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct HostInfo {
    /// The ABI version the host speaks.
    pub abi: HostAbi,
    /// The host program's name (`cordis`).
    pub host: String,
    /// The host program's version.
    pub version: String,
    /// Every capability the host offers, as `name@version`.
    pub capabilities: Vec<String>,
}

/// The ABI version in a [`HostInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub struct HostAbi {
    /// ABI major.
    pub major: u32,
    /// ABI minor.
    pub minor: u32,
}

extern "C" fn apply_plugin<P: Plugin>(ctx: HostContextRef<'_>, config: RStr<'_>) -> RResult<(), RString> {
    let outcome = guard(P::NAME, "apply", || {
        let config: P::Config = serde_json::from_str(config.as_str()).map_err(|e| format!("plugin {} could not read its config: {e}", P::NAME))?;
        let context = Context { raw: &ctx, plugin: P::NAME, inject: P::INJECT, provides: P::PROVIDES, requires: P::REQUIRES };
        P::apply(&context, config).map_err(|e| e.0)
    });
    match outcome {
        Ok(()) => ROk(()),
        Err(e) => RErr(e.into()),
    }
}

/// The root module of a library: every plugin submitted in this crate,
/// sorted by name. Used by [`export_library!`](crate::export_library).
#[doc(hidden)]
pub fn library_root() -> PluginLibraryRef {
    use abi_stable::prefix_type::PrefixTypeTrait;
    quiet_panics();
    PluginLibrary { abi: built_against, plugins: collect_plugins, packages: collect_packages, provides: collect_provides }.leak_into_prefix()
}

extern "C" fn built_against() -> AbiVersion {
    crate::ABI_VERSION
}

thread_local! {
    static LAST_PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Inside a plugin library (which carries its own copy of `std`), replaces
/// the default panic hook, which prints to the host's stderr, with one that
/// records where the panic happened; [`guard`] puts that place in the error
/// it returns, so the host reports the panic once, as an error.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
        LAST_PANIC_AT.with(|slot| *slot.borrow_mut() = at);
    }));
}

extern "C" fn collect_packages() -> RVec<PackageName> {
    let collected = catch_unwind(|| {
        let mut names: Vec<PackageName> = Vec::new();
        for registration in inventory::iter::<PluginRegistration> {
            let meta = (registration.meta)();
            names.extend(meta.packages.iter().map(|p| PackageName { package: (*p).into(), plugin: meta.name.into() }));
        }
        names.sort_by(|a, b| a.package.as_str().cmp(b.package.as_str()));
        names
    });
    collected.unwrap_or_default().into_iter().collect()
}

extern "C" fn collect_provides() -> RVec<ProvidedService> {
    let collected = catch_unwind(|| {
        let mut out: Vec<ProvidedService> = Vec::new();
        for registration in inventory::iter::<PluginRegistration> {
            let meta = (registration.meta)();
            out.extend(meta.provides.iter().map(|s| ProvidedService { plugin: meta.name.into(), service: (*s).into() }));
        }
        out.sort_by(|a, b| (a.plugin.as_str(), a.service.as_str()).cmp(&(b.plugin.as_str(), b.service.as_str())));
        out
    });
    collected.unwrap_or_default().into_iter().collect()
}

extern "C" fn collect_plugins() -> RVec<PluginDecl> {
    let collected = catch_unwind(|| {
        let mut decls: Vec<PluginDecl> = inventory::iter::<PluginRegistration>.into_iter().map(|r| (r.declare)()).collect();
        decls.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        decls
    });
    // A panic while building declarations leaves the library with no plugins,
    // which the host reports as "exports no plugins".
    collected.unwrap_or_default().into_iter().collect()
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
fn guard_named<T>(plugin: &str, entry: impl FnOnce() -> String, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let at = LAST_PANIC_AT.with(|slot| slot.borrow_mut().take());
            let at = at.map(|a| format!(" (at {a})")).unwrap_or_default();
            Err(format!("plugin {plugin} panicked in {}: {}{at}", entry(), panic_message(&*payload)))
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-text panic payload".into()
    }
}

/// The host side of a fiber context, with the borrow of the raw object
/// erased so [`Context`] needs one lifetime.
trait RawHost {
    fn entry_id(&self) -> RString;
    fn has_service(&self, name: &str) -> bool;
    fn register_tool(&self, tool: ToolBox) -> RResult<(), RString>;
    fn own_event_type(&self, event_type: &str, validator: EventValidatorBox) -> RResult<(), RString>;
    fn register_projection(&self, projection: ProjectionBox) -> RResult<(), RString>;
    fn log(&self, level: LogLevel, message: &str);
    fn provide(&self, name: &str, service: ServiceBox) -> RResult<(), RString>;
    fn service(&self, name: &str) -> RResult<ServiceBox, RString>;
    fn own_surface_event_type(&self, event_type: &str, validator: EventValidatorBox) -> RResult<(), RString>;
    fn on_turn_end(&self, hook: TurnEndHookBox) -> RResult<(), RString>;
    fn capability(&self, name: &str, version: u32, request: &str) -> RResult<RString, RString>;
    fn capability_with(&self, name: &str, version: u32, request: &str, object: ServiceBox) -> RResult<RString, RString>;
}

impl RawHost for HostContextRef<'_> {
    fn entry_id(&self) -> RString {
        HostContext_TO::entry_id(self)
    }
    fn has_service(&self, name: &str) -> bool {
        HostContext_TO::has_service(self, name.into())
    }
    fn register_tool(&self, tool: ToolBox) -> RResult<(), RString> {
        HostContext_TO::register_tool(self, tool)
    }
    fn own_event_type(&self, event_type: &str, validator: EventValidatorBox) -> RResult<(), RString> {
        HostContext_TO::own_event_type(self, event_type.into(), validator)
    }
    fn register_projection(&self, projection: ProjectionBox) -> RResult<(), RString> {
        HostContext_TO::register_projection(self, projection)
    }
    fn log(&self, level: LogLevel, message: &str) {
        HostContext_TO::log(self, level, message.into())
    }
    fn provide(&self, name: &str, service: ServiceBox) -> RResult<(), RString> {
        HostContext_TO::provide(self, name.into(), service)
    }
    fn service(&self, name: &str) -> RResult<ServiceBox, RString> {
        HostContext_TO::service(self, name.into())
    }
    fn own_surface_event_type(&self, event_type: &str, validator: EventValidatorBox) -> RResult<(), RString> {
        HostContext_TO::own_surface_event_type(self, event_type.into(), validator)
    }
    fn on_turn_end(&self, hook: TurnEndHookBox) -> RResult<(), RString> {
        HostContext_TO::on_turn_end(self, hook)
    }
    fn capability(&self, name: &str, version: u32, request: &str) -> RResult<RString, RString> {
        HostContext_TO::capability(self, name.into(), version, request.into(), ROption::RNone)
    }
    fn capability_with(&self, name: &str, version: u32, request: &str, object: ServiceBox) -> RResult<RString, RString> {
        HostContext_TO::capability(self, name.into(), version, request.into(), ROption::RSome(object))
    }
}

/// The calling side of a tool execution, with the borrow erased.
trait RawExec {
    fn call_id(&self) -> RString;
    fn has_session(&self) -> bool;
    fn append(&self, event_type: &str, data: JsonStr<'_>) -> RResult<u64, RString>;
    fn capability(&self, name: &str, version: u32, request: &str) -> RResult<RString, RString>;
}

impl RawExec for ExecContextRef<'_> {
    fn call_id(&self) -> RString {
        ExecContext_TO::call_id(self)
    }
    fn has_session(&self) -> bool {
        ExecContext_TO::has_session(self)
    }
    fn append(&self, event_type: &str, data: JsonStr<'_>) -> RResult<u64, RString> {
        ExecContext_TO::append(self, event_type.into(), data)
    }
    fn capability(&self, name: &str, version: u32, request: &str) -> RResult<RString, RString> {
        ExecContext_TO::capability(self, name.into(), version, request.into(), ROption::RNone)
    }
}

/// Uses `capability` through `call`: `Ok(None)` when the host does not offer
/// it, the answer as JSON otherwise.
fn use_capability(
    capability: &Capability,
    request: &impl Serialize,
    call: impl FnOnce(&str, u32, &str) -> RResult<RString, RString>,
) -> Result<Option<Value>, String> {
    let request = serde_json::to_string(request).map_err(|e| format!("cannot encode the request to {capability}: {e}"))?;
    match call(capability.name, capability.version, &request).into_result() {
        Ok(answer) => serde_json::from_str(answer.as_str()).map(Some).map_err(|e| format!("{capability} answered with text that is not JSON: {e}")),
        Err(e) if e.as_str().starts_with(UNKNOWN_CAPABILITY) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// How a host's refusal of a capability it does not offer begins.
#[doc(hidden)]
pub const UNKNOWN_CAPABILITY: &str = "unknown capability";

/// The fiber context `apply` receives.
pub struct Context<'a> {
    raw: &'a dyn RawHost,
    plugin: &'static str,
    inject: &'static [&'static str],
    provides: &'static [&'static str],
    requires: &'static [Capability],
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

    /// Provides the service `name` (listed in [`Plugin::PROVIDES`]) in the
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
    /// otherwise. A capability listed in [`Plugin::REQUIRES`] is always
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

    /// Whether `capability` is one of this plugin's [`Plugin::REQUIRES`].
    pub fn requires(&self, capability: &Capability) -> bool {
        self.requires.contains(capability)
    }
}

/// What a turn-end hook is told about the turn the model just ended.
#[derive(Debug, Clone, Deserialize)]
pub struct TurnInfo {
    /// The session's id.
    pub session: String,
    /// The turn's number.
    pub turn: u64,
    /// The step the model ended it in.
    pub step: u64,
    /// The model's last text.
    #[serde(default)]
    pub text: String,
}

/// A hook run when the model ends a turn (see [`Context::on_turn_end`]).
pub trait TurnEnd: Send + Sync + 'static {
    /// Called with the turn; `cx` appends this plugin's event types to the
    /// session. Return `true` to let the model take another step.
    ///
    /// # Errors
    /// A short message; the host logs it and ends the turn as usual.
    fn turn_end(&self, turn: &TurnInfo, cx: &ToolContext<'_>) -> Result<bool, String>;
}

struct TurnEndAdapter<H> {
    inner: H,
    plugin: &'static str,
}

impl<H: TurnEnd> TurnEndHook for TurnEndAdapter<H> {
    fn turn_end(&self, turn: RStr<'_>, cx: ExecContextRef<'_>) -> RResult<bool, RString> {
        let outcome = guard(self.plugin, "turn_end", || {
            let info: TurnInfo = serde_json::from_str(turn.as_str()).map_err(|e| format!("the host sent a turn this SDK cannot read: {e}"))?;
            let context = ToolContext { raw: &cx };
            self.inner.turn_end(&info, &context)
        });
        match outcome {
            Ok(b) => ROk(b),
            Err(e) => RErr(e.into()),
        }
    }

    fn extension(&self, _name: RStr<'_>, _version: u32) -> ROption<ServiceBox> {
        ROption::RNone
    }
}

/// A service implemented by a plugin: named requests, JSON in and out.
pub trait ServiceProvider: Send + Sync + 'static {
    /// Handles one request. `args` is the parsed JSON arguments.
    ///
    /// # Errors
    /// A short message the caller sees (an unknown method, bad arguments).
    fn call(&self, method: &str, args: Value) -> Result<Value, ServiceError>;
}

/// The error of a service call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ServiceError(pub String);

impl ServiceError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        ServiceError(message.into())
    }
}

struct ProviderAdapter<S> {
    inner: S,
    plugin: &'static str,
    service: String,
}

impl<S: ServiceProvider> Service for ProviderAdapter<S> {
    fn call(&self, method: RStr<'_>, args: RStr<'_>) -> RResult<RString, RString> {
        let outcome = guard_named(
            self.plugin,
            || format!("service {} method {}", self.service, method.as_str()),
            || {
                let args: Value = if args.as_str().trim().is_empty() {
                    Value::Null
                } else {
                    serde_json::from_str(args.as_str()).map_err(|e| format!("service {}: the arguments are not JSON: {e}", self.service))?
                };
                self.inner.call(method.as_str(), args).map(|v| v.to_string()).map_err(|e| e.0)
            },
        );
        match outcome {
            Ok(text) => ROk(text.into()),
            Err(e) => RErr(e.into()),
        }
    }
}

/// A handle on a service, from [`Context::service`].
pub struct ServiceHandle {
    raw: ServiceBox,
    name: String,
}

impl ServiceHandle {
    /// The service's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Calls `method` with `args` serialized as JSON.
    ///
    /// # Errors
    /// The provider's error, or the host's when no provider is live.
    pub fn call(&self, method: &str, args: &impl Serialize) -> Result<Value, ServiceError> {
        let text = serde_json::to_string(args).map_err(|e| ServiceError(format!("cannot encode the arguments: {e}")))?;
        let reply = self.raw.call(method.into(), text.as_str().into()).into_result().map_err(|e| ServiceError(e.into()))?;
        serde_json::from_str(reply.as_str()).map_err(|e| ServiceError(format!("service {} answered text that is not JSON: {e}", self.name)))
    }
}

impl std::fmt::Debug for ServiceHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceHandle").field("name", &self.name).finish()
    }
}

/// The `tools` service as a plugin sees it.
pub struct Tools<'a> {
    ctx: &'a Context<'a>,
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

/// A model-facing tool with typed arguments.
///
/// Implement [`TypedTool::execute`]: it is the whole tool. The host checks
/// the arguments against [`TypedTool::parameters`] before the call, so
/// `execute` receives them parsed and valid. Every call goes through
/// `execute` unless you opt into a faster path, in one of two steps, each a
/// method with a default that calls the one before it:
///
/// 1. [`TypedTool::execute_encoded`] returns the structured value already
///    encoded, saving the `Value` the default builds on every call;
/// 2. [`TypedTool::execute_parsed`] reads the host's parse of the arguments
///    into a type that borrows its strings, saving their copies.
///
/// An override must answer exactly as `execute` would; test both paths
/// with the same inputs (docs/plugins.md shows how).
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments object. Its schema is the tool's `parameters` unless
    /// [`TypedTool::parameters`] is overridden.
    type Args: DeserializeOwned + JsonSchema;
    /// The name the model calls.
    fn name(&self) -> &str;
    /// The model-facing description.
    fn description(&self) -> String;
    /// The JSON Schema of the arguments.
    fn parameters(&self) -> Value {
        schema::schema_for::<Self::Args>()
    }
    /// Runs one call with arguments already validated and parsed.
    ///
    /// # Errors
    /// A [`ToolError`] becomes a result `{isError: true, text: "Error: ..."}`.
    fn execute(&self, args: Self::Args, cx: &ToolContext<'_>) -> Result<ToolReply, ToolError>;
    /// Runs one call like [`TypedTool::execute`], returning the structured
    /// value already encoded as JSON ([`JsonText`]), which is how it crosses
    /// to the host. The default encodes `execute`'s value. A tool whose
    /// value is a serializable struct may override it to encode the struct
    /// directly (see [`EncodedReply::new`]) and skip building a `Value` on
    /// every call; it must reply exactly as `execute` would.
    ///
    /// # Errors
    /// As [`TypedTool::execute`].
    fn execute_encoded(&self, args: Self::Args, cx: &ToolContext<'_>) -> Result<EncodedReply, ToolError> {
        let reply = self.execute(args, cx)?;
        let value = match reply.value {
            Some(v) => Some(JsonText::encode(&v).map_err(|e| ToolError(format!("cannot encode the result value: {e}")))?),
            None => None,
        };
        Ok(EncodedReply { text: reply.text, value })
    }
    /// Runs one call from the host's parse of its arguments (already
    /// checked against the schema), like [`TypedTool::execute_encoded`].
    /// The default builds [`TypedTool::Args`] from it, which copies every
    /// string of the arguments, and calls `execute_encoded`.
    ///
    /// A tool on a hot path may override it to deserialize, with
    /// [`ParsedArgs::deserialize`], a type that borrows its strings
    /// (`&'a str`, or `Cow<'a, str>` with `#[serde(borrow)]`) for the
    /// length of the call instead. It must answer exactly as
    /// `execute_encoded` would for the same arguments: a host that passes
    /// the argument text rather than its parse calls `execute_encoded`.
    ///
    /// # Errors
    /// As [`TypedTool::execute`]; `invalid arguments: ...` when the parse
    /// does not have the shape of the arguments type.
    fn execute_parsed(&self, args: ParsedArgs<'_>, cx: &ToolContext<'_>) -> Result<EncodedReply, ToolError> {
        self.execute_encoded(args.deserialize()?, cx)
    }
    /// A card describing a call for interactive hosts. The default is a
    /// generic card titled with the tool's name carrying the arguments.
    fn present_call(&self, args: &Value) -> Value {
        serde_json::json!({"kind": "generic", "title": self.name(), "arguments": args})
    }
    /// The JSON Schema of the structured value a successful call returns
    /// ([`ToolReply::value`]), when the tool has one; `None` (the default)
    /// declares nothing. Use [`schema::schema_for`] on the value's type.
    fn output_schema(&self) -> Option<Value> {
        None
    }
}

/// A call's arguments as the host parsed them and checked them against the
/// tool's schema, handed to [`TypedTool::execute_parsed`]: a list of
/// [`ArgToken`]s (see [`crate::tape`]) whose strings live in the host for
/// the length of the call.
#[derive(Debug, Clone, Copy)]
pub struct ParsedArgs<'a> {
    tokens: &'a [ArgToken<'a>],
}

impl<'a> ParsedArgs<'a> {
    /// The arguments of a call, from the host's tokens.
    pub fn new(tokens: &'a [ArgToken<'a>]) -> Self {
        ParsedArgs { tokens }
    }

    /// Deserializes the arguments into `T`, whose strings may borrow from
    /// the host's parse for `'a` (see [`tape::from_tokens`]).
    ///
    /// # Errors
    /// `invalid arguments: <serde's message>` when the value does not have
    /// `T`'s shape.
    pub fn deserialize<T: Deserialize<'a>>(&self) -> Result<T, ToolError> {
        tape::from_tokens(self.tokens).map_err(|e| ToolError(format!("invalid arguments: {e}")))
    }
}

/// A successful tool result: the text for the model and a structured value.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    /// What the model reads.
    pub text: String,
    /// The structured value, for hosts and tests.
    pub value: Option<Value>,
}

/// A successful tool result whose structured value is already encoded:
/// what [`TypedTool::execute_encoded`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedReply {
    /// What the model reads.
    pub text: String,
    /// The structured value, encoded (see [`JsonText`] for how to make one).
    pub value: Option<JsonText>,
}

impl EncodedReply {
    /// A reply whose value is `value` encoded as JSON.
    ///
    /// # Errors
    /// When `value` cannot be encoded (a map with non-string keys, a
    /// failing `Serialize` impl).
    pub fn new(text: String, value: &impl Serialize) -> Result<EncodedReply, ToolError> {
        let value = JsonText::encode(value).map_err(|e| ToolError(format!("cannot encode the result value: {e}")))?;
        Ok(EncodedReply { text, value: Some(value) })
    }
}

/// A failed tool call; the model reads `Error: <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    /// A tool error with the given message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(message.into())
    }
}

/// The encoder's or parser's message as the tool's error, so that `?`
/// works on [`crate::JsonText::parse`], [`crate::JsonText::encode`] and
/// [`crate::JsonText::with_member`] inside a tool.
impl From<serde_json::Error> for ToolError {
    fn from(e: serde_json::Error) -> Self {
        ToolError(e.to_string())
    }
}

/// What a typed tool sees of the call it runs.
pub struct ToolContext<'a> {
    raw: &'a dyn RawExec,
}

impl ToolContext<'_> {
    /// The model's id for this call.
    pub fn call_id(&self) -> String {
        self.raw.call_id().into()
    }

    /// Whether an agent session owns this call.
    pub fn has_session(&self) -> bool {
        self.raw.has_session()
    }

    /// Appends an event of an owned type to the calling agent's session;
    /// returns its `seq`.
    ///
    /// The data must pass the type's invariant: the host checks that the
    /// log's structure rules allow it, but does not run the invariant again
    /// on its owner's own appends (the invariant guards events that come
    /// from elsewhere: replay, import, the host), nor parse the data again
    /// (it is JSON because `serde_json` encoded it). Append what your tool
    /// has checked.
    ///
    /// # Errors
    /// When no agent is calling, the type is not owned by this plugin, the
    /// log's rules refuse it, or the write fails.
    pub fn append<D: Serialize>(&self, event_type: &str, data: &D) -> Result<u64, ToolError> {
        let text = JsonText::encode(data).map_err(|e| ToolError(format!("cannot encode {event_type} data: {e}")))?;
        self.append_json(event_type, text.as_json_str())
    }

    /// [`ToolContext::append`] with the data already encoded: a
    /// [`JsonStr`] from a [`JsonText`] (`text.as_json_str()`).
    ///
    /// # Errors
    /// As [`ToolContext::append`].
    pub fn append_json(&self, event_type: &str, data: JsonStr<'_>) -> Result<u64, ToolError> {
        self.raw.append(event_type, data).into_result().map_err(|e| ToolError(e.into()))
    }

    /// Uses a host capability during this call, as [`Context::capability`].
    ///
    /// # Errors
    /// As [`Context::capability`].
    pub fn capability(&self, capability: &Capability, request: &impl Serialize) -> Result<Option<Value>, ToolError> {
        use_capability(capability, request, |n, v, r| self.raw.capability(n, v, r)).map_err(ToolError)
    }

    /// [`Context::host_info`] during a call.
    ///
    /// # Errors
    /// As [`Context::host_info`].
    pub fn host_info(&self) -> Result<Option<HostInfo>, ToolError> {
        read_host_info(self.capability(&crate::capabilities::HOST_INFO, &serde_json::json!({}))?).map_err(ToolError)
    }
}

fn read_host_info(answer: Option<Value>) -> Result<Option<HostInfo>, String> {
    match answer {
        None => Ok(None),
        Some(value) => serde_json::from_value(value).map(Some).map_err(|e| format!("the host's host.info answer does not read: {e}")),
    }
}

struct ToolAdapter<T: TypedTool> {
    name: String,
    description: String,
    parameters: String,
    plugin: &'static str,
    tool: T,
}

impl<T: TypedTool> ToolAdapter<T> {
    fn run(&self, arguments: &str, cx: &ExecContextRef<'_>) -> Result<EncodedReply, String> {
        // The host has checked the text against the tool's schema; what is
        // left is the typed parse, once.
        let args: T::Args = parse_typed(arguments)?;
        self.run_args(args, cx)
    }

    fn run_args(&self, args: T::Args, cx: &ExecContextRef<'_>) -> Result<EncodedReply, String> {
        let context = ToolContext { raw: cx };
        self.tool.execute_encoded(args, &context).map_err(|e| e.0)
    }

    fn outcome(result: Result<EncodedReply, String>) -> ToolOutcome {
        match result {
            Ok(reply) => ToolOutcome { is_error: false, text: reply.text.into(), value: reply.value.into() },
            Err(message) => ToolOutcome { is_error: true, text: format!("Error: {message}").into(), value: ROption::RNone },
        }
    }
}

/// Parses a call's argument text straight into the tool's typed arguments.
///
/// # Errors
/// `invalid arguments: ...`: not valid JSON (as [`parse_arguments`] says
/// it), or not the shape of `A`.
pub fn parse_typed<A: DeserializeOwned>(arguments: &str) -> Result<A, String> {
    serde_json::from_str(arguments).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => format!("invalid arguments: {e}"),
        _ => format!("invalid arguments: not valid JSON ({})", json_error(&e)),
    })
}

/// How deeply arrays and objects may nest in a call's arguments: the JSON
/// parser's own limit, which keeps a hostile `[[[[...` from exhausting the
/// stack. Deeper text is refused as not valid JSON, naming this limit.
pub const MAX_ARGUMENT_DEPTH: usize = 127;

/// How many schema violations one error lists; the rest are counted. A
/// runaway call with thousands of bad items gets an error a model can read.
pub const MAX_LISTED_VIOLATIONS: usize = 20;

/// Parses a call's raw argument text and checks it against the tool's
/// schema: what the host does with every call before the tool runs (feature
/// `checker`).
///
/// # Errors
/// A one-line message starting with `invalid arguments:` when the text is
/// not JSON (with the line and column, and [`MAX_ARGUMENT_DEPTH`] when it
/// nests too deeply), not an object, or violates the schema (the first
/// [`MAX_LISTED_VIOLATIONS`] violations listed, the rest counted).
#[cfg(feature = "checker")]
pub fn parse_arguments(arguments: &str, checker: &Checker) -> Result<Value, String> {
    let value: Value = serde_json::from_str(arguments).map_err(|e| format!("invalid arguments: not valid JSON ({})", json_error(&e)))?;
    if !value.is_object() {
        return Err(format!("invalid arguments: $ must be an object, got {}", schema::describe_value(&value)));
    }
    let violations = checker.violations(&value);
    if !violations.is_empty() {
        let listed = schema::join(&violations[..violations.len().min(MAX_LISTED_VIOLATIONS)]);
        let more = violations.len().saturating_sub(MAX_LISTED_VIOLATIONS);
        return Err(match more {
            0 => format!("invalid arguments: {listed}"),
            1 => format!("invalid arguments: {listed}; and 1 more violation"),
            n => format!("invalid arguments: {listed}; and {n} more violations"),
        });
    }
    Ok(value)
}

/// The parser's message, with two of its terse ones explained: the depth
/// limit (`serde_json` says only "recursion limit exceeded") and bad `\u`
/// escapes, where a lone surrogate is reported as an "unexpected end of hex
/// escape" or a "lone leading surrogate".
fn json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if text.starts_with("recursion limit exceeded") {
        format!("arrays and objects nested more than {MAX_ARGUMENT_DEPTH} levels deep at line {} column {}", e.line(), e.column())
    } else if text.contains("hex escape") || text.starts_with("invalid unicode code point") {
        format!("{text}: a \\u escape takes four hex digits, and a surrogate (\\uD800 to \\uDFFF) must be half of a pair")
    } else {
        text
    }
}

impl<T: TypedTool> Tool for ToolAdapter<T> {
    fn name(&self) -> RString {
        self.name.as_str().into()
    }

    fn description(&self) -> RString {
        self.description.as_str().into()
    }

    fn parameters(&self) -> RString {
        self.parameters.as_str().into()
    }

    fn execute(&self, arguments: RStr<'_>, cx: ExecContextRef<'_>) -> ToolOutcome {
        Self::outcome(guard_named(self.plugin, || format!("{}.execute", self.name), || self.run(arguments.as_str(), &cx)))
    }

    fn execute_tokens(&self, _arguments: RStr<'_>, tokens: RSlice<'_, ArgToken<'_>>, cx: ExecContextRef<'_>) -> ToolOutcome {
        Self::outcome(guard_named(
            self.plugin,
            || format!("{}.execute", self.name),
            || {
                // The host's parse, checked against the schema: no text to
                // parse again, only the typed arguments to build.
                let context = ToolContext { raw: &cx };
                self.tool.execute_parsed(ParsedArgs::new(tokens.as_slice()), &context).map_err(|e| e.0)
            },
        ))
    }

    fn output_schema(&self) -> RString {
        let entry = format!("{}.output_schema", self.name);
        match guard(self.plugin, &entry, || Ok(self.tool.output_schema())) {
            Ok(Some(schema)) => schema.to_string().into(),
            _ => RString::new(),
        }
    }

    fn present_call(&self, arguments: RStr<'_>) -> RString {
        let entry = format!("{}.present_call", self.name);
        let card = guard(self.plugin, &entry, || {
            let args: Value = serde_json::from_str(arguments.as_str()).unwrap_or(Value::String(arguments.to_string()));
            Ok(self.tool.present_call(&args))
        });
        match card {
            Ok(card) => card.to_string().into(),
            Err(message) => serde_json::json!({"kind": "generic", "title": self.name, "error": message}).to_string().into(),
        }
    }

    fn extension(&self, _name: RStr<'_>, _version: u32) -> ROption<ServiceBox> {
        ROption::RNone
    }
}

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

struct InvariantAdapter<V> {
    inner: V,
    plugin: &'static str,
    event_type: String,
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

struct FoldAdapter<F> {
    inner: Arc<F>,
    plugin: &'static str,
}

/// The [`crate::extensions::COMPACTION_CONTEXT`] service of one projection:
/// `contribute` `{"state": STATE}` → `{"content": [BLOCK, ...]}` or `null`.
struct CompactionContext<F> {
    inner: Arc<F>,
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

fn encode<S: Serialize>(state: &S) -> Result<String, String> {
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

/// Exports a [`Plugin`] from this library: submits its declaration to the
/// library's root module.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        $crate::inventory::submit! {
            $crate::sdk::PluginRegistration {
                declare: $crate::sdk::declare::<$plugin>,
                meta: $crate::sdk::meta_of::<$plugin>,
            }
        }
    };
}

/// Generates the library's `abi_stable` root module listing every plugin
/// exported with [`export_plugin!`](crate::export_plugin). Use it once per
/// `cdylib` crate; the crate must also depend on `abi_stable`.
#[macro_export]
macro_rules! export_library {
    () => {
        #[::abi_stable::export_root_module]
        fn cordis_plugin_library_root() -> $crate::PluginLibraryRef {
            $crate::sdk::library_root()
        }
    };
}

#[cfg(all(test, feature = "checker"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checker() -> Checker {
        Checker::new(json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "string"}}},
            "required": ["items"]
        }))
        .unwrap()
    }

    #[test]
    fn nesting_up_to_the_limit_parses_and_deeper_names_the_limit() {
        let nested = |depth: usize| format!("{{\"items\": [], \"x\": {}{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1));
        assert!(parse_arguments(&nested(MAX_ARGUMENT_DEPTH), &checker()).is_ok());
        let err = parse_arguments(&nested(MAX_ARGUMENT_DEPTH + 1), &checker()).unwrap_err();
        assert_eq!(err, "invalid arguments: not valid JSON (arrays and objects nested more than 127 levels deep at line 1 column 146)");
        let err = parse_arguments(&"[".repeat(1_000_000), &checker()).unwrap_err();
        assert!(err.contains("nested more than 127 levels deep at line 1 column 128"), "{err}");
    }

    #[test]
    fn lone_surrogates_are_explained() {
        for (text, at) in [(r#""\ud800""#, "column 19"), (r#""\udc00x""#, "column 18")] {
            let err = parse_arguments(&format!("{{\"items\": [{text}]}}"), &checker()).unwrap_err();
            assert!(err.starts_with("invalid arguments: not valid JSON ("), "{err}");
            assert!(err.contains(at), "{err}");
            assert!(err.ends_with(": a \\u escape takes four hex digits, and a surrogate (\\uD800 to \\uDFFF) must be half of a pair)"), "{err}");
        }
    }

    #[test]
    fn other_parse_errors_keep_the_parser_message() {
        let err = parse_arguments("{\"items\": [}", &checker()).unwrap_err();
        assert_eq!(err, "invalid arguments: not valid JSON (expected value at line 1 column 12)");
    }

    #[test]
    fn violations_past_the_listed_limit_are_counted() {
        let items = |n: usize| json!({"items": vec![0; n]}).to_string();
        let err = parse_arguments(&items(MAX_LISTED_VIOLATIONS), &checker()).unwrap_err();
        assert_eq!(err.matches("must be a string").count(), MAX_LISTED_VIOLATIONS);
        assert!(err.ends_with("$.items[19] must be a string, got the number 0"), "{err}");
        let err = parse_arguments(&items(MAX_LISTED_VIOLATIONS + 1), &checker()).unwrap_err();
        assert!(err.ends_with("$.items[19] must be a string, got the number 0; and 1 more violation"), "{err}");
        let err = parse_arguments(&items(5000), &checker()).unwrap_err();
        assert_eq!(err.matches("must be a string").count(), MAX_LISTED_VIOLATIONS);
        assert!(err.starts_with("invalid arguments: $.items[0] must be a string, got the number 0; $.items[1] "), "{err}");
        assert!(err.ends_with("; and 4980 more violations"), "{err}");
    }
}
