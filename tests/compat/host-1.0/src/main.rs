//! A minimal plugin host built against cordis-abi 1.0 as released, standing
//! for every host of that version: it loads a library, checks what the
//! plugin requires against the capabilities 1.0 offers (none), applies the
//! plugin, and runs one call of one of its tools.
//!
//! ```text
//! compat-host-1-0 LIBRARY PLUGIN CONFIG_JSON TOOL ARGUMENTS_JSON
//! ```
//!
//! Prints `abi MAJOR.MINOR` (the library's), then one JSON line
//! `{"isError", "text", "value", "events"}` for the call. A refusal prints
//! `refused: REASON` and exits 2 (the library) or 3 (the plugin's
//! requirements).

use std::process::ExitCode;
use std::sync::Mutex;

use abi_stable::library::lib_header_from_path;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString, RVec};
use cordis_abi::ffi::{
    CapabilityId, EventValidatorBox, ExecContext, ExecContext_TO, HostContext, HostContext_TO, LogLevel, ProjectionBox, Service, ServiceBox,
    Service_TO, ToolBox, TurnEndHookBox,
};
use cordis_abi::{JsonStr, PluginLibraryRef};
use serde_json::{json, Value};

/// What `apply` registered.
#[derive(Default)]
struct Registered {
    tools: Mutex<Vec<ToolBox>>,
    owned: Mutex<Vec<(String, EventValidatorBox)>>,
    projections: Mutex<Vec<ProjectionBox>>,
    services: Mutex<Vec<(String, ServiceBox)>>,
    hooks: Mutex<Vec<TurnEndHookBox>>,
    logs: Mutex<Vec<String>>,
}

/// The fiber context of the one entry this host applies.
struct Fiber<'a> {
    registered: &'a Registered,
    inject: Vec<String>,
}

/// The host's `projections` service: this host stores no sessions, so
/// every request for another session's state is refused.
struct NoStoredSessions;

impl Service for NoStoredSessions {
    fn call(&self, method: RStr<'_>, _args: RStr<'_>) -> RResult<RString, RString> {
        RErr(format!("projections.{method}: this host stores no sessions").into())
    }
}

/// A 1.0 host offers no capability: every lookup is unknown.
fn unknown(name: RStr<'_>, version: u32) -> RResult<RString, RString> {
    RErr(format!("unknown capability `{name}` version {version}: this host (cordis-abi 1.0) offers none").into())
}

impl HostContext for Fiber<'_> {
    fn entry_id(&self) -> RString {
        "compat".into()
    }
    fn has_service(&self, name: RStr<'_>) -> bool {
        ["tools", "projections", "agent"].contains(&name.as_str()) && self.inject.iter().any(|s| s == name.as_str())
    }
    fn register_tool(&self, tool: ToolBox) -> RResult<(), RString> {
        self.registered.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(tool);
        ROk(())
    }
    fn own_event_type(&self, event_type: RStr<'_>, validator: EventValidatorBox) -> RResult<(), RString> {
        self.registered.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((event_type.to_string(), validator));
        ROk(())
    }
    fn register_projection(&self, projection: ProjectionBox) -> RResult<(), RString> {
        self.registered.projections.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(projection);
        ROk(())
    }
    fn log(&self, level: LogLevel, message: RStr<'_>) {
        eprintln!("plugin log ({level:?}): {message}");
        self.registered.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(format!("{level:?}: {message}"));
    }
    fn provide(&self, name: RStr<'_>, service: ServiceBox) -> RResult<(), RString> {
        self.registered.services.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((name.to_string(), service));
        ROk(())
    }
    fn service(&self, name: RStr<'_>) -> RResult<ServiceBox, RString> {
        if name.as_str() == "projections" && self.has_service(name) {
            return ROk(Service_TO::from_value(NoStoredSessions, TD_Opaque));
        }
        RErr(format!("this host keeps no services (`{name}`)").into())
    }
    fn own_surface_event_type(&self, event_type: RStr<'_>, validator: EventValidatorBox) -> RResult<(), RString> {
        self.own_event_type(event_type, validator)
    }
    fn on_turn_end(&self, hook: TurnEndHookBox) -> RResult<(), RString> {
        if !self.has_service("agent".into()) {
            return RErr("this host runs no agent; inject `agent` to register a turn-end hook".into());
        }
        self.registered.hooks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(hook);
        ROk(())
    }
    fn capabilities(&self) -> RVec<CapabilityId> {
        RVec::new()
    }
    fn capability(&self, name: RStr<'_>, version: u32, _request: RStr<'_>, _object: ROption<ServiceBox>) -> RResult<RString, RString> {
        unknown(name, version)
    }
}

/// One call, with a session of its own: appends of owned types pass their
/// validator and are kept.
struct Call<'a> {
    registered: &'a Registered,
    events: Mutex<Vec<Value>>,
    id: &'static str,
}

