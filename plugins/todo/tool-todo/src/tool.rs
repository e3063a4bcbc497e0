//! The model-facing `todo_write` tool.
//!
//! A call sends the whole list; the list replaces the previous one (whole-list
//! replace, last write wins, no per-item ids, no delta protocol). The pipeline, in order:
//!
//! 1. the host checks the arguments against the schema generated from
//!    [`TodoArgs`], then the SDK parses them into it (object, `todos` array, items with exactly
//!    `content` and a known `status`);
//! 2. [`validate_call`]: each `content` trimmed with JavaScript's rules
//!    ([`js_trim`]), non-empty, and unique (case-sensitive) within the list;
//!    under [`Policy::Single`], at most one `in_progress`. There is no limit
//!    of our own on the number of todos or on a todo's length: the reference
//!    has none, so any list it accepts is accepted here (the host's cap on
//!    the raw argument text, 1 MiB, is the only size bound), and every step
//!    is linear in the size of the call;
//! 3. an owning agent session is required (checked after validation, as the
//!    reference does: a non-agent call with a bad list gets the list error);
//! 4. the trimmed list is appended as a `todo/write` event (the host checks
//!    the log's structure rules and writes it durably; a failure there is
//!    the tool's error). Every list step 2 accepts passes
//!    [`crate::invariant`], which the host runs on `todo/write` events from
//!    elsewhere (replay, import), not on this plugin's own appends;
//! 5. the reply: text `Updated todo list: P pending, I in progress, C completed.`
//!    and value `{"todos": [...], "counts": {"pending", "inProgress", "completed"}}`.
//!
//! Steps 2–5 are [`execute_call`]. [`execute_call_encoded`] runs the same
//! steps with the event data encoded straight to JSON text once and the
//! reply value made from it (the data plus the counts): the SDK runs it for
//! a call that arrives as text. A call through the host arrives as the
//! host's parse, and runs [`execute_call_parsed`]: the same again, with each
//! todo's content borrowed from that parse instead of copied.
//! [`validate_call`] is step 2 alone ([`validate_borrowed`] on borrowed
//! arguments).

use std::collections::HashMap;

use cordis_abi::prelude::*;
use cordis_abi::sdk::ToolContext;

use std::borrow::Cow;

use crate::item::{Counts, Status, Todo, TodoRef};
use crate::trim::js_trim;

/// The tool's name, as the model calls it.
pub const TOOL_NAME: &str = "todo_write";

/// The event type the plugin owns and the tool appends.
pub const TODO_WRITE: &str = "todo/write";

/// The arguments of `todo_write`: `{"todos": [{"content", "status"}, ...]}`.
///
/// Items accept no other key. Unknown keys at the top level are ignored, as
/// the reference implementation ignores them (its oracle accepts a call with
/// an extra `merge` key), so the schema does not forbid them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[schemars(transform = crate::item::drop_description)]
pub struct TodoArgs {
    /// The whole task list. It replaces the list sent before, so include every task each time.
    pub todos: Vec<Todo>,
}

/// [`TodoArgs`] with each todo's content borrowed from the host's parse of
/// the arguments ([`TodoRef`]): what the tool deserializes on the host's
/// call path, where copying the contents would only make garbage. The same
/// JSON shape.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TodoArgsRef<'a> {
    /// The whole task list.
    #[serde(borrow)]
    pub todos: Vec<TodoRef<'a>>,
}

/// How many todos may be `in_progress` at once: the deployment's choice,
/// from the required config field `allowParallelInProgress`.
///
/// The policy moves the model-facing instruction and the accepted input
/// together: [`description`] and [`validate_call`] both follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Any number of todos may be `in_progress` (agents that fan work out to
    /// subagents or background commands).
    Parallel,
    /// At most one todo may be `in_progress` (strictly sequential agents).
    Single,
}

impl Policy {
    /// The policy for a config value of `allowParallelInProgress`.
    pub fn from_allow_parallel(allow_parallel_in_progress: bool) -> Policy {
        if allow_parallel_in_progress {
            Policy::Parallel
        } else {
            Policy::Single
        }
    }
}

