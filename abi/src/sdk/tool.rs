//! Tools: [`TypedTool`] with typed arguments, the registry a plugin adds
//! them to ([`Tools`]), what a call may do ([`ToolContext`]) and answer
//! ([`ToolReply`], [`EncodedReply`], [`ToolError`]).

use abi_stable::std_types::{ROption, RSlice, RStr, RString};
use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;

use crate::ffi::{ExecContextRef, ServiceBox, Tool, ToolOutcome};
use crate::json::{JsonStr, JsonText};
use crate::schema;
use crate::tape::{self, ArgToken};

use super::arguments::parse_typed;
use super::guard::{guard, guard_named};
use super::raw::{use_capability, RawExec};
use super::{Capability, HostInfo};

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
    pub(super) tokens: &'a [ArgToken<'a>],
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
    pub(super) raw: &'a dyn RawExec,
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

    /// Uses a host capability during this call, as [`Context::capability`](super::Context::capability).
    ///
    /// # Errors
    /// As [`Context::capability`](super::Context::capability).
    pub fn capability(&self, capability: &Capability, request: &impl Serialize) -> Result<Option<Value>, ToolError> {
        use_capability(capability, request, |n, v, r| self.raw.capability(n, v, r)).map_err(ToolError)
    }

    /// [`Context::host_info`](super::Context::host_info) during a call.
    ///
    /// # Errors
    /// As [`Context::host_info`](super::Context::host_info).
    pub fn host_info(&self) -> Result<Option<HostInfo>, ToolError> {
        read_host_info(self.capability(&crate::capabilities::HOST_INFO, &serde_json::json!({}))?).map_err(ToolError)
    }
}

pub(super) fn read_host_info(answer: Option<Value>) -> Result<Option<HostInfo>, String> {
    match answer {
        None => Ok(None),
        Some(value) => serde_json::from_value(value).map(Some).map_err(|e| format!("the host's host.info answer does not read: {e}")),
    }
}

pub(super) struct ToolAdapter<T: TypedTool> {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) parameters: String,
    pub(super) plugin: &'static str,
    pub(super) tool: T,
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
