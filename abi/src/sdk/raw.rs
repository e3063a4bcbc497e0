//! The host's raw contexts behind two small traits, so the SDK's wrappers
//! ([`super::Context`], [`super::ToolContext`]) read the same either way,
//! and the capability call both share.

use abi_stable::std_types::{ROption, RResult, RString};
use serde::Serialize;
use serde_json::Value;

use crate::ffi::{
    EventValidatorBox, ExecContextRef, ExecContext_TO, HostContextRef, HostContext_TO, LogLevel, ProjectionBox, ServiceBox, ToolBox, TurnEndHookBox,
};
use crate::json::JsonStr;

use super::Capability;

/// The host side of a fiber context, with the borrow of the raw object
/// erased so [`Context`] needs one lifetime.
pub(super) trait RawHost {
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
pub(super) trait RawExec {
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
pub(super) fn use_capability(
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
