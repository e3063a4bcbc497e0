//! Bytes as `todo_write` argument text, through the code the plugin runs
//! for a call, in-process and without the ABI: `parse_arguments` with the
//! tool's schema, `TodoArgs` from the checked value, then `validate_call`
//! under both policies.
//!
//! Beyond "no panic, no stack overflow", it checks what the tool promises:
//! - every error is one line;
//! - arguments the schema accepts can be read as `TodoArgs`;
//! - a list `validate_call` accepts passes the durable-log invariant
//!   (`check_todo_write`) and folds back to the same list;
//! - the single policy accepts nothing the parallel one refuses, and both
//!   store the same list.

#![no_main]

use std::sync::LazyLock;

use cordis_abi::schema::Checker;
use cordis_abi::sdk::parse_arguments;
use libfuzzer_sys::fuzz_target;
use tool_todo::{check_todo_write, validate_call, Policy, TodoArgs, TodoWrite};

static CHECKER: LazyLock<Checker> =
    LazyLock::new(|| Checker::new(tool_todo::tool::parameters()).expect("the tool's schema compiles"));

fn one_line(message: &str) {
    assert!(!message.contains('\n'), "an error of several lines: {message}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let value = match parse_arguments(text, &CHECKER) {
        Ok(value) => value,
        Err(message) => return one_line(&message),
    };
    let args: TodoArgs = match serde_json::from_value(value) {
        Ok(args) => args,
        Err(e) => panic!("the schema accepted arguments that TodoArgs cannot read: {e}"),
    };
    let parallel = validate_call(args.clone(), Policy::Parallel);
    let single = validate_call(args, Policy::Single);
    match (&parallel, &single) {
        (Err(message), Ok(_)) => panic!("the single policy accepted what the parallel one refused: {message}"),
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the policies stored different lists"),
        _ => {}
    }
    for outcome in [parallel, single] {
        match outcome {
            Err(message) => one_line(&message),
            Ok(todos) => {
                let data = serde_json::to_string(&TodoWrite { todos: todos.clone() }).expect("a list encodes");
                if let Err(e) = check_todo_write(&data) {
                    panic!("an accepted list fails the invariant: {e}\n{data}");
                }
                let folded = tool_todo::projection::fold(None, tool_todo::TODO_WRITE, &data).expect("the fold reads it");
                assert_eq!(folded, Some(todos), "the fold changed the list");
            }
        }
    }
});
