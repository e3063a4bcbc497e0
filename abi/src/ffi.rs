// abi_stable 0.11's `sabi_trait` expands to impls inside a const block, which
// newer rustc flags; the expansion is correct, the lint is about style.
#![allow(non_local_definitions)]

//! The raw types that cross the library boundary: cordis-abi 1.
//!
//! Every type here derives `StableAbi`, and `init_root_module` checks the
//! layout of every type reachable from the root module when the host loads
//! a library. Within ABI major 1 these types are frozen: no field, method or
//! variant is ever added, removed or changed, so a library built against
//! any 1.x loads in every 1.x host. What a later 1.x adds reaches the other
//! side through lookups by name and version, each contract frozen once
//! released:
//!
//! - host capabilities: [`HostContext::capability`] and
//!   [`ExecContext::capability`] (what the host offers is listed by
//!   [`HostContext::capabilities`]); a plugin declares the ones it cannot
//!   work without in [`PluginDecl::requires`], and a host lacking one
//!   refuses the plugin before its `apply` runs;
//! - plugin-side extensions: [`PluginDecl::extension`] and the `extension`
//!   method of the plugin-side interfaces (tools, event validators,
//!   projections, turn-end hooks), which the host asks for a newer contract
//!   before falling back to the 1.0 behaviour.
//!
//! The rules and the changelog of ABI versions are in docs/abi.md.
//!
//! Conventions:
//! - every payload is JSON text (`RString` / `RStr`); the two the host
//!   writes or keeps verbatim, an appended event's data and a tool's
//!   structured value, are [`JsonStr`] / [`JsonText`], JSON by construction;
//! - fallible calls return `RResult<_, RString>` whose error is a one-line,
//!   human-readable message;
//! - host-side objects (`HostContext`, `ExecContext`) are borrowed for the
//!   duration of one call; plugin-side objects (`Tool`, `EventValidator`,
//!   `Projection`) are boxed and owned by the host until their fiber is
//!   disposed.

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    sabi_trait,
    sabi_types::RRef,
    sabi_types::VersionStrings,
    std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec},
    StableAbi,
};

use crate::json::{JsonStr, JsonText};
use crate::tape::ArgToken;

/// An ABI version: `major.minor` of this interface, its own number (not the
/// crate's package version).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AbiVersion {
    /// Bumped by a breaking change; a host loads libraries of its own major.
    pub major: u32,
    /// Bumped by each release that adds a capability or an extension.
    pub minor: u32,
}

impl std::fmt::Display for AbiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A capability or an extension contract: a name and the version of its
/// contract (`host.info` version 1). A released (name, version) never
/// changes meaning; a changed contract is the next version.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct CapabilityId {
    /// The name, dotted lower case (`host.info`).
    pub name: RString,
    /// The contract's version, from 1.
    pub version: u32,
}

/// A host capability a plugin cannot work without.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The capability.
    pub capability: CapabilityId,
    /// The ABI version that brought it, so that an older host can say which
    /// host the plugin needs.
    pub since: AbiVersion,
}

/// The root module a plugin library exports. Frozen for ABI major 1: every
/// field is in the prefix and none is ever added.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginLibraryRef)))]
#[sabi(missing_field(panic))]
pub struct PluginLibrary {
    /// The ABI version the library was built against (major 1, and the
    /// minor of the cordis-abi crate it was built with).
    pub abi: extern "C" fn() -> AbiVersion,
    /// Returns every plugin declaration the library exports, in declaration
    /// order. Called once per load.
    pub plugins: extern "C" fn() -> RVec<PluginDecl>,
    /// Returns the package names the library implements, each with the
    /// plugin (export) it selects, e.g. `@deepseek-ai/dsh-tool-todo` →
    /// `tool-todo`, so a composition written for the TypeScript harness can
    /// name the package.
    pub packages: extern "C" fn() -> RVec<PackageName>,
    /// Returns, per plugin, the services it provides, so the host can list
    /// them without running `apply` (`cordis plugins`).
    #[sabi(last_prefix_field)]
    pub provides: extern "C" fn() -> RVec<ProvidedService>,
}

/// A service a plugin provides.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ProvidedService {
    /// The plugin (a [`PluginDecl::name`]).
    pub plugin: RString,
    /// The service name.
    pub service: RString,
}

