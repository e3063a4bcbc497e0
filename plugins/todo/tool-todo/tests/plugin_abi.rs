//! The plugin through its raw declaration, in-process: `apply` against a
//! stand-in host context, then the registered tool, invariant and projection
//! through their ABI objects. (The loader path through the compiled `cdylib`
//! is tested by the host crate.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

use std::sync::Mutex;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString, RVec};
use cordis_abi::ffi::{
    CapabilityId, EventValidatorBox, ExecContext, ExecContext_TO, HostContext, HostContext_TO, LogLevel, ProjectionBox, Service, ServiceBox,
    Service_TO, ToolBox, TurnEndHookBox,
};
use cordis_abi::JsonStr;
use serde_json::{json, Value};

#[derive(Default)]
struct Host {
    tools: Mutex<Vec<ToolBox>>,
    owned: Mutex<Vec<(String, EventValidatorBox)>>,
    projections: Mutex<Vec<ProjectionBox>>,
    provided: Mutex<Vec<String>>,
}

/// The stand-in's `projections` service: no sessions here.
struct NoSessions;

impl Service for NoSessions {
    fn call(&self, _method: RStr<'_>, _args: RStr<'_>) -> RResult<RString, RString> {
        RErr("the stand-in host has no sessions".into())
    }
}

/// The stand-in offers no host capability, as a cordis-abi 1.0 host.
fn no_capability(name: RStr<'_>) -> RResult<RString, RString> {
    RErr(format!("unknown capability `{name}`").into())
}

impl HostContext for Host {
    fn entry_id(&self) -> RString {
        "todo".into()
    }
    fn capabilities(&self) -> RVec<CapabilityId> {
        RVec::new()
    }
    fn capability(&self, name: RStr<'_>, _version: u32, _request: RStr<'_>, _object: ROption<ServiceBox>) -> RResult<RString, RString> {
        no_capability(name)
    }
    fn has_service(&self, name: RStr<'_>) -> bool {
        name.as_str() == "tools"
    }
    fn register_tool(&self, tool: ToolBox) -> RResult<(), RString> {
        self.tools.lock().unwrap().push(tool);
        ROk(())
    }
    fn own_event_type(&self, event_type: RStr<'_>, validator: EventValidatorBox) -> RResult<(), RString> {
        self.owned.lock().unwrap().push((event_type.to_string(), validator));
        ROk(())
    }
    fn register_projection(&self, projection: ProjectionBox) -> RResult<(), RString> {
        self.projections.lock().unwrap().push(projection);
        ROk(())
    }
    fn log(&self, _level: LogLevel, _message: RStr<'_>) {}
    fn provide(&self, name: RStr<'_>, _service: ServiceBox) -> RResult<(), RString> {
        self.provided.lock().unwrap().push(name.to_string());
        ROk(())
    }
    fn service(&self, name: RStr<'_>) -> RResult<ServiceBox, RString> {
        match name.as_str() {
            "projections" => ROk(Service_TO::from_value(NoSessions, TD_Opaque)),
            other => RErr(format!("no service {other}").into()),
        }
    }
    fn own_surface_event_type(&self, event_type: RStr<'_>, validator: EventValidatorBox) -> RResult<(), RString> {
        self.own_event_type(event_type, validator)
    }
    fn on_turn_end(&self, _hook: TurnEndHookBox) -> RResult<(), RString> {
        RErr("the stand-in host runs no turns".into())
    }
}

/// A call context: optionally an agent session whose appends go through the
/// owned type's validator, like the host's append pipeline.
struct Call<'a> {
    session: bool,
    validator: &'a EventValidatorBox,
    log: Mutex<Vec<(String, String)>>,
}

impl ExecContext for Call<'_> {
    fn call_id(&self) -> RString {
        "call_1".into()
    }
    fn capability(&self, name: RStr<'_>, _version: u32, _request: RStr<'_>, _object: ROption<ServiceBox>) -> RResult<RString, RString> {
        no_capability(name)
    }
    fn has_session(&self) -> bool {
        self.session
    }
    fn append(&self, event_type: RStr<'_>, data: JsonStr<'_>) -> RResult<u64, RString> {
        if !self.session {
            return RErr("no session".into());
        }
        let data = data.as_str();
        if let RErr(e) = self.validator.validate(data.into()) {
            return RErr(e);
        }
        let mut log = self.log.lock().unwrap();
        log.push((event_type.to_string(), data.to_string()));
        ROk(log.len() as u64 - 1)
    }
}

fn applied(config: &str) -> (Host, Result<(), String>) {
    let host = Host::default();
    let decl = cordis_abi::sdk::declare::<tool_todo::TodoPlugin>();
    let result = {
        let ctx = HostContext_TO::from_ptr(&host, TD_Opaque);
        (decl.apply)(ctx, config.into()).into_result().map_err(|e| e.to_string())
    };
    (host, result)
}

