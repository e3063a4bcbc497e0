//! Services between plugins, through the real loader and the real compiled
//! fixture libraries `fixture-counter` (provides `counter`) and
//! `fixture-counter-user` (injects it and calls it from a tool): waiting
//! until the provider starts, a provider that fails, realms from `isolate`,
//! duplicate providers, shared labels, `ctx.<service>` in `!!js`.

use cordis_engine::loader::EntryState;
use cordis_engine::runtime::Host;
use cordis_engine::tools::ToolCall;
use cordis_tests::{text, Scratch};
use serde_json::Value;

fn call(host: &Host, tool: &str, args: &str) -> (bool, Value) {
    let result = host.services.tools.execute(&ToolCall { id: "c1", name: tool, arguments: args }, None);
    let value = serde_json::from_str(&result.text).unwrap_or(Value::String(result.text.clone()));
    (result.is_error, value)
}

fn state<'a>(host: &'a Host, id: &str) -> &'a EntryState {
    &host.reports.iter().find(|r| r.id == id).unwrap_or_else(|| panic!("no entry {id}: {:?}", host.reports)).state
}

#[test]
fn a_consumer_waits_for_its_provider_and_starts_when_it_appears() {
    let scratch = Scratch::new();
    // The consumer is listed first: it waits, then starts once the
    // provider has been applied.
    let host = scratch.boot(
        "- id: user\n  name: fixture-counter-user\n  config: {tool: next}\n- id: counter\n  name: fixture-counter\n  config: {label: a}\n",
        true,
    );
    assert_eq!(state(&host, "user"), &EntryState::Loaded, "{:?}", host.reports);
    assert_eq!(state(&host, "counter"), &EntryState::Loaded);
    let (err, v) = call(&host, "next", "{}");
    assert!(!err, "{v}");
    assert_eq!(v["label"], "a");
    assert_eq!(v["count"], 1);
    assert_eq!(call(&host, "next", "{}").1["count"], 2);
}

#[test]
fn without_a_provider_the_consumer_waits_and_check_says_so() {
    let scratch = Scratch::new();
    let host = scratch.boot("- id: user\n  name: fixture-counter-user\n  config: {tool: next}\n", true);
    match state(&host, "user") {
        // The plugin itself injects `counter`: the message is placed at
        // the row.
        EntryState::Waiting(m) => assert!(m[0].contains("/cordis.yml:1: entry user: waiting for service `counter`"), "{m:?}"),
        other => panic!("{other:?}"),
    }
    assert!(host.services.tools.get("next").is_none());
    assert_eq!(scratch.cordis(&["check"]).status.code(), Some(0));
    let strict = scratch.cordis(&["--strict", "check"]);
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict).0);
}

#[test]
fn a_waiting_entry_points_at_the_inject_item_naming_the_service() {
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config: {allowParallelInProgress: true}\n  inject:\n    - nosuch\n");
    let out = scratch.cordis(&["check"]);
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("cordis.yml:5: entry todo: waiting for service `nosuch`, which nothing provides"), "{stdout}{stderr}");
}

#[test]
fn a_consumer_listed_before_its_disabled_or_missing_provider_names_it() {
    let scratch = Scratch::new();
    scratch.composition(
        "- id: nudge\n  name: todo-nudge\n  config: {maxNudges: 1}\n- id: todo\n  name: tool-todo\n  disabled: true\n  config: {allowParallelInProgress: true}\n",
    );
    let stdout = text(&scratch.cordis(&["check"])).0;
    assert!(stdout.contains("waiting for service `todos`: entry todo (line 4) would provide it, but it is disabled"), "{stdout}");
    // Listed before a provider that loads, the consumer loads too.
    scratch.composition(
        "- id: nudge\n  name: todo-nudge\n  config: {maxNudges: 1}\n- id: todo\n  name: tool-todo\n  config: {allowParallelInProgress: true}\n",
    );
    let out = scratch.cordis(&["check"]);
    assert!(out.status.success() && !text(&out).0.contains("waiting"), "{}", text(&out).0);
}