impl ExecContext for Call<'_> {
    fn call_id(&self) -> RString {
        self.id.into()
    }
    fn has_session(&self) -> bool {
        true
    }
    fn append(&self, event_type: RStr<'_>, data: JsonStr<'_>) -> RResult<u64, RString> {
        let owned = self.registered.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some((_, validator)) = owned.iter().find(|(t, _)| t == event_type.as_str()) else {
            return RErr(format!("`{event_type}` is not owned by this plugin").into());
        };
        if let RErr(e) = validator.validate(data.as_str().into()) {
            return RErr(e);
        }
        let mut events = self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let data: Value = serde_json::from_str(data.as_str()).unwrap_or(Value::Null);
        events.push(json!({ "type": event_type.as_str(), "data": data }));
        ROk(events.len() as u64 - 1)
    }
    fn capability(&self, name: RStr<'_>, version: u32, _request: RStr<'_>, _object: ROption<ServiceBox>) -> RResult<RString, RString> {
        unknown(name, version)
    }
}

fn run(args: &[String]) -> Result<(), (u8, String)> {
    let [library, plugin, config, tool, arguments] = args else {
        return Err((64, "usage: compat-host-1-0 LIBRARY PLUGIN CONFIG_JSON TOOL ARGUMENTS_JSON".into()));
    };
    let header = lib_header_from_path(library.as_ref()).map_err(|e| (2, format!("refused: {e}")))?;
    let module = header.init_root_module::<PluginLibraryRef>().map_err(|e| {
        let report = e.to_string();
        let words: Vec<&str> = report.split_whitespace().collect();
        (2, format!("refused: {}", words.join(" ")))
    })?;
    let abi = (module.abi())();
    println!("abi {}.{}", abi.major, abi.minor);
    // As the 1.0 release did: a library of another major is refused on its
    // own word, whatever abi_stable let through, before anything of it runs.
    if abi.major != 1 {
        return Err((
            2,
            format!(
                "refused: it was built against cordis-abi {}.{}, and this host speaks cordis-abi 1.0 (any 1.x library loads): rebuild it against cordis-abi 1",
                abi.major, abi.minor
            ),
        ));
    }
    let decls = (module.plugins())();
    let decl = decls.iter().find(|d| d.name.as_str() == plugin).ok_or_else(|| (2, format!("refused: no plugin named {plugin}")))?;
    // cordis-abi 1.0 brought no capability: any requirement is one this
    // host lacks.
    if let Some(r) = decl.requires.iter().next() {
        return Err((
            3,
            format!(
                "refused: plugin {plugin} requires host capability `{}` version {}, which cordis-abi {}.{} brings; this host speaks cordis-abi 1.0",
                r.capability.name, r.capability.version, r.since.major, r.since.minor
            ),
        ));
    }
    let registered = Registered::default();
    let fiber = Fiber { registered: &registered, inject: decl.inject.iter().map(|s| s.to_string()).collect() };
    if let RErr(e) = (decl.apply)(HostContext_TO::from_ptr(&fiber, TD_Opaque), config.as_str().into()) {
        return Err((4, format!("apply failed: {e}")));
    }
    let tools = registered.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let found = tools.iter().find(|t| t.name().as_str() == tool).ok_or_else(|| (4, format!("no tool named {tool}")))?;
    let call = Call { registered: &registered, events: Mutex::new(Vec::new()), id: "call_1" };
    let outcome = found.execute(arguments.as_str().into(), ExecContext_TO::from_ptr(&call, TD_Opaque));
    let value: Value = outcome.value.as_ref().into_option().map(|v| serde_json::from_str(v.as_str()).unwrap_or(Value::Null)).unwrap_or(Value::Null);
    let events = call.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    println!("{}", json!({ "isError": outcome.is_error, "text": outcome.text.as_str(), "value": value, "events": events }));
    Ok(())
}