/// One package name a library implements and the plugin it selects.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct PackageName {
    /// The package name as compositions write it, e.g.
    /// `@deepseek-ai/dsh-tool-todo`.
    pub package: RString,
    /// The name of the exported plugin (a [`PluginDecl::name`]) it selects.
    pub plugin: RString,
}

impl RootModule for PluginLibraryRef {
    declare_root_module_statics! {PluginLibraryRef}
    const BASE_NAME: &'static str = "cordis_plugin_library";
    const NAME: &'static str = crate::ROOT_MODULE_NAME;
    /// The root module's version for abi_stable's check: the ABI major
    /// alone, fixed for all of 1.x (a host refuses a library of another
    /// major before reading anything else). The minor is [`PluginLibrary::abi`].
    const VERSION_STRINGS: VersionStrings = VersionStrings::new("1.0.0");
}

/// One plugin a library exports.
///
/// The host validates an entry's `config` against `config_schema` before it
/// calls `apply`; `apply` receives the config as JSON text.
#[repr(C)]
#[derive(StableAbi, Clone)]
pub struct PluginDecl {
    /// The plugin's name, e.g. `tool-todo`. Unique within its library.
    pub name: RString,
    /// Names of the host services the plugin requires (`tools`, `sessions`).
    pub inject: RVec<RString>,
    /// JSON Schema (draft 7 unless it names another with `$schema`) of the
    /// plugin's config, as JSON text.
    pub config_schema: RString,
    /// Host capabilities the plugin cannot work without: a host that lacks
    /// one refuses the plugin, naming it, before `apply` runs.
    pub requires: RVec<Requirement>,
    /// Host capabilities the plugin uses when the host has them and does
    /// without otherwise (listed by `cordis plugins`).
    pub uses: RVec<CapabilityId>,
    /// Runs the plugin for one entry: registers its tools, event types and
    /// projections on `ctx`. An `Err` (or a panic, which the SDK turns into an
    /// `Err`) makes the host dispose whatever was registered.
    pub apply: extern "C" fn(ctx: HostContextRef<'_>, config: RStr<'_>) -> RResult<(), RString>,
    /// A plugin-side contract added after 1.0, looked up by name and
    /// version: `RNone` when the plugin does not implement it (every 1.0
    /// plugin), and the host then keeps the 1.0 behaviour.
    pub extension: extern "C" fn(name: RStr<'_>, version: u32) -> ROption<ServiceBox>,
}

/// Severity of a plugin log line.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Diagnostic detail, shown at debug verbosity.
    Debug,
    /// Normal progress.
    Info,
    /// Something the operator should look at.
    Warn,
    /// A failure.
    Error,
}