#[test]
fn a_provider_failing_in_apply_leaves_its_consumers_waiting() {
    let scratch = Scratch::new();
    let host = scratch.boot(
        "- id: counter\n  name: fixture-counter\n  config: {label: a, fail: true}\n- id: user\n  name: fixture-counter-user\n  config: {tool: next}\n",
        true,
    );
    match state(&host, "counter") {
        EntryState::Failed(m) => assert!(m[0].contains("told to fail"), "{m:?}"),
        other => panic!("{other:?}"),
    }
    // The consumer's note names the provider row that failed, rather than
    // saying nothing provides the service.
    match state(&host, "user") {
        EntryState::Waiting(m) => {
            assert!(m[0].contains("waiting for service `counter`: entry counter (line 1) would provide it, but it failed"), "{m:?}");
            assert!(!m[0].contains("nothing provides"), "{m:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(host.services.tools.get("next").is_none(), "nothing of the consumer is registered");
    assert!(!host.services.registry.provides(&cordis_composition::RealmKey::Root, "counter"), "the failed provider's service is withdrawn");
}

#[test]
fn isolated_groups_get_their_own_instances() {
    let scratch = Scratch::new();
    let group = |g: &str| {
        format!(
            "- id: {g}\n  name: cordis:group\n  group: true\n  isolate:\n    counter: true\n  config:\n    - id: counter-{g}\n      name: fixture-counter\n      config: {{label: {g}}}\n    - id: user-{g}\n      name: fixture-counter-user\n      config: {{tool: next_{g}}}\n"
        )
    };
    let host = scratch.boot(&format!("{}{}", group("g1"), group("g2")), true);
    assert!(host.reports.iter().all(|r| !r.state.fails(true)), "{:?}", host.reports);
    let (_, one) = call(&host, "next_g1", "{}");
    let (_, two) = call(&host, "next_g2", "{}");
    assert_eq!(one["label"], "g1");
    assert_eq!(two["label"], "g2");
    assert_ne!(one["instance"], two["instance"]);
    assert_eq!(call(&host, "next_g1", "{}").1["count"], 2);
    assert_eq!(call(&host, "next_g2", "{}").1["count"], 2, "separate counts");
}

#[test]
fn a_second_provider_in_one_realm_fails_naming_both() {
    let scratch = Scratch::new();
    let host = scratch
        .boot("- id: first\n  name: fixture-counter\n  config: {label: a}\n- id: second\n  name: fixture-counter\n  config: {label: b}\n", true);
    assert_eq!(state(&host, "first"), &EntryState::Loaded);
    match state(&host, "second") {
        EntryState::Failed(m) => {
            let m = m.join("\n");
            assert!(m.contains("cordis.yml:4: entry second:"), "{m}");
            assert!(m.contains("already provided in the root realm by entry `first`") && m.contains("entry `second` cannot provide it"), "{m}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_shared_label_gives_two_groups_one_instance() {
    let scratch = Scratch::new();
    let host = scratch.boot(
        concat!(
            "- id: g1\n  name: cordis:group\n  group: true\n  isolate: {counter: shared}\n  config:\n",
            "    - {id: counter, name: fixture-counter, config: {label: s}}\n",
            "    - {id: user, name: fixture-counter-user, config: {tool: next_1}}\n",
            "- id: g2\n  name: cordis:group\n  group: true\n  isolate: {counter: shared}\n  config:\n",
            "    - {id: user2, name: fixture-counter-user, config: {tool: next_2}}\n",
            "- {id: outside, name: fixture-counter-user, config: {tool: next_root}}\n",
        ),
        true,
    );
    let (_, a) = call(&host, "next_1", "{}");
    let (_, b) = call(&host, "next_2", "{}");
    assert_eq!(a["instance"], b["instance"]);
    assert_eq!((a["count"].clone(), b["count"].clone()), (Value::from(1), Value::from(2)));
    // Outside the label, `counter` resolves in the root realm, where nothing
    // provides it.
    assert!(matches!(state(&host, "outside"), EntryState::Waiting(_)), "{:?}", host.reports);
}

#[test]
fn expressions_see_the_injected_service() {
    let scratch = Scratch::new();
    let host = scratch.boot(
        "- {id: counter, name: fixture-counter, config: {label: lbl}}\n- id: user\n  name: fixture-counter-user\n  config:\n    tool: next\n    seen: !!js ctx.counter.label + '!'\n",
        true,
    );
    assert_eq!(state(&host, "user"), &EntryState::Loaded, "{:?}", host.reports);
    assert_eq!(call(&host, "next", r#"{"seen": true}"#).1["seen"], "lbl!");
}

#[test]
fn a_panicking_provider_is_an_error_of_the_call() {
    let scratch = Scratch::new();
    let host = scratch.boot("- {id: counter, name: fixture-counter, config: {label: a}}\n", true);
    let err = host.services.registry.call(&cordis_composition::RealmKey::Root, "counter", "panic", "{}").unwrap_err();
    assert!(err.contains("plugin fixture-counter panicked in service counter method panic"), "{err}");
    assert!(host.services.registry.call(&cordis_composition::RealmKey::Root, "counter", "next", "{}").is_ok(), "it keeps serving");
}

#[test]
fn an_optional_service_that_is_absent_shows_as_null_and_self_injection_fails() {
    let scratch = Scratch::new();
    let host = scratch.boot(
        "- id: user\n  name: fixture-counter-user\n  inject:\n    counter: {required: false}\n  config:\n    tool: next\n    seen: !!js ctx.counter\n",
        true,
    );
    // The entry relaxes the plugin's own requirement: it starts, and its
    // expression sees the absent service as null.
    assert_eq!(state(&host, "user"), &EntryState::Loaded, "{:?}", host.reports);
    assert_eq!(call(&host, "next", r#"{"seen": true}"#).1["seen"], Value::Null);
    let (err, v) = call(&host, "next", "{}");
    assert!(err && v.as_str().unwrap_or_default().contains("not available"), "{v}");
    let host = scratch.boot("- id: loop\n  name: fixture-counter\n  inject: [counter]\n  config: {label: a}\n", true);
    match state(&host, "loop") {
        EntryState::Failed(m) => assert!(m[0].contains("which it provides itself"), "{m:?}"),
        other => panic!("{other:?}"),
    }
}