/// `--probe LIBRARY`: applies the plugin `probe` (with `tools` and `agent`
/// injected) and calls every entry point of the 1.0 core it registered,
/// each with values that differ in every argument, printing one JSON
/// report of what each answered.
fn probe(library: &str) -> Result<(), (u8, String)> {
    let header = lib_header_from_path(library.as_ref()).map_err(|e| (2, format!("refused: {e}")))?;
    let module = header.init_root_module::<PluginLibraryRef>().map_err(|e| (2, format!("refused: {e}")))?;
    let abi = (module.abi())();
    let decls = (module.plugins())();
    let decl = decls.iter().find(|d| d.name.as_str() == "probe").ok_or_else(|| (2, "refused: no plugin named probe".to_string()))?;
    let text = |r: RResult<RString, RString>| -> Value {
        match r {
            ROk(t) => serde_json::from_str(t.as_str()).unwrap_or_else(|_| Value::String(t.into())),
            RErr(e) => json!({ "error": e.as_str() }),
        }
    };
    let registered = Registered::default();
    let fiber = Fiber { registered: &registered, inject: decl.inject.iter().map(|s| s.to_string()).collect() };
    if let RErr(e) = (decl.apply)(HostContext_TO::from_ptr(&fiber, TD_Opaque), "{}".into()) {
        return Err((4, format!("apply failed: {e}")));
    }
    let mut report = json!({
        "abi": format!("{}.{}", abi.major, abi.minor),
        "inject": decl.inject.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "declExtension": (decl.extension)("compat.nope".into(), 7).is_some(),
        "logs": registered.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
    });

    let call = Call { registered: &registered, events: Mutex::new(Vec::new()), id: "call_7" };
    let arguments = r#"{"left": "L1", "right": "R2"}"#;
    let parsed: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    for tool in registered.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
        let outcome = |o: cordis_abi::ffi::ToolOutcome| json!({ "isError": o.is_error, "text": o.text.as_str(), "value": o.value.as_ref().into_option().map(|v| text(ROk(v.as_str().into()))) });
        let mut tokens = Vec::new();
        cordis_abi::tape::write_tokens(&parsed, &mut tokens);
        report["tool"] = json!({
            "name": tool.name().as_str(),
            "description": tool.description().as_str(),
            "parameters": text(ROk(tool.parameters())),
            "outputSchema": text(ROk(tool.output_schema())),
            "presentCall": text(ROk(tool.present_call(arguments.into()))),
            "execute": outcome(tool.execute(arguments.into(), ExecContext_TO::from_ptr(&call, TD_Opaque))),
            "executeTokens": outcome(tool.execute_tokens(arguments.into(), tokens.as_slice().into(), ExecContext_TO::from_ptr(&call, TD_Opaque))),
            "extension": tool.extension("compat.nope".into(), 7).is_some(),
        });
    }
    for (event_type, validator) in registered.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
        let verdict = |r: RResult<(), RString>| match r {
            ROk(()) => Value::Bool(true),
            RErr(e) => Value::String(e.into()),
        };
        report["validator"] = json!({
            "type": event_type,
            "good": verdict(validator.validate(r#"{"left": "a", "right": "b"}"#.into())),
            "bad": verdict(validator.validate(r#"{"left": 1}"#.into())),
        });
    }
    for projection in registered.projections.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
        let init = projection.init();
        let once = match projection.apply(init.as_str().into(), "probe/seen".into(), r#"{"left": "first", "right": "second"}"#.into()) {
            ROk(s) => s,
            RErr(e) => RString::from(format!("error: {e}")),
        };
        let twice = projection.apply(once.as_str().into(), "probe/seen".into(), r#"{"left": "third", "right": "fourth"}"#.into());
        let state = match &twice {
            ROk(s) => s.clone(),
            RErr(e) => RString::from(format!("error: {e}")),
        };
        let context = projection
            .extension("compaction-context".into(), 1)
            .into_option()
            .map(|service| text(service.call("contribute".into(), json!({ "state": text(ROk(state.clone())) }).to_string().as_str().into())));
        report["projection"] = json!({
            "key": projection.key().as_str(),
            "version": projection.version(),
            "types": projection.types().iter().map(|t| t.as_str()).collect::<Vec<_>>(),
            "init": text(ROk(init)),
            "state": text(ROk(state.clone())),
            "render": projection.render(state.as_str().into()).as_str(),
            "summary": projection.summary(state.as_str().into()).as_str(),
            "wrongType": text(projection.apply("[]".into(), "other/type".into(), "{}".into())),
            "compactionContext": context,
            "unknownExtension": projection.extension("compat.nope".into(), 7).is_some(),
        });
    }
    for (name, service) in registered.services.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
        report["service"] = json!({ "name": name, "answer": text(service.call("join".into(), r#"{"x": 1}"#.into())) });
    }
    for hook in registered.hooks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
        let turn = |n: u64| json!({"session": "s-9", "turn": n, "step": 4, "text": format!("done {n}")}).to_string();
        let more = |r: RResult<bool, RString>| match r {
            ROk(b) => Value::Bool(b),
            RErr(e) => json!({ "error": e.as_str() }),
        };
        report["hook"] = json!({
            "turn1": more(hook.turn_end(turn(1).as_str().into(), ExecContext_TO::from_ptr(&call, TD_Opaque))),
            "turn2": more(hook.turn_end(turn(2).as_str().into(), ExecContext_TO::from_ptr(&call, TD_Opaque))),
            "extension": hook.extension("compat.nope".into(), 7).is_some(),
        });
    }
    report["events"] = Value::Array(call.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone());
    println!("{report}");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, library] = args.as_slice() {
        if flag == "--probe" {
            return match probe(library) {
                Ok(()) => ExitCode::SUCCESS,
                Err((code, message)) => {
                    println!("{message}");
                    ExitCode::from(code)
                }
            };
        }
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, message)) => {
            println!("{message}");
            ExitCode::from(code)
        }
    }
}
