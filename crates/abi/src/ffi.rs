// abi_stable 0.11's `sabi_trait` expands to impls inside a const block, which
// newer rustc flags; the expansion is correct, the lint is about style.
#![allow(non_local_definitions)]

//! The raw types that cross the library boundary.
//!
//! Every type here derives `StableAbi`, so its layout is part of the check
//! `init_root_module` performs when the host loads a library. Changing any of
//! them is a breaking change of the ABI: bump this crate's minor version (while
//! it is 0.x) so that old libraries are refused with a version error.
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
    package_version_strings, sabi_trait,
    sabi_types::RRef,
    sabi_types::VersionStrings,
    std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec},
    StableAbi,
};

use crate::json::{JsonStr, JsonText};
use crate::tape::ArgToken;

/// The root module a plugin library exports: the list of its plugins.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginLibraryRef)))]
#[sabi(missing_field(panic))]
pub struct PluginLibrary {
    /// Returns every plugin declaration the library exports, in declaration
    /// order. Called once per load.
    #[sabi(last_prefix_field)]
    pub plugins: extern "C" fn() -> RVec<PluginDecl>,
    /// Returns the package names the library implements, each with the
    /// plugin (export) it selects, e.g. `@deepseek-ai/dsh-tool-todo` →
    /// `tool-todo`, so a composition written for the TypeScript harness can
    /// name the package. Added in cordis-abi 0.2, after the prefix, so a host
    /// that reads it as optional could load a library without it; but
    /// abi_stable refuses a library that knows fewer root-module fields than
    /// the host, so libraries must be rebuilt for 0.2 anyway (see
    /// `docs/plugins.md`, "The ABI and its versioning rules").
    #[sabi(missing_field(option))]
    pub packages: extern "C" fn() -> RVec<PackageName>,
    /// Returns, per plugin, the services it provides, so the host can list
    /// them without running `apply` (`cordis plugins`). Added in 0.2.
    #[sabi(missing_field(option))]
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
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
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
    /// Runs the plugin for one entry: registers its tools, event types and
    /// projections on `ctx`. An `Err` (or a panic, which the SDK turns into an
    /// `Err`) makes the host dispose whatever was registered.
    pub apply: extern "C" fn(ctx: HostContextRef<'_>, config: RStr<'_>) -> RResult<(), RString>,
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
    #[sabi(last_prefix_field)]
    fn log(&self, level: LogLevel, message: RStr<'_>);
    /// Provides the service `name` in the entry's realm until the fiber is
    /// disposed. Fails when the plugin does not declare `name` among the
    /// services it provides, or another live entry already provides `name`
    /// in that realm (the message names it). Added in 0.2.
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
}

/// A hook run when the model ends a turn.
#[sabi_trait]
pub trait TurnEndHook: Send + Sync {
    /// `turn` is JSON `{"session": ID, "turn": N, "step": N, "text":
    /// "the model's last text"}`; `cx` appends the plugin's own event types
    /// to that session. Returns `true` to let the model take another step
    /// in the same turn.
    #[sabi(last_prefix_field)]
    fn turn_end(&self, turn: RStr<'_>, cx: ExecContextRef<'_>) -> RResult<bool, RString>;
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
    #[sabi(last_prefix_field)]
    fn execute_tokens(&self, arguments: RStr<'_>, tokens: RSlice<'_, ArgToken<'_>>, cx: ExecContextRef<'_>) -> ToolOutcome;
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
    #[sabi(last_prefix_field)]
    fn append(&self, event_type: RStr<'_>, data: JsonStr<'_>) -> RResult<u64, RString>;
}

/// A borrowed [`ExecContext`] object, valid for one `execute` call.
pub type ExecContextRef<'a> = ExecContext_TO<'a, RRef<'a, ()>>;

/// The durable-log invariant of an owned event type.
#[sabi_trait]
pub trait EventValidator: Send + Sync {
    /// Checks one event's `data` (JSON text). Runs on append and on replay.
    #[sabi(last_prefix_field)]
    fn validate(&self, data: RStr<'_>) -> RResult<(), RString>;
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
    #[sabi(last_prefix_field)]
    fn summary(&self, state: RStr<'_>) -> RString;
}

/// An owned [`Projection`] object.
pub type ProjectionBox = Projection_TO<'static, RBox<()>>;