const DESCRIPTION_BEFORE: &str = "Keep a structured plan of the current work as a todo list. \
Every call sends the whole list and replaces the list sent before: there are no partial updates \
and no edits of single items, so repeat the unchanged todos as they are. \
Use it to plan work that takes several steps and to show progress: before starting, write one todo \
per concrete step, and keep the list current as you go. ";

const DESCRIPTION_PARALLEL: &str = "Mark every todo you are actively working on as `in_progress`: \
several at a time when work really runs in parallel (for example concurrent subagents or background \
commands), a single one when you work step by step; while work remains, keep at least one todo \
`in_progress`. ";

const DESCRIPTION_SINGLE: &str = "Keep at most one todo `in_progress` at a time: while work remains, \
the one task you are working on right now is `in_progress`, and tasks not started yet stay `pending`. ";

const DESCRIPTION_AFTER: &str = "Set a todo to `completed` as soon as it is finished instead of \
completing several at the end; only when all the work is done may no todo be `in_progress`. \
Do not keep a list for a task that takes a single trivial step. \
Statuses: `pending` (not started yet), `in_progress` (being worked on now), `completed` (finished).";

/// The model-facing description of `todo_write` under `policy`.
///
/// Our own text. Only the clause about how many todos may be
/// `in_progress` differs between the policies; everything before and after
/// it is identical, because that clause is the only instruction the policy
/// changes.
pub fn description(policy: Policy) -> String {
    let clause = match policy {
        Policy::Parallel => DESCRIPTION_PARALLEL,
        Policy::Single => DESCRIPTION_SINGLE,
    };
    [DESCRIPTION_BEFORE, clause, DESCRIPTION_AFTER].concat()
}

/// The JSON Schema of the tool's arguments, generated from [`TodoArgs`]:
/// an object whose required `todos` is an array of objects with required
/// `content` (string) and `status` (string enum), and no other item key.
pub fn parameters() -> Value {
    cordis_abi::schema::schema_for::<TodoArgs>()
}

/// Validates a call's list (step 2 of the [module](self) pipeline) and
/// returns it with every `content` trimmed: the list `execute` appends.
///
/// Checks, in this order: item by item, the trimmed `content` is non-empty
/// and not equal (case-sensitive) to an earlier item's; then, under
/// [`Policy::Single`], at most one item is `in_progress`. Like the
/// reference, it bounds neither the number of items nor their length; the
/// time it takes is linear in the size of the list (one hash per item).
///
/// # Errors
/// One line naming the offending item and value, e.g.
/// `$.todos[2].content must not be empty ...`,
/// `$.todos[1].content "deploy" repeats $.todos[0].content ...`, or
/// `at most one todo may be in_progress at a time ...; this list marks 2`.
pub fn validate_call(args: TodoArgs, policy: Policy) -> Result<Vec<Todo>, String> {
    validate_list(args.todos, policy)
}

/// [`validate_call`] on borrowed arguments: the same checks and messages,
/// and each trimmed `content` still borrowed where it was.
///
/// # Errors
/// As [`validate_call`].
pub fn validate_borrowed(args: TodoArgsRef<'_>, policy: Policy) -> Result<Vec<TodoRef<'_>>, String> {
    validate_list(args.todos, policy)
}

/// A todo the call pipeline handles: owned ([`Todo`]) or borrowed
/// ([`TodoRef`]), encoded the same way.
trait ListItem: Serialize {
    fn content(&self) -> &str;
    fn status(&self) -> Status;
    /// Trims the content with [`js_trim`].
    fn trim(&mut self);
}

impl ListItem for Todo {
    fn content(&self) -> &str {
        &self.content
    }
    fn status(&self) -> Status {
        self.status
    }
    fn trim(&mut self) {
        trim_owned(&mut self.content);
    }
}

impl ListItem for TodoRef<'_> {
    fn content(&self) -> &str {
        &self.content
    }
    fn status(&self) -> Status {
        self.status
    }
    fn trim(&mut self) {
        match &mut self.content {
            Cow::Borrowed(text) => *text = js_trim(text),
            Cow::Owned(text) => trim_owned(text),
        }
    }
}

