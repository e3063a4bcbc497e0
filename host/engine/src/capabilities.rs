//! The host capabilities this host offers plugins through
//! `HostContext::capability` and `ExecContext::capability`, and the check
//! of what a plugin requires before its `apply` runs.
//!
//! A capability is a (name, version) whose request and answer contract,
//! once released, never changes (docs/abi.md lists them with the ABI
//! version that brought each). A leaf module: the fiber context, the tool
//! pipeline and the loader all use it.

use abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString};
use cordis_abi::ffi::{CapabilityId, Requirement, ServiceBox};
use cordis_abi::sdk::UNKNOWN_CAPABILITY;
use cordis_abi::AbiVersion;

/// The ABI version this host speaks: that of the cordis-abi it is built with.
pub const HOST_ABI: AbiVersion = cordis_abi::ABI_VERSION;

/// Every capability this host offers, as (name, version).
pub fn offered() -> Vec<CapabilityId> {
    cordis_abi::capabilities::ALL.iter().map(|c| c.id()).collect()
}

/// Whether this host offers `name` at contract `version`.
pub fn offers(name: &str, version: u32) -> bool {
    cordis_abi::capabilities::ALL.iter().any(|c| c.name == name && c.version == version)
}

/// Checks that this host offers every capability `plugin` requires.
///
/// # Errors
/// One message per missing capability, naming it, the ABI version that
/// brings it and the one this host speaks.
pub fn check_requirements(plugin: &str, requires: &[Requirement]) -> Result<(), Vec<String>> {
    let missing: Vec<String> = requires
        .iter()
        .filter(|r| !offers(r.capability.name.as_str(), r.capability.version))
        .map(|r| {
            format!(
                "plugin {plugin} requires host capability `{}` version {}, which cordis-abi {} brings; this host speaks cordis-abi {HOST_ABI}: \
                 run it in a newer host, or rebuild the plugin without the requirement",
                r.capability.name, r.capability.version, r.since
            )
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

/// Answers one use of a capability: `request` is JSON text, the answer is
/// JSON text.
///
/// # Errors
/// `unknown capability …` (the SDK's cue to do without) for one this host
/// does not offer, or the capability's own refusal.
pub fn answer(name: &str, version: u32, request: &str, _object: ROption<ServiceBox>) -> Result<String, String> {
    let offered: Vec<String> = offered().iter().map(|c| format!("{}@{}", c.name, c.version)).collect();
    let host_info = &cordis_abi::capabilities::HOST_INFO;
    if name == host_info.name && version == host_info.version {
        let request: serde_json::Value = serde_json::from_str(request).map_err(|e| format!("host.info: the request is not JSON: {e}"))?;
        if !request.as_object().is_some_and(serde_json::Map::is_empty) {
            return Err(format!("host.info version 1 takes the request {{}}, not {request}"));
        }
        let info = serde_json::json!({
            "abi": {"major": HOST_ABI.major, "minor": HOST_ABI.minor},
            "host": "cordis",
            "version": env!("CARGO_PKG_VERSION"),
            "capabilities": offered,
        });
        return Ok(info.to_string());
    }
    let dynamic = &cordis_abi::capabilities::TOOLS_DYNAMIC;
    if name == dynamic.name && version == dynamic.version {
        return Err("tools.dynamic is used during `apply` (the fiber's context), not during a call".into());
    }
    let offered = if offered.is_empty() { "none".to_string() } else { offered.join(", ") };
    Err(format!("{UNKNOWN_CAPABILITY} `{name}` version {version}: this host (cordis-abi {HOST_ABI}) offers {offered}"))
}

/// [`answer`] as the ABI returns it, for `HostContext::capability` and
/// `ExecContext::capability` alike.
pub fn answer_raw(name: RStr<'_>, version: u32, request: RStr<'_>, object: ROption<ServiceBox>) -> RResult<RString, RString> {
    match answer(name.as_str(), version, request.as_str(), object) {
        Ok(answer) => ROk(answer.into()),
        Err(e) => RErr(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_info_answers_its_contract_and_unknown_ones_say_so() {
        let info: serde_json::Value = serde_json::from_str(&answer("host.info", 1, "{}", ROption::RNone).unwrap()).unwrap();
        assert_eq!(info["abi"], serde_json::json!({"major": 1, "minor": cordis_abi::ABI_VERSION.minor}));
        assert_eq!(info["capabilities"], serde_json::json!(["host.info@1", "tools.dynamic@1"]));
        assert!(answer("host.info", 1, r#"{"x": 1}"#, ROption::RNone).unwrap_err().contains("takes the request {}"));
        let unknown = answer("host.info", 2, "{}", ROption::RNone).unwrap_err();
        assert!(unknown.starts_with(UNKNOWN_CAPABILITY) && unknown.contains("offers host.info@1, tools.dynamic@1"), "{unknown}");
    }
}
