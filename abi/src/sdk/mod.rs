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

mod arguments;
mod context;
mod guard;
mod library;
mod projection;
mod raw;
mod service;
mod tool;
mod turn_end;

pub use arguments::*;
pub use context::*;
pub use guard::*;
pub use library::*;
pub use projection::*;
pub use raw::*;
pub use service::*;
pub use tool::*;
pub use turn_end::*;

use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::ffi::{AbiVersion, CapabilityId};

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