/// Trims `text` with [`js_trim`], reallocating only when there was
/// whitespace to remove.
fn trim_owned(text: &mut String) {
    let trimmed = js_trim(text);
    if trimmed.len() != text.len() {
        *text = trimmed.to_string();
    }
}

/// The checks of [`validate_call`], on either kind of todo.
fn validate_list<T: ListItem>(mut todos: Vec<T>, policy: Policy) -> Result<Vec<T>, String> {
    for todo in &mut todos {
        todo.trim();
    }
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(todos.len());
    for (index, todo) in todos.iter().enumerate() {
        let content = todo.content();
        if content.is_empty() {
            return Err(format!("$.todos[{index}].content must not be empty: it has no text once surrounding whitespace is removed"));
        }
        if let Some(first) = seen.insert(content, index) {
            return Err(format!(
                "$.todos[{index}].content {} repeats $.todos[{first}].content; every todo needs its own content",
                Value::String(content.to_string())
            ));
        }
    }
    if policy == Policy::Single {
        let active = todos.iter().filter(|t| t.status() == Status::InProgress).count();
        if active > 1 {
            return Err(format!("at most one todo may be in_progress at a time in this deployment; this list marks {active}"));
        }
    }
    Ok(todos)
}

/// The structured value of a successful call:
/// `{"todos": [...], "counts": {"pending", "inProgress", "completed"}}`, in
/// that key order (the reference's shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TodoWriteValue {
    /// The list as stored (contents trimmed).
    pub todos: Vec<Todo>,
    /// How many todos have each status.
    pub counts: Counts,
}

/// The reply to a successful write of `todos`: text
/// `Updated todo list: P pending, I in progress, C completed.` (the
/// reference's exact text, recorded in real session logs we reproduce byte
/// for byte) and the [`TodoWriteValue`].
pub fn reply(todos: Vec<Todo>) -> ToolReply {
    let counts = Counts::of(&todos);
    let text = reply_text(&counts);
    let value = serde_json::to_value(TodoWriteValue { todos, counts }).ok();
    ToolReply { text, value }
}

fn reply_text(counts: &Counts) -> String {
    // One allocation of the exact length; this runs on every call.
    let (mut p, mut i, mut c) = (itoa::Buffer::new(), itoa::Buffer::new(), itoa::Buffer::new());
    [
        "Updated todo list: ",
        p.format(counts.pending),
        " pending, ",
        i.format(counts.in_progress),
        " in progress, ",
        c.format(counts.completed),
        " completed.",
    ]
    .concat()
}

/// [`reply`] with the value encoded straight to JSON text, without building
/// a `Value` first: the same text and the same JSON (the struct's fields in
/// the same order).
///
/// # Errors
/// Never in practice: the value is plain strings and numbers.
pub fn encoded_reply(todos: Vec<Todo>) -> Result<EncodedReply, ToolError> {
    let data = encode_data(&todos)?;
    encoded_reply_of(&todos, &data)
}

/// The `todo/write` data `{"todos":[...]}` for `todos`, byte for byte what
/// encoding a [`TodoWrite`](crate::TodoWrite) gives, into a buffer sized
/// for it up front.
fn encode_data<T: ListItem>(todos: &[T]) -> Result<JsonText, ToolError> {
    // `{"content":"","status":"in_progress"},` is 39 bytes around the
    // content; a content with characters to escape grows the buffer once.
    let size = 12 + todos.iter().map(|t| t.content().len() + 39).sum::<usize>();
    JsonText::encode_with_capacity(&TodoWriteData { todos }, size).map_err(|e| ToolError(format!("cannot encode the todo list: {e}")))
}

/// What the `todo/write` data is made from, borrowed.
#[derive(Serialize)]
struct TodoWriteData<'a, T> {
    todos: &'a [T],
}

