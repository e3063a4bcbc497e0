//! The stable ABI between the `cordis` host and plugin libraries, and the SDK
//! plugin authors write against.
//!
//! A plugin library is a `cdylib` that exports one `abi_stable` root module,
//! [`PluginLibraryRef`]. The module lists the library's plugin declarations
//! ([`PluginDecl`]): each carries a `name`, the services it `inject`s, the JSON
//! Schema of its config and an `apply` entry point. The host loads the library
//! with `abi_stable::library::lib_header_from_path(..)?.init_root_module()`,
//! which checks the layout of every type reachable from the root module, so a
//! library built against an incompatible version of this crate is refused
//! before any of its code runs.
//!
//! Everything that crosses the boundary is an `abi_stable` type (`RString`,
//! `RVec`, `RResult`, `#[sabi_trait]` objects) or JSON text: tool arguments,
//! results, event data, config and projection state all travel as JSON.
//!
//! Plugin authors do not touch the raw types: the [`sdk`] module turns a plain
//! Rust trait implementation into a declaration, catches every panic on the
//! plugin side (a panic unwinding across the boundary would abort the host),
//! builds a tool's typed arguments from the host's parse of them (the host
//! checks them against the tool's schema first, so the text is parsed once
//! per call; see [`tape`]), and formats schema violations the same way the
//! host does for config.
//!
//! ```ignore
//! use cordis_abi::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Config { greeting: String }
//!
//! struct Hello;
//! impl Plugin for Hello {
//!     const NAME: &'static str = "hello";
//!     const INJECT: &'static [&'static str] = &["tools"];
//!     type Config = Config;
//!     fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
//!         ctx.tools()?.register(HelloTool { greeting: config.greeting })
//!     }
//! }
//! cordis_abi::export_plugin!(Hello);
//! cordis_abi::export_library!();
//! ```

#[doc(hidden)]
pub mod ffi;
pub mod json;
#[doc(hidden)]
pub mod schema;
pub mod sdk;
#[doc(hidden)]
pub mod tape;

#[doc(hidden)]
pub use abi_stable;
pub use ffi::AbiVersion;
#[doc(hidden)]
pub use ffi::{PackageName, PluginDecl, PluginLibrary, PluginLibraryRef, ProvidedService};
#[doc(hidden)]
pub use inventory;
pub use json::{JsonStr, JsonText};

/// The front door for plugin authors: the SDK's traits and types, serde,
/// schemars and the JSON helpers. `use cordis_abi::prelude::*;`
pub mod prelude {
    pub use crate::sdk::prelude::*;
}

/// The ABI version this crate implements: major 1, and the minor of the
/// last capability or extension added. A library built with this crate
/// reports it; a host built with it offers every capability up to it.
pub const ABI_VERSION: AbiVersion = AbiVersion { major: 1, minor: 4 };

/// The host capabilities this SDK knows, each with the ABI version that
/// brought it (the changelog is in docs/abi.md). Pass them to
/// [`sdk::Context::capability`], or list them in
/// [`sdk::Plugin::REQUIRES`] / [`sdk::Plugin::USES`].
pub mod capabilities {
    use crate::ffi::AbiVersion;
    use crate::sdk::Capability;

    /// `host.info` version 1 (cordis-abi 1.1): the request is `{}`; the
    /// answer `{"abi": {"major", "minor"}, "host", "version",
    /// "capabilities": ["name@version", ...]}` says which host the plugin
    /// runs in and what it offers. Read it with
    /// [`crate::sdk::Context::host_info`].
    pub const HOST_INFO: Capability = Capability { name: "host.info", version: 1, since: AbiVersion { major: 1, minor: 1 } };

