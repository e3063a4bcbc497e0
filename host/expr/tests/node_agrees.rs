//! Every `!!js` expression in the fixture compositions, plus a few of our
//! own, evaluated by `node -e` and by `Evaluator` under the same fixed
//! environment: the two must agree (same JSON value, both undefined, or the
//! same kind of error naming the same name).
//!
//! Needs `node` on PATH; without it the test fails and says so.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cordis_expr::{Environment, Evaluator, ExprError};
use serde_json::{json, Map, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

const EXEC_PATH: &str = "/opt/fixed/bin/cordis";

/// Expressions of our own, for JS semantics the files rely on.
const EXTRA: &[&str] = &[
    "process.env.DSH_TELEMETRY_MODE ? 'on' : 'off'",
    "!process.env.DSH_SNAPSHOT",
    "!!process.env.DSH_SNAPSHOT && process.env.DSH_SNAPSHOT !== '0'",
    "process.env.DSH_TELEMETRY_MODE ?? 'unset'",
    "process.env.DSH_TELEMETRY_MODE || 'unset'",
    "0 ?? 'zero'",
    "0 || 'zero'",
    "'' ?? 'empty'",
    "'' || 'empty'",
    "null ?? false",
    "'port:' + 3080",
    "1 + 2 + '3'",
    "'1' + 2 + 3",
    "Number('12')",
    "Number('12') + 1",
    "Number(process.env.DSH_PORT ?? '3080')",
    "Number('')",
    "JSON.parse('{\"a\":1}')",
    "JSON.parse('{\"a\": [1, 2.5, \"x\", null, true]}').a",
    "JSON.parse('{nope')",
    "JSON.parse(process.env.DSH_MISSING)",
    "process.platform === 'linux' && process.cwd()",
    "process.execPath",
    "undefined",
    "null",
    "1 === 1.0",
    "'1' == 1",
    "'1' === 1",
    "typeof process.env.DSH_SNAPSHOT",
    "dshHomePath('sessions')",
    "ctx.headlessStartup.task",
    "ctx.webStartup.port ?? 3080",
    "ctx.webStartup?.missing ?? 'dflt'",
    "({a: undefined, b: [undefined, 1]})",
    "1 +",
    "null.x",
    "Number('abc')",
    "() => 1",
];

/// One `!!js` expression and where it came from.
struct Found {
    place: String,
    source: String,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/compositions")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, out);
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")) {
            out.push(path);
        }
    }
}

/// Collects the `!!js` scalars of one file, with their line numbers.
///
/// This reads parser events because the tag is only visible there:
/// `serde_yaml` (serde_yaml_ng) resolves `!!js x` to the plain string `x`,
/// dropping the tag.
struct JsScalars {
    file: String,
    found: Vec<Found>,
}

impl MarkedEventReceiver for JsScalars {
    fn on_event(&mut self, event: Event, mark: Marker) {
        if let Event::Scalar(value, _, _, Some(tag)) = event {
            let full = format!("{}{}", tag.handle, tag.suffix);
            if full == "!!js" || full == "tag:yaml.org,2002:js" {
                let place = format!("{}:{}", self.file, mark.line());
                self.found.push(Found { place, source: value });
            }
        }
    }
}

fn find_expressions() -> Vec<Found> {
    let root = fixtures();
    let mut files = Vec::new();
    yaml_files(&root, &mut files);
    assert!(!files.is_empty(), "no YAML files under {}", root.display());
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("fixture text");
        let name = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        let mut receiver = JsScalars { file: name.clone(), found: Vec::new() };
        Parser::new_from_str(&text).load(&mut receiver, true).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        // Guard the extraction: it must see every `!!js` the text has.
        let in_text = text.lines().filter(|l| !l.trim_start().starts_with('#') && l.contains("!!js")).count();
        assert_eq!(receiver.found.len(), in_text, "{name}: the parser found {} `!!js` values, the text has {in_text}", receiver.found.len());
        found.extend(receiver.found);
    }
    found
}

fn node() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir| dir.join("node")).find(|candidate| candidate.is_file()).unwrap_or_else(|| {
        panic!(
            "`node` is not on PATH: this test compares cordis-expr with Node and cannot \
                 run without it (install Node 18 or newer)"
        )
    })
}

/// The oracle: evaluates every expression with Node in one process and
/// prints one shape per expression. `ctx` is a Proxy that throws for a
/// service not given, like ours.
const NODE_SCRIPT: &str = r#"
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const vm = require('vm');
process.execPath = input.execPath;
Object.defineProperty(process, 'platform', { value: input.platform });
const mark = Symbol('oracle');
const services = input.services;
globalThis.ctx = new Proxy(services, {
  get(t, k) {
    if (typeof k === 'symbol' || Object.prototype.hasOwnProperty.call(t, k)) return t[k];
    if (k === 'toJSON') return undefined;
    const e = new ReferenceError('no service ' + k);
    e[mark] = { noservice: k };
    throw e;
  },
});
function noJson(k, x) {
  const t = typeof x;
  if (t === 'function' || t === 'symbol' || t === 'bigint' || (t === 'number' && !Number.isFinite(x))) {
    throw { [mark]: { notjson: true } };
  }
  return x;
}
function shape(source) {
  try { new vm.Script(source); } catch (e) { return { syntax: true }; }
  let value;
  try {
    value = vm.runInThisContext(source);
    if (value === undefined) return { undefined: true };
    const text = JSON.stringify(value, noJson);
    return text === undefined ? { undefined: true } : { ok: JSON.parse(text) };
  } catch (e) {
    if (e && e[mark]) return e[mark];
    const m = e instanceof ReferenceError && /^(\S+) is not defined$/.exec(e.message);
    if (m) return { unknown: m[1] };
    return { thrown: e && e.name ? e.name : String(e) };
  }
}
process.stdout.write(JSON.stringify(input.sources.map(shape)));
"#;

