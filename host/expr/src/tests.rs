//! Unit tests: the expression forms the composition files use, and every
//! error variant.

use super::*;
use serde_json::{json, Map, Value};

fn env(vars: &[(&str, &str)]) -> Environment {
    Environment {
        vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        cwd: PathBuf::from("/work/space"),
        platform: "linux".to_owned(),
        exec_path: PathBuf::from("/usr/bin/cordis"),
    }
}

fn none() -> Map<String, Value> {
    Map::new()
}

fn services() -> Map<String, Value> {
    match json!({"headlessStartup": {"task": "t"}, "webStartup": {"port": 4000}}) {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

fn eval(ev: &Evaluator, source: &str) -> Result<Option<Value>, ExprError> {
    ev.eval(source, &services())
}

#[test]
fn ternaries_nullish_or_and_strict_equality() {
    let unset = Evaluator::new(&env(&[])).unwrap();
    let set = Evaluator::new(&env(&[("DSH_SNAPSHOT", "1"), ("DSH_PERMISSION_MODE", "danger-full-access"), ("DSH_TELEMETRY_MODE", "")])).unwrap();
    let compression = "process.env.DSH_SNAPSHOT === undefined ? 'zstd' : 'none'";
    assert_eq!(eval(&unset, compression).unwrap(), Some(json!("zstd")));
    assert_eq!(eval(&set, compression).unwrap(), Some(json!("none")));

    let policy = "(process.env.DSH_PERMISSION_MODE ?? (process.env.DSH_SNAPSHOT === undefined \
                  ? 'workspace-write' : 'danger-full-access')) === 'danger-full-access' ? 'never' : 'ask'";
    assert_eq!(eval(&unset, policy).unwrap(), Some(json!("ask")));
    assert_eq!(eval(&set, policy).unwrap(), Some(json!("never")));

    // `||` falls back on '' ; `??` does not.
    let telemetry = "process.env.DSH_TELEMETRY_MODE || 'DISABLED'";
    assert_eq!(eval(&unset, telemetry).unwrap(), Some(json!("DISABLED")));
    assert_eq!(eval(&set, telemetry).unwrap(), Some(json!("DISABLED")));
    assert_eq!(eval(&set, "process.env.DSH_TELEMETRY_MODE ?? 'DISABLED'").unwrap(), Some(json!("")));
    assert_eq!(eval(&set, "0 ?? 5").unwrap(), Some(json!(0)));
    assert_eq!(eval(&set, "0 || 5").unwrap(), Some(json!(5)));

    assert_eq!(eval(&unset, "process.cwd()").unwrap(), Some(json!("/work/space")));
    assert_eq!(eval(&unset, "process.env.DSH_CWD ?? process.cwd()").unwrap(), Some(json!("/work/space")));
    assert_eq!(eval(&unset, "process.platform !== 'win32'").unwrap(), Some(json!(true)));
    assert_eq!(eval(&unset, "process.execPath").unwrap(), Some(json!("/usr/bin/cordis")));
    assert_eq!(eval(&unset, "'port ' + 3 + 1").unwrap(), Some(json!("port 31")));
    assert_eq!(eval(&unset, "Number('12') + 1").unwrap(), Some(json!(13)));
    assert_eq!(eval(&unset, "JSON.parse('{\"a\":1}')").unwrap(), Some(json!({"a": 1})));
    assert_eq!(eval(&unset, "[1, 'a', null, {b: false}]").unwrap(), Some(json!([1, "a", null, {"b": false}])));
    assert_eq!(eval(&unset, "1.5").unwrap(), Some(json!(1.5)));
}

#[test]
fn undefined_is_none() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    assert_eq!(eval(&ev, "process.env.DSH_TOOLS_MODE").unwrap(), None);
    assert_eq!(eval(&ev, "undefined").unwrap(), None);
    assert_eq!(eval(&ev, "").unwrap(), None);
    assert_eq!(eval(&ev, "null").unwrap(), Some(Value::Null));
}

#[test]
fn truthiness() {
    let ev = Evaluator::new(&env(&[("EMPTY", ""), ("ZERO", "0")])).unwrap();
    for falsy in ["undefined", "null", "false", "0", "NaN", "''", "process.env.EMPTY", "process.env.NOPE"] {
        assert!(!ev.truthy(falsy, &none()).unwrap(), "{falsy}");
    }
    for truthy in ["'0'", "process.env.ZERO", "[]", "({})", "() => 1", "process.platform === 'linux'"] {
        assert!(ev.truthy(truthy, &none()).unwrap(), "{truthy}");
    }
    assert_eq!(ev.truthy("dshHomePath('x')", &none()), Err(ExprError::UnknownName { name: "dshHomePath".into() }));
    assert!(matches!(ev.truthy("1 +", &none()), Err(ExprError::Syntax { .. })));
}

#[test]
fn json_parse_error_is_thrown() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    match eval(&ev, "JSON.parse('{nope')") {
        Err(ExprError::Thrown { message }) => {
            assert!(message.starts_with("SyntaxError"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(eval(&ev, "throw 'plain'"), Err(ExprError::Thrown { message: "plain".into() }));
    match eval(&ev, "null.x") {
        Err(ExprError::Thrown { message }) => {
            assert!(message.starts_with("TypeError"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // A nested eval's parse error is thrown at run time, not a syntax error
    // of the expression.
    assert!(matches!(eval(&ev, "eval('(')"), Err(ExprError::Thrown { .. })));
}

#[test]
fn unknown_names() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    let err = eval(&ev, "dshHomePath('sessions')").unwrap_err();
    assert_eq!(err, ExprError::UnknownName { name: "dshHomePath".into() });
    assert!(err.to_string().starts_with("`dshHomePath` is not available to expressions"), "{err}");
    assert_eq!(eval(&ev, "process.getBuiltinModule('fs')"), Err(ExprError::UnknownName { name: "process.getBuiltinModule".into() }));
    assert_eq!(eval(&ev, "process.versions.node"), Err(ExprError::UnknownName { name: "process.versions".into() }));
    assert_eq!(eval(&ev, "require('fs')"), Err(ExprError::UnknownName { name: "require".into() }));
    assert_eq!(eval(&ev, "typeof require"), Ok(Some(json!("undefined"))));
    // No OS access through the engine's own modules or a loader.
    // `import()` gives a promise; with no module loader installed it can
    // only reject. (The evaluator never runs promise jobs itself; run them
    // here to see the outcome.)
    eval(&ev, "globalThis.r = 'pending'; import('os').then(() => r = 'loaded', e => r = 'refused: ' + e)").unwrap();
    while ev.context.runtime().execute_pending_job().unwrap_or(false) {}
    let outcome = eval(&ev, "r").unwrap().unwrap();
    assert!(outcome.as_str().unwrap().starts_with("refused"), "{outcome}");
    assert_eq!(eval(&ev, "typeof std + typeof os + typeof scriptArgs"), Ok(Some(json!("undefinedundefinedundefined"))));
}

#[test]
fn ctx_services() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    assert_eq!(eval(&ev, "ctx.headlessStartup.task").unwrap(), Some(json!("t")));
    assert_eq!(eval(&ev, "ctx.webStartup.port ?? 3080").unwrap(), Some(json!(4000)));
    assert_eq!(eval(&ev, "ctx.headlessStartup.missing").unwrap(), None);
    let err = ev.eval("ctx.webStartup.port ?? 3080", &none()).unwrap_err();
    assert_eq!(err, ExprError::NoService { name: "webStartup".into() });
    assert_eq!(err.to_string(), "the entry does not inject a service `webStartup`");
    // Services do not leak from one evaluation into the next.
    assert!(ev.eval("ctx.headlessStartup", &none()).is_err());
    // An expression cannot replace `ctx` or `process`.
    let _ = eval(&ev, "ctx = 1; process = 2; process.env.X = 'y'");
    assert_eq!(eval(&ev, "ctx.headlessStartup.task").unwrap(), Some(json!("t")));
    assert_eq!(eval(&ev, "process.env.X").unwrap(), None);
}

#[test]
fn infinite_loop_hits_time_limit_and_evaluator_survives() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    let start = Instant::now();
    let err = eval(&ev, "while (true) {}").unwrap_err();
    assert!(matches!(err, ExprError::Limit { ref what } if what.contains("time")), "{err:?}");
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    // The limit cannot be caught by the expression.
    assert!(matches!(eval(&ev, "try { while (true) {} } catch (e) { 1 }"), Err(ExprError::Limit { .. })));
    assert_eq!(eval(&ev, "1 + 1").unwrap(), Some(json!(2)));
}

#[test]
fn memory_and_stack_limits() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    let err = eval(&ev, "let a = []; while (true) a.push(new Array(100000).fill(1.5)); 1").unwrap_err();
    assert!(matches!(err, ExprError::Limit { ref what } if what.contains("memory")), "{err:?}");
    let err = eval(&ev, "(function f() { return f() + 1 })()").unwrap_err();
    assert!(matches!(err, ExprError::Limit { ref what } if what.contains("stack")), "{err:?}");
    assert_eq!(eval(&ev, "'still ' + 'alive'").unwrap(), Some(json!("still alive")));
}

#[test]
fn syntax_errors() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    for bad in ["1 +", "(", "process.env.", "'unterminated", "a b", "\0"] {
        assert!(matches!(eval(&ev, bad), Err(ExprError::Syntax { .. })), "{bad:?}: {:?}", eval(&ev, bad));
    }
}

#[test]
fn results_without_json_form() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    for (source, what) in [
        ("() => 1", "a function"),
        ("Symbol('s')", "a symbol"),
        ("10n", "a BigInt"),
        ("Number('abc')", "NaN"),
        ("1 / 0", "Infinity"),
        ("({f() {}})", "a function (at key `f`)"),
        ("(() => { const o = {}; o.o = o; return o })()", "a cyclic structure"),
    ] {
        assert_eq!(eval(&ev, source), Err(ExprError::NotJson { what: what.into() }), "{source}");
    }
    assert_eq!(eval(&ev, "({a: undefined, b: 1})").unwrap(), Some(json!({"b": 1})));
    assert_eq!(eval(&ev, "process.env").unwrap(), Some(json!({})));
    assert_eq!(eval(&ev, "ctx").unwrap(), Some(json!({"headlessStartup": {"task": "t"}, "webStartup": {"port": 4000}})));
}

#[test]
fn hostile_inputs_do_not_panic() {
    let ev = Evaluator::new(&env(&[])).unwrap();
    for source in [
        "JSON = null; Object = null; String = null; Reflect = null; 1",
        "({get toJSON() { throw new Error('x') }})",
        "throw {get message() { throw 1 }, get name() { throw 2 }}",
        "throw null",
        "throw Symbol('s')",
        "new Proxy({}, {get() { throw 1 }, ownKeys() { throw 2 }})",
        "Promise.reject(1)",
        "'\\u{10FFFF}\\uD800'",
    ] {
        let _ = ev.eval(source, &services());
        let _ = ev.truthy(source, &services());
    }
    // The prelude captured what it needs, so it still works.
    assert_eq!(eval(&ev, "process.env.X ?? 'fine'").unwrap(), Some(json!("fine")));
    assert!(matches!(eval(&ev, "dshHomePath"), Err(ExprError::UnknownName { .. })));
}

#[test]
fn current_environment() {
    let env = Environment::current();
    assert_eq!(env.platform, node_platform(std::env::consts::OS));
    let ev = Evaluator::new(&env).unwrap();
    let cwd = env.cwd.to_string_lossy().into_owned();
    assert_eq!(ev.eval("process.cwd()", &none()).unwrap(), Some(json!(cwd)));
}

#[test]
fn the_committed_prelude_bytecode_is_the_prelude_compiled() {
    let fresh = prelude_bytecode().unwrap();
    assert_eq!(fresh, prelude_bytecode().unwrap(), "compiling the prelude twice gave different bytecode");
    if std::env::var_os("CORDIS_EXPR_BLESS").is_some() {
        std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/src/prelude.bytecode"), &fresh).unwrap();
        return;
    }
    assert!(
        fresh == PRELUDE_BYTECODE,
        "src/prelude.bytecode is not src/prelude.js compiled by this build's QuickJS; \
         rewrite it with `CORDIS_EXPR_BLESS=1 cargo test -p cordis-expr prelude_bytecode` and commit it"
    );
}

#[test]
fn the_prelude_loads_from_its_bytecode() {
    let runtime = Runtime::new().unwrap();
    let context = Context::full(&runtime).unwrap();
    context.with(|ctx| {
        assert!(read_prelude_bytecode(&ctx).is_some(), "the engine refused the committed bytecode: {:?}", ctx.catch());
    });
}