/// The reply for `todos`, whose `todo/write` data is `data`: the value is
/// that object with the counts added after the list, byte for byte what
/// encoding a [`TodoWriteValue`] gives, without encoding the list again.
fn encoded_reply_of<T: ListItem>(todos: &[T], data: &JsonText) -> Result<EncodedReply, ToolError> {
    let counts = Counts::of_statuses(todos.iter().map(ListItem::status));
    let value = data.with_member("counts", &counts).map_err(|e| ToolError(format!("cannot encode the result value: {e}")))?;
    Ok(EncodedReply { text: reply_text(&counts), value: Some(value) })
}

/// Where a validated list goes: the calling agent's session. Implemented for
/// the SDK's [`ToolContext`]; tests and benchmarks supply their own.
pub trait TodoSink {
    /// Whether an agent session owns the call.
    fn has_session(&self) -> bool;
    /// Appends a `todo/write` event to the calling session; returns its
    /// `seq`. `data` is the encoded event data: a [`TodoWrite`](crate::TodoWrite),
    /// `{"todos":[...]}`.
    ///
    /// # Errors
    /// Whatever the session refuses (turn enclosure, write
    /// failure), as one line.
    fn append_todo_write(&self, data: JsonStr<'_>) -> Result<u64, String>;
}

impl TodoSink for ToolContext<'_> {
    fn has_session(&self) -> bool {
        ToolContext::has_session(self)
    }

    fn append_todo_write(&self, data: JsonStr<'_>) -> Result<u64, String> {
        self.append_json(TODO_WRITE, data).map_err(|e| e.0)
    }
}

/// Runs one call on already schema-checked arguments: [`validate_call`],
/// then the session check, the append to `sink`, and the [`reply`]. This is
/// exactly what the tool's `execute` does.
///
/// # Errors
/// The validation error; `todo_write needs an agent session that owns the
/// call ...` when `sink` has no session; or the append's error.
pub fn execute_call(args: TodoArgs, policy: Policy, sink: &dyn TodoSink) -> Result<ToolReply, ToolError> {
    let todos = validate_call(args, policy).map_err(ToolError)?;
    record(todos, sink).map(|(todos, _)| reply(todos))
}

/// [`execute_call`] with the reply's value as JSON text: what the tool's
/// `execute_encoded` (the SDK's entry point) runs. The list is encoded once,
/// into the event data; the reply value is that text with the counts added.
///
/// # Errors
/// As [`execute_call`].
pub fn execute_call_encoded(args: TodoArgs, policy: Policy, sink: &dyn TodoSink) -> Result<EncodedReply, ToolError> {
    let todos = validate_call(args, policy).map_err(ToolError)?;
    let (todos, data) = record(todos, sink)?;
    encoded_reply_of(&todos, &data)
}

/// [`execute_call_encoded`] on the host's parse of the arguments: what the
/// tool's `execute_parsed` (the host's call path) runs. The contents are
/// borrowed ([`TodoArgsRef`], [`validate_borrowed`]), not copied; the event
/// data appended and the reply are those of `execute_call_encoded` on the
/// same arguments.
///
/// # Errors
/// As [`execute_call`]. Arguments of the wrong shape (which the host's
/// schema check keeps out) get the message deserializing [`TodoArgs`]
/// gives, as on the text path.
pub fn execute_call_parsed(args: ParsedArgs<'_>, policy: Policy, sink: &dyn TodoSink) -> Result<EncodedReply, ToolError> {
    let Ok(borrowed) = args.deserialize::<TodoArgsRef<'_>>() else {
        // serde names the type it was building in its message: build the
        // owned one to say what the text path says.
        return execute_call_encoded(args.deserialize()?, policy, sink);
    };
    let todos = validate_borrowed(borrowed, policy).map_err(ToolError)?;
    let (todos, data) = record(todos, sink)?;
    encoded_reply_of(&todos, &data)
}

/// Steps 3–4 of the [module](self) pipeline for a validated list: requires
/// an agent session and appends the list to it; returns the list and the
/// event data appended.
fn record<T: ListItem>(todos: Vec<T>, sink: &dyn TodoSink) -> Result<(Vec<T>, JsonText), ToolError> {
    if !sink.has_session() {
        return Err(ToolError::new(
            "todo_write needs an agent session that owns the call, and this call was not made by an agent; \
             the list was not recorded",
        ));
    }
    let data = encode_data(&todos)?;
    sink.append_todo_write(data.as_json_str()).map_err(|e| ToolError(format!("the todo list could not be recorded: {e}")))?;
    Ok((todos, data))
}