fn node_shapes(node: &Path, env: &Environment, services: &Map<String, Value>, sources: &[&str]) -> Vec<Value> {
    let input = json!({
        "execPath": env.exec_path,
        "platform": env.platform,
        "services": services,
        "sources": sources,
    });
    let mut child = Command::new(node)
        .arg("-e")
        .arg(NODE_SCRIPT)
        .env_clear()
        .envs(&env.vars)
        .current_dir(&env.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", node.display()));
    child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("writing to node");
    let output = child.wait_with_output().expect("node output");
    assert!(output.status.success(), "node failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("node printed JSON")
}

/// Our result in the oracle's shape.
fn our_shape(result: Result<Option<Value>, ExprError>) -> Value {
    match result {
        Ok(Some(value)) => json!({ "ok": value }),
        Ok(None) => json!({ "undefined": true }),
        Err(ExprError::UnknownName { name }) => json!({ "unknown": name }),
        Err(ExprError::NoService { name }) => json!({ "noservice": name }),
        Err(ExprError::Syntax { .. }) => json!({ "syntax": true }),
        Err(ExprError::NotJson { .. }) => json!({ "notjson": true }),
        Err(ExprError::Thrown { message }) => {
            json!({ "thrown": message.split(':').next().unwrap_or_default() })
        }
        Err(other) => json!({ "other": other.to_string() }),
    }
}

fn services(given: bool) -> Map<String, Value> {
    if !given {
        return Map::new();
    }
    match json!({ "headlessStartup": { "task": "t" }, "webStartup": { "port": 4000 } }) {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

/// An environment for the comparison: label, variables, whether services
/// are injected.
type Setting = (&'static str, &'static [(&'static str, &'static str)], bool);

#[test]
fn node_and_cordis_expr_agree_on_every_fixture_expression() {
    let node = node();
    let found = find_expressions();
    assert!(found.len() >= 30, "expected the fixtures' ~32 `!!js` values, found {}", found.len());
    let mut sources: Vec<&str> = found.iter().map(|f| f.source.as_str()).collect();
    sources.extend_from_slice(EXTRA);
    let places: Vec<String> = found.iter().map(|f| f.place.clone()).chain(EXTRA.iter().enumerate().map(|(i, _)| format!("extra #{i}"))).collect();

    let cwd = tempfile::tempdir().expect("temp dir");
    let cwd = cwd.path().canonicalize().expect("canonical temp dir");
    let environments: [Setting; 3] = [
        ("no DSH_* set", &[], true),
        ("snapshot, full access", &[("DSH_SNAPSHOT", "1"), ("DSH_PERMISSION_MODE", "danger-full-access"), ("DSH_TELEMETRY_MODE", "x")], true),
        (
            "empty and odd values, no services",
            &[
                ("DSH_SNAPSHOT", ""),
                ("DSH_TELEMETRY_MODE", ""),
                ("DSH_CWD", "/elsewhere"),
                ("DSH_SNAPSHOT_SESSIONS_ROOT", "/srv/sessions"),
                ("DSH_TOOLS_MODE", "0"),
                ("DSH_PORT", "not a number"),
            ],
            false,
        ),
    ];

    let mut disagreements = Vec::new();
    let mut compared = 0;
    for (label, vars, with_services) in environments {
        let env = Environment {
            vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            cwd: cwd.clone(),
            platform: "linux".to_owned(),
            exec_path: PathBuf::from(EXEC_PATH),
        };
        let services = services(with_services);
        let theirs = node_shapes(&node, &env, &services, &sources);
        assert_eq!(theirs.len(), sources.len(), "node answered for every expression");
        let evaluator = Evaluator::new(&env).expect("evaluator");
        for ((source, place), theirs) in sources.iter().zip(&places).zip(theirs) {
            let ours = our_shape(evaluator.eval(source, &services));
            compared += 1;
            if ours != theirs {
                disagreements.push(format!("[{label}] {place}: `{source}`\n  node: {theirs}\n  ours: {ours}"));
            }
        }
    }
    assert!(disagreements.is_empty(), "{} of {compared} disagree:\n{}", disagreements.len(), disagreements.join("\n"));
    eprintln!("{compared} evaluations agree ({} fixture expressions, {} extra, 3 environments)", found.len(), EXTRA.len());
}