    /// `tools.dynamic` version 1 (cordis-abi 1.3): tools whose set changes
    /// after `apply` (the tools of an MCP server, which may add or drop
    /// tools at any time). Used in `apply` with
    /// [`crate::sdk::Context::capability_with`], whose object is the
    /// plugin's *tool source*, a service answering:
    ///
    /// - `list` `{"after": G | null, "waitMs": N}`: `{"generation": G,
    ///   "tools": [{"name", "description", "parameters", "outputSchema"?}],
    ///   "status": TEXT, "statusLevel": "info" | "warn" | "error"}`, at
    ///   once when the source's generation is not `after`, else after
    ///   waiting at most `waitMs` (≤ 1000) for it to change (answering the
    ///   same generation when it did not);
    /// - `call` `{"name", "callId", "arguments": OBJECT}`: `{"isError",
    ///   "text", "value"?}` (a value is a JSON object);
    /// - `cancel` `{"callId", "reason"}`: the host no longer waits for
    ///   that call (Ctrl-C, a reload, an MCP client that left); the source
    ///   answers it at once with an error result saying it was cancelled
    ///   and why, and answers `{}` (an unknown `callId` is no error). A
    ///   source without `cancel` answers it with an error, which the host
    ///   ignores: that call then runs to its end;
    /// - `close` `{}`: the entry is being disposed; the source stops its
    ///   work (calls in flight included), wakes a waiting `list`, and
    ///   answers every later `call` with an error.
    ///
    /// The request is `{}`. The host registers the first generation before
    /// it answers `{"tools": N}` (a name already taken fails the
    /// capability, naming its owner), then follows each new generation:
    /// the tools of the previous one are withdrawn and the new ones
    /// registered, all or none. Calls run through the same pipeline as a
    /// plugin's own tools (arguments checked against `parameters`), and a
    /// value that does not satisfy the tool's `outputSchema` is an error
    /// result. A change of `status` is logged with the entry's id, at
    /// `statusLevel` (`info` when absent). When the entry is disposed the
    /// host stops following, sends `close`, and withdraws the tools.
    pub const TOOLS_DYNAMIC: Capability = Capability { name: "tools.dynamic", version: 1, since: AbiVersion { major: 1, minor: 3 } };

    /// `session.read` version 1 (cordis-abi 1.4): during a call (a tool's
    /// or a turn-end hook's), the session the call runs for and read access
    /// to its projections. The request is `{}` or `{"projections": [KEY,
    /// ...]}`; the answer is `{"session": ID | null, "projections": {KEY:
    /// STATE}}`: `session` is null when no agent session owns the call (a
    /// call from an MCP client without one), and a key is left out when no
    /// projection of that key is registered (or there is no session); a
    /// state may itself be `null` (tool-todo's plan before any write). Used
    /// during `apply` it fails: there is no calling session then. Read it with [`crate::sdk::ToolContext::session`].
    pub const SESSION_READ: Capability = Capability { name: "session.read", version: 1, since: AbiVersion { major: 1, minor: 4 } };

    /// Every capability this SDK knows, oldest first.
    pub const ALL: &[Capability] = &[HOST_INFO, TOOLS_DYNAMIC, SESSION_READ];
}

/// The plugin-side extensions a host may ask for through the `extension`
/// methods, as `(name, version)` (the changelog is in docs/abi.md). A
/// plugin built before one answers `None`, and the host does without.
pub mod extensions {
    /// `compaction-context` version 1 (cordis-abi 1.2), on a
    /// [`crate::ffi::Projection`]: what the model must still see of the
    /// projection's state after the session's history is compacted. A
    /// service answering `contribute` `{"state": STATE}` with `{"content":
    /// [BLOCK, ...]}` (the blocks of a user-side message, `{"type": "text",
    /// "text"}`) or `null` for nothing. The host appends the message right
    /// after the compaction's summary, naming the plugin as its source. In
    /// the SDK: [`crate::sdk::Fold::compaction_context`].
    pub const COMPACTION_CONTEXT: (&str, u32) = ("compaction-context", 1);
}

/// The symbol-independent name of the root module type, as reported by the
/// host in load errors.
pub const ROOT_MODULE_NAME: &str = "cordis_plugin_library";