/// The title of the card [`TodoWriteTool`] presents for a call.
pub const CARD_TITLE: &str = "Update todo list";

/// The card an interactive host shows for a call:
/// `{"kind": "generic", "title": "Update todo list", "todos": <the todos argument as given>}`
/// (`null` when the arguments hold no `todos`). The arguments are shown
/// unvalidated, as the model sent them.
pub fn present_call(args: &Value) -> Value {
    let todos = args.get("todos").cloned().unwrap_or(Value::Null);
    json!({"kind": "generic", "title": CARD_TITLE, "todos": todos})
}

/// The `todo_write` tool, registered by the plugin with the deployment's
/// [`Policy`].
#[derive(Debug, Clone)]
pub struct TodoWriteTool {
    policy: Policy,
    description: String,
}

impl TodoWriteTool {
    /// The tool under `policy`.
    pub fn new(policy: Policy) -> Self {
        TodoWriteTool { policy, description: description(policy) }
    }

    /// The policy the tool enforces.
    pub fn policy(&self) -> Policy {
        self.policy
    }
}

impl TypedTool for TodoWriteTool {
    type Args = TodoArgs;

    fn name(&self) -> &str {
        TOOL_NAME
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn parameters(&self) -> Value {
        parameters()
    }

    fn execute(&self, args: TodoArgs, cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        execute_call(args, self.policy, cx)
    }

    fn execute_encoded(&self, args: TodoArgs, cx: &ToolContext<'_>) -> Result<EncodedReply, ToolError> {
        execute_call_encoded(args, self.policy, cx)
    }

    fn execute_parsed(&self, args: ParsedArgs<'_>, cx: &ToolContext<'_>) -> Result<EncodedReply, ToolError> {
        execute_call_parsed(args, self.policy, cx)
    }

    fn present_call(&self, args: &Value) -> Value {
        present_call(args)
    }

    fn output_schema(&self) -> Option<Value> {
        Some(cordis_abi::schema::schema_for::<TodoWriteValue>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::TodoWrite;
    use std::cell::RefCell;

    fn args(items: &[(&str, Status)]) -> TodoArgs {
        TodoArgs { todos: items.iter().map(|(c, s)| Todo::new(*c, *s)).collect() }
    }

    struct Recorder {
        session: bool,
        refuse: Option<&'static str>,
        written: RefCell<Vec<String>>,
    }

    impl Recorder {
        fn agent() -> Self {
            Recorder { session: true, refuse: None, written: RefCell::new(Vec::new()) }
        }
    }

    impl TodoSink for Recorder {
        fn has_session(&self) -> bool {
            self.session
        }
        fn append_todo_write(&self, data: JsonStr<'_>) -> Result<u64, String> {
            if let Some(reason) = self.refuse {
                return Err(reason.to_string());
            }
            let mut written = self.written.borrow_mut();
            written.push(data.as_str().to_string());
            Ok(written.len() as u64 - 1)
        }
    }

    #[test]
    fn encoded_reply_is_the_reply_encoded() {
        let todos = vec![Todo::new("a \"quoted\" one", Status::Completed), Todo::new("b", Status::InProgress), Todo::new("c", Status::Pending)];
        let plain = reply(todos.clone());
        let encoded = encoded_reply(todos).unwrap();
        assert_eq!(encoded.text, plain.text);
        assert_eq!(encoded.value.as_ref().map(JsonText::as_str), plain.value.map(|v| v.to_string()).as_deref());
    }

    #[test]
    fn the_list_encoded_once_gives_the_same_event_data_and_reply() {
        for todos in [
            vec![],
            vec![
                Todo::new("a \"quoted\" one", Status::Completed),
                Todo::new("b\u{2028}\u{0}\\", Status::InProgress),
                Todo::new("ü ✓ 𝄞", Status::Pending),
            ],
        ] {
            let data = encode_data(&todos).unwrap();
            let expected = TodoWrite { todos: todos.clone() };
            assert_eq!(data.as_str(), serde_json::to_string(&expected).unwrap());
            let value = TodoWriteValue { counts: Counts::of(&todos), todos: todos.clone() };
            let reply = encoded_reply_of(&todos, &data).unwrap();
            assert_eq!(reply.value.as_ref().map(JsonText::as_str), Some(serde_json::to_string(&value).unwrap().as_str()));
            assert_eq!(reply.text, super::reply(todos).text);
        }
    }

    #[test]
    fn the_encoded_path_appends_and_replies_like_the_plain_one() {
        let call = || args(&[("  a  ", Status::Completed), ("b", Status::InProgress)]);
        let (plain_sink, encoded_sink) = (Recorder::agent(), Recorder::agent());
        let plain = execute_call(call(), Policy::Single, &plain_sink).unwrap();
        let encoded = execute_call_encoded(call(), Policy::Single, &encoded_sink).unwrap();
        assert_eq!(plain_sink.written.borrow().clone(), encoded_sink.written.borrow().clone());
        assert_eq!(encoded.text, plain.text);
        assert_eq!(encoded.value.as_ref().map(JsonText::as_str), plain.value.map(|v| v.to_string()).as_deref());
    }

    /// The host's parse of `value`, as the tool's `execute_parsed` gets it.
    fn parsed<'a>(value: &'a Value, tokens: &'a mut Vec<cordis_abi::tape::ArgToken<'a>>) -> ParsedArgs<'a> {
        cordis_abi::tape::write_tokens(value, tokens);
        ParsedArgs::new(tokens)
    }

    #[test]
    fn the_parsed_path_appends_replies_and_refuses_like_the_encoded_one() {
        let calls = [
            json!({"todos": [{"content": "  a \"quoted\" one ", "status": "completed"}, {"content": "\u{FEFF}b\u{2028}", "status": "in_progress"}]}),
            json!({"todos": [{"content": "ü ✓ 𝄞", "status": "pending"}, {"content": "\\ \u{0}", "status": "in_progress"}], "merge": true}),
            json!({"todos": []}),
            json!({"todos": [{"content": " x ", "status": "pending"}, {"content": "x", "status": "pending"}]}),
            json!({"todos": [{"content": "\t", "status": "pending"}]}),
            json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}),
            json!({"todos": [{"content": "a", "status": "done"}]}),
            json!({"todos": [{"content": "a", "status": "pending", "id": 1}]}),
            json!({"todos": [{"status": "pending"}]}),
            json!({"todos": {"content": "a"}}),
            json!([]),
        ];
        for policy in [Policy::Single, Policy::Parallel] {
            for call in &calls {
                let (encoded_sink, parsed_sink) = (Recorder::agent(), Recorder::agent());
                let encoded = serde_json::from_value::<TodoArgs>(call.clone())
                    .map_err(|e| ToolError(format!("invalid arguments: {e}")))
                    .and_then(|args| execute_call_encoded(args, policy, &encoded_sink));
                let mut tokens = Vec::new();
                let through_parse = execute_call_parsed(parsed(call, &mut tokens), policy, &parsed_sink);
                assert_eq!(through_parse, encoded, "{call} under {policy:?}");
                assert_eq!(*parsed_sink.written.borrow(), *encoded_sink.written.borrow(), "{call}");
            }
        }
    }

    #[test]
    fn borrowed_contents_stay_in_the_hosts_parse() {
        let call = json!({"todos": [{"content": "  spaced  ", "status": "pending"}, {"content": "plain", "status": "completed"}]});
        let mut tokens = Vec::new();
        let args: TodoArgsRef<'_> = parsed(&call, &mut tokens).deserialize().unwrap();
        let list = validate_borrowed(args, Policy::Parallel).unwrap();
        let given = call["todos"][0]["content"].as_str().unwrap();
        assert_eq!(list[0].content, "spaced");
        assert!(matches!(list[0].content, Cow::Borrowed(text) if std::ptr::eq(text, &given[2..8])), "trimmed in place, not copied");
        assert!(matches!(list[1].content, Cow::Borrowed(_)));
        assert_eq!(
            list.iter().map(TodoRef::to_todo).collect::<Vec<_>>(),
            [Todo::new("spaced", Status::Pending), Todo::new("plain", Status::Completed)]
        );
        // Parsed from text with an escape, the content is owned, and trims the same.
        let from_text: TodoArgsRef<'_> = serde_json::from_str(r#"{"todos": [{"content": " \u0041 ", "status": "pending"}]}"#).unwrap();
        let list = validate_borrowed(from_text, Policy::Single).unwrap();
        assert_eq!(list[0].content, "A");
    }

    #[test]
    fn trims_with_javascript_rules() {
        let out = validate_call(
            args(&[("  a  ", Status::Pending), ("\u{FEFF}b\u{2028}", Status::Completed), ("\u{0085}c", Status::Pending)]),
            Policy::Single,
        )
        .unwrap();
        let contents: Vec<&str> = out.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, ["a", "b", "\u{0085}c"]);
    }

    #[test]
    fn empty_content_names_the_item() {
        let err = validate_call(args(&[("a", Status::Pending), ("b", Status::Pending), (" \t\n", Status::Pending)]), Policy::Parallel).unwrap_err();
        assert!(err.starts_with("$.todos[2].content must not be empty"), "{err}");
    }

    #[test]
    fn duplicate_names_the_content_and_both_items() {
        let err = validate_call(args(&[("deploy", Status::Pending), ("  deploy  ", Status::Completed)]), Policy::Parallel).unwrap_err();
        assert!(err.starts_with("$.todos[1].content \"deploy\" repeats $.todos[0].content"), "{err}");
        assert!(validate_call(args(&[("Task", Status::Pending), ("task", Status::Pending)]), Policy::Single).is_ok());
    }

    #[test]
    fn single_policy_caps_in_progress() {
        let two = args(&[("a", Status::InProgress), ("b", Status::InProgress), ("c", Status::Pending)]);
        assert_eq!(validate_call(two.clone(), Policy::Parallel).unwrap().len(), 3);
        let err = validate_call(two, Policy::Single).unwrap_err();
        assert!(err.contains("at most one todo may be in_progress"), "{err}");
        assert!(err.ends_with("marks 2"), "{err}");
        assert!(validate_call(args(&[("a", Status::InProgress), ("b", Status::Completed)]), Policy::Single).is_ok());
    }

    #[test]
    fn content_errors_come_before_the_policy_error() {
        let err = validate_call(args(&[("a", Status::InProgress), ("b", Status::InProgress), ("", Status::Pending)]), Policy::Single).unwrap_err();
        assert!(err.starts_with("$.todos[2].content"), "{err}");
    }

    #[test]
    fn long_lists_and_long_todos_are_accepted_as_the_reference_accepts_them() {
        // The reference accepts 1 001 todos and a 5 000-character todo (issue
        // 11, kind 8): so do we, trimmed and in order.
        let many = TodoArgs { todos: (0..1001).map(|i| Todo::new(format!("t{i}"), Status::Pending)).collect() };
        let list = validate_call(many, Policy::Parallel).unwrap();
        assert_eq!(list.len(), 1001);
        assert_eq!(list[1000].content, "t1000");
        let long = format!("  {}  ", "x".repeat(5000));
        let list = validate_call(args(&[(&long, Status::Pending)]), Policy::Parallel).unwrap();
        assert_eq!(list[0].content, "x".repeat(5000));
    }

    #[test]
    fn reply_text_and_value_match_the_reference_shape() {
        let reply = reply(vec![
            Todo::new("read the spec", Status::Completed),
            Todo::new("write the parser", Status::InProgress),
            Todo::new("add tests", Status::Pending),
        ]);
        assert_eq!(reply.text, "Updated todo list: 1 pending, 1 in progress, 1 completed.");
        assert_eq!(
            reply.value.unwrap().to_string(),
            r#"{"todos":[{"content":"read the spec","status":"completed"},{"content":"write the parser","status":"in_progress"},{"content":"add tests","status":"pending"}],"counts":{"pending":1,"inProgress":1,"completed":1}}"#
        );
    }

    #[test]
    fn execute_appends_the_trimmed_list() {
        let sink = Recorder::agent();
        let out = execute_call(args(&[(" a ", Status::InProgress)]), Policy::Single, &sink).unwrap();
        assert_eq!(out.text, "Updated todo list: 0 pending, 1 in progress, 0 completed.");
        assert_eq!(*sink.written.borrow(), vec![r#"{"todos":[{"content":"a","status":"in_progress"}]}"#.to_string()]);
    }

    #[test]
    fn execute_needs_a_session_but_validates_first() {
        let sink = Recorder { session: false, ..Recorder::agent() };
        let err = execute_call(args(&[("a", Status::Pending)]), Policy::Parallel, &sink).unwrap_err();
        assert!(err.0.starts_with("todo_write needs an agent session"), "{err}");
        let err = execute_call(args(&[("  ", Status::Pending)]), Policy::Parallel, &sink).unwrap_err();
        assert!(err.0.contains("must not be empty"), "{err}");
        assert!(sink.written.borrow().is_empty());
    }

    #[test]
    fn append_failure_is_the_tool_error() {
        let sink = Recorder { refuse: Some("no open turn"), ..Recorder::agent() };
        let err = execute_call(args(&[("a", Status::Pending)]), Policy::Parallel, &sink).unwrap_err();
        assert!(err.0.ends_with("no open turn"), "{err}");
    }

    #[test]
    fn descriptions_differ_only_in_the_active_clause() {
        let parallel = description(Policy::Parallel);
        let single = description(Policy::Single);
        assert_ne!(parallel, single);
        assert!(parallel.starts_with(DESCRIPTION_BEFORE) && single.starts_with(DESCRIPTION_BEFORE));
        assert!(parallel.ends_with(DESCRIPTION_AFTER) && single.ends_with(DESCRIPTION_AFTER));
        assert!(parallel.contains("several at a time"));
        assert!(single.contains("at most one todo `in_progress`"));
    }

    #[test]
    fn schema_has_the_reference_shape() {
        let schema = parameters();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["todos"]));
        assert!(schema.get("additionalProperties").is_none(), "extra top-level keys are ignored, not rejected");
        assert!(schema.get("description").is_none());
        let todos = &schema["properties"]["todos"];
        assert_eq!(todos["type"], "array");
        assert!(todos["description"].is_string());
        let items = &todos["items"];
        assert_eq!(items["type"], "object");
        assert_eq!(items["additionalProperties"], json!(false));
        assert_eq!(items["required"], json!(["content", "status"]));
        assert!(items.get("description").is_none());
        assert_eq!(items["properties"]["content"]["type"], "string");
        let status = &items["properties"]["status"];
        assert_eq!(status["type"], "string");
        assert_eq!(status["enum"], json!(["pending", "in_progress", "completed"]));
        assert!(status.get("oneOf").is_none());
        assert_eq!(status.as_object().unwrap().len(), 3, "type, enum, description: {status}");
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["todos"]);
    }

    #[test]
    fn extra_top_level_keys_are_ignored() {
        let checker = cordis_abi::schema::Checker::new(parameters()).unwrap();
        let value = json!({"todos": [{"content": "ok", "status": "pending"}], "merge": true});
        assert!(checker.violations(&value).is_empty());
        let parsed: TodoArgs = serde_json::from_value(value).unwrap();
        assert_eq!(parsed, args(&[("ok", Status::Pending)]));
        let bad = json!({"todos": [{"content": "ok", "status": "pending", "id": "1"}]});
        assert_eq!(checker.violations(&bad).len(), 1);
    }

    #[test]
    fn card_carries_the_todos_argument_as_given() {
        let given = json!({"todos": [{"content": "  x ", "status": "bogus"}]});
        assert_eq!(present_call(&given), json!({"kind": "generic", "title": "Update todo list", "todos": [{"content": "  x ", "status": "bogus"}]}));
        assert_eq!(present_call(&json!("not json")), json!({"kind": "generic", "title": "Update todo list", "todos": null}));
    }
}