#[test]
fn apply_registers_the_type_the_projection_and_the_tool() {
    let (host, result) = applied(r#"{"allowParallelInProgress":true}"#);
    assert_eq!(result, Ok(()));
    let owned = host.owned.lock().unwrap();
    assert_eq!(owned.len(), 1);
    assert_eq!(owned[0].0, "todo/write");
    let projections = host.projections.lock().unwrap();
    assert_eq!(projections.len(), 1);
    assert_eq!(projections[0].key().as_str(), "todos");
    assert_eq!(projections[0].version(), 1);
    let types: Vec<String> = projections[0].types().into_iter().map(|s| s.to_string()).collect();
    assert_eq!(types, ["todo/write", "turn/start"]);
    assert_eq!(projections[0].init().as_str(), "null");
    let tools = host.tools.lock().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name().as_str(), "todo_write");
    assert_eq!(tools[0].description().as_str(), tool_todo::tool::description(tool_todo::Policy::Parallel));
    let parameters: Value = serde_json::from_str(tools[0].parameters().as_str()).unwrap();
    assert_eq!(parameters, tool_todo::tool::parameters());
}

#[test]
fn apply_reads_the_policy_from_config() {
    let (host, result) = applied(r#"{"allowParallelInProgress":false}"#);
    assert_eq!(result, Ok(()));
    let tools = host.tools.lock().unwrap();
    assert_eq!(tools[0].description().as_str(), tool_todo::tool::description(tool_todo::Policy::Single));
    let owned = host.owned.lock().unwrap();
    let call = Call { session: true, validator: &owned[0].1, log: Mutex::new(Vec::new()) };
    let args = r#"{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}"#;
    let out = tools[0].execute(args.into(), ExecContext_TO::from_ptr(&call, TD_Opaque));
    assert!(out.is_error);
    assert!(out.text.as_str().starts_with("Error: at most one todo may be in_progress"), "{}", out.text);
    assert!(call.log.lock().unwrap().is_empty());
}

#[test]
fn apply_fails_cleanly_on_an_unreadable_config() {
    let (_, result) = applied("{}");
    assert!(result.unwrap_err().contains("tool-todo"));
}

#[test]
fn execute_appends_replies_and_folds() {
    let (host, _) = applied(r#"{"allowParallelInProgress":true}"#);
    let tools = host.tools.lock().unwrap();
    let owned = host.owned.lock().unwrap();
    let projections = host.projections.lock().unwrap();
    let call = Call { session: true, validator: &owned[0].1, log: Mutex::new(Vec::new()) };

    // The arguments a real model sent (fixtures/upstream-sessions/todo-write.session.jsonl).
    let args = r#"{"todos": [{"content": "read the code", "status": "in_progress"}, {"content": "watch the background build", "status": "in_progress"}, {"content": "write the fix", "status": "pending"}]}"#;
    let out = tools[0].execute(args.into(), ExecContext_TO::from_ptr(&call, TD_Opaque));
    assert!(!out.is_error, "{}", out.text);
    assert_eq!(out.text.as_str(), "Updated todo list: 1 pending, 2 in progress, 0 completed.");
    let log = call.log.lock().unwrap().clone();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].0, "todo/write");
    // The logged data, byte for byte as the upstream session recorded it.
    assert_eq!(
        log[0].1,
        r#"{"todos":[{"content":"read the code","status":"in_progress"},{"content":"watch the background build","status":"in_progress"},{"content":"write the fix","status":"pending"}]}"#
    );
    let value: Value = serde_json::from_str(out.value.into_option().unwrap().as_str()).unwrap();
    assert_eq!(value["counts"], json!({"pending": 1, "inProgress": 2, "completed": 0}));

    let p = &projections[0];
    let state = p.apply(p.init().as_rstr(), "todo/write".into(), log[0].1.as_str().into()).unwrap();
    assert_eq!(p.render(state.as_rstr()).as_str(), "2 in progress · 1 pending\n● read the code\n● watch the background build\n○ write the fix");
    assert_eq!(p.summary(state.as_rstr()).as_str(), "0/3 completed · read the code +1");
    let kept = p.apply(state.as_rstr(), "turn/end".into(), "{}".into()).unwrap();
    assert_eq!(kept, state);
    let cleared = p.apply(kept.as_rstr(), "turn/start".into(), r#"{"turn":2}"#.into()).unwrap();
    assert_eq!(cleared.as_str(), "null");
    assert_eq!(p.render(cleared.as_rstr()).as_str(), "");
    assert_eq!(p.summary(cleared.as_rstr()).as_str(), "");
}

#[test]
fn execute_rejects_bad_calls_with_their_path() {
    let (host, _) = applied(r#"{"allowParallelInProgress":true}"#);
    let tools = host.tools.lock().unwrap();
    let owned = host.owned.lock().unwrap();
    let agent = Call { session: true, validator: &owned[0].1, log: Mutex::new(Vec::new()) };
    // The schema check (every violation with its path) is the host's,
    // before the tool runs (the engine suite's `hostile_input` tests); called directly, the
    // tool still refuses what does not parse as its arguments.
    let cases = [
        ("", "Error: invalid arguments: not valid JSON"),
        ("[]", "Error: invalid arguments: invalid length 0, expected struct TodoArgs"),
        (r#"{"todos":[{"content":"x","status":"done"}]}"#, "Error: invalid arguments: unknown variant `done`"),
        (r#"{"todos":[{"content":"x","status":"pending"},{"content":" x","status":"pending"}]}"#, "Error: $.todos[1].content \"x\" repeats"),
        (r#"{"todos":[{"content":"\u2028","status":"pending"}]}"#, "Error: $.todos[0].content must not be empty"),
    ];
    for (args, want) in cases {
        let out = tools[0].execute(args.into(), ExecContext_TO::from_ptr(&agent, TD_Opaque));
        assert!(out.is_error, "{args}");
        assert!(out.text.as_str().starts_with(want), "{args}: {}", out.text);
        assert!(out.value.is_none());
    }
    assert!(agent.log.lock().unwrap().is_empty());

    let stranger = Call { session: false, validator: &owned[0].1, log: Mutex::new(Vec::new()) };
    let out = tools[0].execute(r#"{"todos":[]}"#.into(), ExecContext_TO::from_ptr(&stranger, TD_Opaque));
    assert!(out.is_error);
    assert!(out.text.as_str().starts_with("Error: todo_write needs an agent session"), "{}", out.text);
}

#[test]
fn owned_type_validator_is_the_invariant() {
    let (host, _) = applied(r#"{"allowParallelInProgress":false}"#);
    let owned = host.owned.lock().unwrap();
    let v = &owned[0].1;
    // Silent on the number in progress, whatever the policy.
    assert!(v.validate(r#"{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}"#.into()).is_ok());
    let err = v.validate(r#"{"todos":[{"content":"a","status":"done"}]}"#.into()).unwrap_err();
    assert_eq!(err.as_str(), "$.todos[0].status \"done\" is not a known status (pending, in_progress, completed)");
}

#[test]
fn present_call_is_a_generic_card_with_the_list() {
    let (host, _) = applied(r#"{"allowParallelInProgress":true}"#);
    let tools = host.tools.lock().unwrap();
    let card: Value = serde_json::from_str(tools[0].present_call(r#"{"todos":[{"content":" a ","status":"pending"}]}"#.into()).as_str()).unwrap();
    assert_eq!(card, json!({"kind": "generic", "title": "Update todo list", "todos": [{"content": " a ", "status": "pending"}]}));
    assert_eq!(card.as_object().unwrap().keys().collect::<Vec<_>>(), ["kind", "title", "todos"]);
}

/// What the host calls: `execute_tokens` with its parse of the arguments.
/// It answers, appends and refuses as `execute` on the same text does.
#[test]
fn execute_tokens_answers_as_execute_does() {
    let (host, _) = applied(r#"{"allowParallelInProgress":true}"#);
    let tools = host.tools.lock().unwrap();
    let owned = host.owned.lock().unwrap();
    let cases = [
        (
            r#"{"todos": [{"content": " read the code ", "status": "in_progress"}, {"content": "ship", "status": "pending"}]}"#,
            "Updated todo list: 1 pending, 1 in progress, 0 completed.",
        ),
        (r#"{"todos":[]}"#, "Updated todo list: 0 pending, 0 in progress, 0 completed."),
        ("[]", "Error: invalid arguments: invalid length 0, expected struct TodoArgs"),
        (r#"{"todos":[{"content":"x","status":"done"}]}"#, "Error: invalid arguments: unknown variant `done`"),
        (r#"{"todos":[{"content":"x","status":"pending"},{"content":" x","status":"pending"}]}"#, "Error: $.todos[1].content \"x\" repeats"),
    ];
    for (args, want) in cases {
        let call = || Call { session: true, validator: &owned[0].1, log: Mutex::new(Vec::new()) };
        let (by_text, by_tokens) = (call(), call());
        let text_out = tools[0].execute(args.into(), ExecContext_TO::from_ptr(&by_text, TD_Opaque));
        let parsed: Value = serde_json::from_str(args).unwrap();
        let mut tokens = Vec::new();
        cordis_abi::tape::write_tokens(&parsed, &mut tokens);
        let token_out = tools[0].execute_tokens(args.into(), tokens.as_slice().into(), ExecContext_TO::from_ptr(&by_tokens, TD_Opaque));
        assert!(token_out.text.as_str().starts_with(want), "{args}: {}", token_out.text);
        assert!(text_out.text.as_str().starts_with(want), "{args}: {}", text_out.text);
        assert_eq!(token_out.is_error, text_out.is_error, "{args}");
        assert_eq!(token_out.value, text_out.value, "{args}");
        assert_eq!(*by_tokens.log.lock().unwrap(), *by_text.log.lock().unwrap(), "{args}");
        if !token_out.is_error {
            assert_eq!(token_out.text, text_out.text, "{args}");
            assert_eq!(by_tokens.log.lock().unwrap().len(), 1, "{args}");
        }
    }
}
