//! The library side of the boundary: each plugin's declaration, the
//! `inventory` registry `export_plugin!` fills, and the root module
//! `export_library!` exports.

use std::panic::catch_unwind;

use abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString, RVec};

use crate::ffi::{AbiVersion, HostContextRef, PackageName, PluginDecl, PluginLibrary, PluginLibraryRef, ProvidedService, Requirement, ServiceBox};
use crate::schema;

use super::context::Context;
use super::guard::{guard, quiet_panics};
use super::{Capability, Plugin};

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
pub(super) extern "C" fn no_extension(_name: RStr<'_>, _version: u32) -> ROption<ServiceBox> {
    ROption::RNone
}

pub(super) extern "C" fn apply_plugin<P: Plugin>(ctx: HostContextRef<'_>, config: RStr<'_>) -> RResult<(), RString> {
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

pub(super) extern "C" fn built_against() -> AbiVersion {
    crate::ABI_VERSION
}

pub(super) extern "C" fn collect_packages() -> RVec<PackageName> {
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

pub(super) extern "C" fn collect_provides() -> RVec<ProvidedService> {
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

pub(super) extern "C" fn collect_plugins() -> RVec<PluginDecl> {
    let collected = catch_unwind(|| {
        let mut decls: Vec<PluginDecl> = inventory::iter::<PluginRegistration>.into_iter().map(|r| (r.declare)()).collect();
        decls.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        decls
    });
    // A panic while building declarations leaves the library with no plugins,
    // which the host reports as "exports no plugins".
    collected.unwrap_or_default().into_iter().collect()
}
