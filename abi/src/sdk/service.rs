//! Services: [`ServiceProvider`] for a service a plugin provides, and
//! [`ServiceHandle`] for one it injects.

use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};
use serde::Serialize;
use serde_json::Value;

use crate::ffi::{Service, ServiceBox};

use super::guard::guard_named;

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

pub(super) struct ProviderAdapter<S> {
    pub(super) inner: S,
    pub(super) plugin: &'static str,
    pub(super) service: String,
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

/// A handle on a service, from [`Context::service`](super::Context::service).
pub struct ServiceHandle {
    pub(super) raw: ServiceBox,
    pub(super) name: String,
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