/// What a plugin's `apply` sees: the context of its fiber.
///
/// Every registration is an effect of the fiber: the host undoes all of them,
/// in reverse order, when the fiber is disposed or when `apply` fails.
#[sabi_trait]
pub trait HostContext {
    /// The id of the composition entry this fiber was applied for.
    fn entry_id(&self) -> RString;
    /// Whether the fiber may use the named service (listed in `inject` and
    /// provided by the host).
    fn has_service(&self, name: RStr<'_>) -> bool;
    /// Registers a tool on the `tools` service. Fails on a duplicate name or
    /// when `tools` is not injected.
    fn register_tool(&self, tool: ToolBox) -> RResult<(), RString>;
    /// Claims ownership of a session event type. Only the owner may append
    /// it; its validator runs on every append and on replay.
    fn own_event_type(&self, event_type: RStr<'_>, validator: EventValidatorBox) -> RResult<(), RString>;
    /// Registers a projection folded over every session's events.
    fn register_projection(&self, projection: ProjectionBox) -> RResult<(), RString>;
    /// Writes a log line attributed to the plugin.
    fn log(&self, level: LogLevel, message: RStr<'_>);
    /// Provides the service `name` in the entry's realm until the fiber is
    /// disposed. Fails when the plugin does not declare `name` among the
    /// services it provides, or another live entry already provides `name`
    /// in that realm (the message names it).
    fn provide(&self, name: RStr<'_>, service: ServiceBox) -> RResult<(), RString>;
    /// A handle on the service `name` as the entry sees it (in its realm):
    /// each call goes to whichever provider is live at that moment, and
    /// fails with a clear message when none is. Fails when `name` is not
    /// injected by the plugin or the entry.
    fn service(&self, name: RStr<'_>) -> RResult<ServiceBox, RString>;
    /// Claims a session event type, like `own_event_type`, that is also a
    /// surface event: each event of the type yields a user-side message
    /// for the model (its data's `text`), and transcripts show it. Its data
    /// must be an object with `"role": "user"` and a string `text`.
    fn own_surface_event_type(&self, event_type: RStr<'_>, validator: EventValidatorBox) -> RResult<(), RString>;
    /// Registers a hook the agent loop runs when the model ends a turn (a
    /// response with no tool calls). Fails when `agent` is not injected.
    fn on_turn_end(&self, hook: TurnEndHookBox) -> RResult<(), RString>;
    /// The host capabilities this host offers, each with its version.
    fn capabilities(&self) -> RVec<CapabilityId>;
    /// Uses host capability `name` at contract `version`: `request` is JSON
    /// text, `object` a callback some capabilities take, and the answer is
    /// JSON text. Fails with a message starting `unknown capability` when
    /// the host does not offer it, or as the capability's contract says.
    #[sabi(last_prefix_field)]
    fn capability(&self, name: RStr<'_>, version: u32, request: RStr<'_>, object: ROption<ServiceBox>) -> RResult<RString, RString>;
}

/// A hook run when the model ends a turn.
#[sabi_trait]
pub trait TurnEndHook: Send + Sync {
    /// `turn` is JSON `{"session": ID, "turn": N, "step": N, "text":
    /// "the model's last text"}`; `cx` appends the plugin's own event types
    /// to that session. Returns `true` to let the model take another step
    /// in the same turn.
    fn turn_end(&self, turn: RStr<'_>, cx: ExecContextRef<'_>) -> RResult<bool, RString>;
    /// A contract added after 1.0 (see [`PluginDecl::extension`]).
    #[sabi(last_prefix_field)]
    fn extension(&self, name: RStr<'_>, version: u32) -> ROption<ServiceBox>;
}

/// An owned [`TurnEndHook`] object.
pub type TurnEndHookBox = TurnEndHook_TO<'static, RBox<()>>;

/// A service: named requests with JSON text in and out.
///
/// Plugins implement it to provide a service ([`HostContext::provide`]); the
/// host implements it for the handles it gives consumers
/// ([`HostContext::service`]). Implementations never panic across the
/// boundary (the SDK catches panics on the provider's side).
#[sabi_trait]
pub trait Service: Send + Sync {
    /// Handles one request: `method` names it, `args` is JSON text; returns
    /// JSON text, or a one-line error.
    #[sabi(last_prefix_field)]
    fn call(&self, method: RStr<'_>, args: RStr<'_>) -> RResult<RString, RString>;
}

/// An owned [`Service`] object.
pub type ServiceBox = Service_TO<'static, RBox<()>>;

/// A borrowed [`HostContext`] object, valid for one `apply` call.
pub type HostContextRef<'a> = HostContext_TO<'a, RRef<'a, ()>>;

/// The result of one tool execution, as the model and the host see it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct ToolOutcome {
    /// `true` when the call was rejected or failed; `text` then starts with
    /// `Error: `.
    pub is_error: bool,
    /// The text returned to the model.
    pub text: RString,
    /// The structured value on success.
    pub value: ROption<JsonText>,
}

/// A model-facing tool implemented by a plugin.
#[sabi_trait]
pub trait Tool: Send + Sync {
    /// The tool's name as the model calls it, e.g. `todo_write`.
    fn name(&self) -> RString;
    /// The model-facing description.
    fn description(&self) -> RString;
    /// JSON Schema of the arguments object, as JSON text.
    fn parameters(&self) -> RString;
    /// Executes one call from the raw JSON text the model sent: for a
    /// caller that holds only the text (the host calls `execute_tokens`).
    /// The implementation parses it into its arguments, refusing what does
    /// not parse (the schema check is the caller's), and never panics
    /// across the boundary.
    fn execute(&self, arguments: RStr<'_>, cx: ExecContextRef<'_>) -> ToolOutcome;
    /// A card describing a call for an interactive host, as JSON text
    /// `{"kind", "title", ...}`.
    fn present_call(&self, arguments: RStr<'_>) -> RString;
    /// JSON Schema of the structured value a successful call returns, as
    /// JSON text, or empty when the tool declares none (MCP clients get it
    /// as the tool's `outputSchema`).
    fn output_schema(&self) -> RString;
    /// Executes one call whose arguments the host has parsed and checked
    /// against `parameters`: `tokens` is that parse (see
    /// [`crate::tape`]), `arguments` the text it came from. What the host
    /// calls; the same contract as `execute`, without parsing the text a
    /// second time.
    fn execute_tokens(&self, arguments: RStr<'_>, tokens: RSlice<'_, ArgToken<'_>>, cx: ExecContextRef<'_>) -> ToolOutcome;
    /// A contract added after 1.0 (see [`PluginDecl::extension`]).
    #[sabi(last_prefix_field)]
    fn extension(&self, name: RStr<'_>, version: u32) -> ROption<ServiceBox>;
}

/// An owned [`Tool`] object.
pub type ToolBox = Tool_TO<'static, RBox<()>>;

/// What a tool sees of the call it is executing.
#[sabi_trait]
pub trait ExecContext {
    /// The call id the model gave this call.
    fn call_id(&self) -> RString;
    /// Whether an agent session owns this call (an agent is calling).
    fn has_session(&self) -> bool;
    /// Appends an event of a type the calling plugin owns to the calling
    /// agent's session; returns the event's `seq`. Fails when no agent is
    /// calling, the type is not owned by this plugin, the session
    /// log's structure rules refuse it, or the event cannot be written
    /// durably. The owner's own invariant is not run again on its own
    /// appends; it guards events that come from elsewhere.
    fn append(&self, event_type: RStr<'_>, data: JsonStr<'_>) -> RResult<u64, RString>;
    /// Uses host capability `name` at contract `version` during this call,
    /// as [`HostContext::capability`] does.
    #[sabi(last_prefix_field)]
    fn capability(&self, name: RStr<'_>, version: u32, request: RStr<'_>, object: ROption<ServiceBox>) -> RResult<RString, RString>;
}

/// A borrowed [`ExecContext`] object, valid for one `execute` call.
pub type ExecContextRef<'a> = ExecContext_TO<'a, RRef<'a, ()>>;

/// The durable-log invariant of an owned event type.
#[sabi_trait]
pub trait EventValidator: Send + Sync {
    /// Checks one event's `data` (JSON text). Runs on append and on replay.
    fn validate(&self, data: RStr<'_>) -> RResult<(), RString>;
    /// A contract added after 1.0 (see [`PluginDecl::extension`]).
    #[sabi(last_prefix_field)]
    fn extension(&self, name: RStr<'_>, version: u32) -> ROption<ServiceBox>;
}

/// An owned [`EventValidator`] object.
pub type EventValidatorBox = EventValidator_TO<'static, RBox<()>>;

/// A fold of a session's events into a small state.
///
/// The host keeps the state (JSON text) per session, calls `apply` only for
/// the event types listed by `types`, and re-folds from the log when the
/// projection is registered or its `version` changes.
#[sabi_trait]
pub trait Projection: Send + Sync {
    /// The state's key, e.g. `todos`.
    fn key(&self) -> RString;
    /// Bumped when the fold changes, so stored states are rebuilt.
    fn version(&self) -> u32;
    /// The event types this projection folds.
    fn types(&self) -> RVec<RString>;
    /// The state before any event, as JSON text.
    fn init(&self) -> RString;
    /// Folds one event (`data` as JSON text) into `state`; returns the new
    /// state.
    fn apply(&self, state: RStr<'_>, event_type: RStr<'_>, data: RStr<'_>) -> RResult<RString, RString>;
    /// Renders the state as a multi-line text view; empty when there is
    /// nothing to show.
    fn render(&self, state: RStr<'_>) -> RString;
    /// Renders the state as a one-line summary; empty when there is nothing
    /// to show.
    fn summary(&self, state: RStr<'_>) -> RString;
    /// A contract added after 1.0 (see [`PluginDecl::extension`]).
    #[sabi(last_prefix_field)]
    fn extension(&self, name: RStr<'_>, version: u32) -> ROption<ServiceBox>;
}

/// An owned [`Projection`] object.
pub type ProjectionBox = Projection_TO<'static, RBox<()>>;
