//! Evaluates the composition dialect's `!!js` expressions with real
//! JavaScript semantics.
//!
//! A composition file may write a value as `!!js <expression>`, for example
//! `!!js process.env.DSH_PERMISSION_MODE ?? 'workspace-write'`. The reference
//! host evaluates these with Node; this crate evaluates them with QuickJS (the
//! `quickjs-ng` engine, through the [`rquickjs`] bindings), so truthiness,
//! `??` against `||`, `+` concatenation and `JSON.parse` errors behave as in
//! JavaScript because they *are* JavaScript. The test `tests/node_agrees.rs`
//! runs every expression in the fixture compositions through `node -e` and
//! through [`Evaluator`] under the same environment and checks they agree.
//!
//! # What an expression sees
//!
//! Only `process.env` (an object of strings; a variable that is not set is
//! `undefined`), `process.cwd()`, `process.platform`, `process.execPath`,
//! `ctx.<service>` (the JSON value of a service the entry injects), and the
//! engine's standard built-ins (`JSON`, `Number`, `String`, `Math`, ...).
//! There is no file, network, module or OS access: no `require`, no module
//! loader (so `import` fails), no QuickJS `std`/`os` modules. Reading any
//! other member of `process` (say `process.getBuiltinModule`) or a service
//! that is not injected is an error that names it, never a silent
//! `undefined`.
//!
//! Each expression runs under a time limit ([`TIME_LIMIT`], checked through
//! the engine's interrupt handler) and the runtime under a memory limit
//! ([`MEMORY_LIMIT`]). One [`Evaluator`] keeps one runtime and one context and
//! reuses them; `process` and `ctx` cannot be replaced by an expression, but a
//! global variable an expression creates (`globalThis.x = 1`) stays visible to
//! later expressions of the same evaluator, as it would in one Node process.
//!
//! # Why QuickJS, and what it costs
//!
//! `rquickjs` (0.14, MIT, released regularly) bundles the C sources of
//! quickjs-ng and compiles them with the `cc` crate: no other native
//! dependency, and no bindgen on Linux x86_64 (its bindings are
//! pre-generated). The alternative, `boa_engine`, is pure Rust but much
//! heavier to build. Measured on this project's 2-core build machine:
//!
//! - Clean `cargo build -p cordis-expr` (23 crates, dev profile): about 16 s.
//!   The release build takes about 47 s, because QuickJS is then compiled
//!   with optimisation. A scratch project depending only on `boa_engine`
//!   0.22 took about 75 s for its clean dev build (147 crates).
//! - [`Evaluator::new`] (runtime, context, prelude) costs about 0.3–0.4 ms
//!   in a release build (1.6 ms in a dev build); the prelude is loaded as
//!   bytecode compiled ahead (`src/prelude.bytecode`) in about 0.06 ms,
//!   where parsing its source took about 0.6 ms. The first evaluation after it takes about
//!   30 µs (100 µs dev), a later one about 15 µs (70 µs dev), for the
//!   longest expression of the fixture files (nested `??` and ternaries).
//!   `cargo run --release -p cordis-expr --example cost` measures them again.
//!
//! Both are small next to the rest of a host start, so an embedder can
//! create one evaluator per composition load and drop it afterwards.
//!
//! # Stack
//!
//! The engine may use up to 512 KiB of native stack below the point where the
//! evaluator was created (deeper recursion is [`ExprError::Limit`]), so call
//! it from a thread with at least 1 MiB of stack (Rust's default is 2 MiB).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::{Context, Ctx, Function, Object, Persistent, Runtime};

/// How long one evaluation may run before it is stopped with
/// [`ExprError::Limit`].
pub const TIME_LIMIT: Duration = Duration::from_secs(1);

/// How much memory (bytes) the runtime of one [`Evaluator`] may allocate, in
/// total, before allocation fails with [`ExprError::Limit`].
pub const MEMORY_LIMIT: usize = 32 * 1024 * 1024;

/// How deep (bytes of native stack) the engine may recurse before it raises a
/// stack overflow, reported as [`ExprError::Limit`].
const STACK_LIMIT: usize = 512 * 1024;

/// The set-up script: defines `process` and `ctx` and returns the helper
/// that evaluates one expression.
const PRELUDE: &str = include_str!("prelude.js");

/// The file name the prelude's functions carry in the engine (in stack
/// traces and its own error messages).
const PRELUDE_NAME: &str = "cordis-expr prelude";

/// [`PRELUDE`] compiled to QuickJS bytecode by [`prelude_bytecode`] with this
/// build's engine. Loading it takes about a tenth of the time of parsing the
/// script (0.06 ms against 0.6 ms). The unit test
/// `the_committed_prelude_bytecode_is_the_prelude_compiled` fails when it
/// no longer matches the script or the engine, and rewrites it when run
/// with `CORDIS_EXPR_BLESS=1`.
const PRELUDE_BYTECODE: &[u8] = include_bytes!("prelude.bytecode");

/// What expressions may see of the machine.
///
/// Build it with [`Environment::current`] for the real process, or by hand
/// (tests do this to pin every value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// Environment variables, visible as `process.env.NAME` (strings).
    pub vars: BTreeMap<String, String>,
    /// The working directory, the result of `process.cwd()`.
    pub cwd: PathBuf,
    /// The Node-style platform name, `process.platform`: `linux`, `darwin`,
    /// `win32`, `freebsd`, `openbsd`, `netbsd`, `android`, `aix`, `sunos`,
    /// or Rust's own name for any other OS.
    pub platform: String,
    /// The executable's path, `process.execPath`.
    pub exec_path: PathBuf,
}

impl Environment {
    /// The environment of this process: its environment variables (those
    /// whose name and value are valid Unicode; others are left out), its
    /// current directory (empty if it cannot be read), the Node-style name of
    /// the OS it was built for, and [`std::env::current_exe`] (empty if that
    /// fails).
    pub fn current() -> Environment {
        let vars = std::env::vars_os().filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?))).collect();
        Environment {
            vars,
            cwd: std::env::current_dir().unwrap_or_default(),
            platform: node_platform(std::env::consts::OS).to_owned(),
            exec_path: std::env::current_exe().unwrap_or_default(),
        }
    }
}

/// Node's `process.platform` name for a Rust `std::env::consts::OS` name.
fn node_platform(os: &str) -> &str {
    match os {
        "macos" | "ios" => "darwin",
        "windows" => "win32",
        "solaris" | "illumos" => "sunos",
        other => other,
    }
}

/// Why an expression has no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// The expression reads a global name, or a member of `process`, that
    /// expressions are not given. `name` is the name as written, dotted for
    /// `process` members (`dshHomePath`, `process.getBuiltinModule`).
    #[error(
        "`{name}` is not available to expressions (they may use process.env, process.cwd(), \
         process.platform, process.execPath, ctx.<injected service>)"
    )]
    UnknownName {
        /// The name that is not defined.
        name: String,
    },
    /// The expression reads `ctx.<name>`, but the entry injects no service
    /// of that name.
    #[error("the entry does not inject a service `{name}`")]
    NoService {
        /// The service name read from `ctx`.
        name: String,
    },
    /// The expression threw (for example `JSON.parse` on bad text).
    /// `message` is `Name: message` for an Error object, or the thrown value
    /// as a string.
    #[error("the expression threw {message}")]
    Thrown {
        /// The thrown error as text, e.g. `SyntaxError: unexpected token`.
        message: String,
    },
    /// The expression is not valid JavaScript.
    #[error("the expression is not valid JavaScript: {message}")]
    Syntax {
        /// The engine's parse error.
        message: String,
    },
    /// The result has no JSON form: `what` says what was found (a function,
    /// a symbol, a BigInt, NaN, Infinity, a cyclic structure), and at which
    /// key if not at the top.
    #[error("the expression's result has no JSON form: {what}")]
    NotJson {
        /// What was found, e.g. ``a function (at key `f`)``.
        what: String,
    },
    /// The evaluation ran out of time ([`TIME_LIMIT`]), memory
    /// ([`MEMORY_LIMIT`]) or stack. `what` names the limit.
    #[error("the expression exceeded the {what}")]
    Limit {
        /// The limit, e.g. `time limit of 1 s`.
        what: String,
    },
    /// The engine itself failed (could not create its runtime, or failed in
    /// a way that is none of the above). A bug or an exhausted machine.
    #[error("the JavaScript engine failed: {message}")]
    Engine {
        /// The engine's description of the failure.
        message: String,
    },
}

/// Evaluates expressions. Holds one JavaScript runtime and context, created
/// once by [`Evaluator::new`] and reused by every evaluation. Not `Send`:
/// create it on the thread that uses it.
pub struct Evaluator {
    // Field order matters: the saved helper must be dropped before the
    // context and the runtime it lives in.
    run: Persistent<Function<'static>>,
    context: Context,
    _runtime: Runtime,
    deadline: Rc<Cell<Option<Instant>>>,
    interrupted: Rc<Cell<bool>>,
}

/// The answer of the prelude's `run` helper.
struct Outcome {
    kind: String,
    name: String,
    text: String,
}

impl Evaluator {
    /// Creates the runtime and context, with the limits set and `process`
    /// built from `env`.
    ///
    /// Errors: [`ExprError::Engine`] if the engine cannot be created (out of
    /// memory) or the environment cannot be passed to it.
    pub fn new(env: &Environment) -> Result<Evaluator, ExprError> {
        let runtime = Runtime::new().map_err(engine)?;
        runtime.set_memory_limit(MEMORY_LIMIT);
        runtime.set_max_stack_size(STACK_LIMIT);
        let deadline: Rc<Cell<Option<Instant>>> = Rc::new(Cell::new(None));
        let interrupted = Rc::new(Cell::new(false));
        {
            let deadline = Rc::clone(&deadline);
            let interrupted = Rc::clone(&interrupted);
            runtime.set_interrupt_handler(Some(Box::new(move || match deadline.get() {
                Some(limit) if Instant::now() >= limit => {
                    interrupted.set(true);
                    true
                }
                _ => false,
            })));
        }
        let context = Context::full(&runtime).map_err(engine)?;
        let environment = serde_json::json!({
            "vars": env.vars,
            "cwd": env.cwd.to_string_lossy(),
            "platform": env.platform,
            "execPath": env.exec_path.to_string_lossy(),
        })
        .to_string();
        let run = context.with(|ctx| -> Result<_, ExprError> {
            let setup: Function = load_prelude(&ctx)?;
            let helpers: Object = setup.call((environment,)).map_err(|e| caught(&ctx, e))?;
            let run: Function = helpers.get("run").map_err(|e| caught(&ctx, e))?;
            Ok(Persistent::save(&ctx, run))
        })?;
        Ok(Evaluator { run, context, _runtime: runtime, deadline, interrupted })
    }

    /// Evaluates `source` as one JS expression. `services` maps injected
    /// service names to their JSON values, visible as `ctx.<name>`.
    ///
    /// The source is run like Node's global `eval`: as a script whose
    /// completion value is the result, so a single expression is the usual
    /// case. Returns `Ok(None)` for `undefined`, `Ok(Some(json))` otherwise:
    /// the value as `JSON.stringify` would write it (`toJSON` is honoured, an
    /// `undefined` property is left out), except that a function, symbol,
    /// BigInt, NaN or Infinity anywhere in it is [`ExprError::NotJson`].
    ///
    /// Errors: see [`ExprError`]; each variant says what went wrong. Never
    /// panics, whatever `source` holds.
    pub fn eval(&self, source: &str, services: &serde_json::Map<String, serde_json::Value>) -> Result<Option<serde_json::Value>, ExprError> {
        let outcome = self.run(source, services, false)?;
        match outcome.kind.as_str() {
            "undefined" => Ok(None),
            "ok" => serde_json::from_str(&outcome.text)
                .map(Some)
                .map_err(|e| ExprError::Engine { message: format!("the engine wrote JSON that does not parse: {e}") }),
            _ => Err(outcome_error(outcome)),
        }
    }

    /// JS truthiness of the result (for `disabled`): `false` for `undefined`,
    /// `null`, `false`, `0`, `NaN` and `''`, `true` for anything else.
    ///
    /// Errors: as for [`Evaluator::eval`], except that a result with no JSON
    /// form (a function, say) is not an error here.
    pub fn truthy(&self, source: &str, services: &serde_json::Map<String, serde_json::Value>) -> Result<bool, ExprError> {
        let outcome = self.run(source, services, true)?;
        match (outcome.kind.as_str(), outcome.text.as_str()) {
            ("ok", "true") => Ok(true),
            ("ok", "false") => Ok(false),
            _ => Err(outcome_error(outcome)),
        }
    }

    /// Runs the prelude's `run` helper on `source` under the time limit.
    /// With `truthy`, the outcome is `ok` with text `true` or `false`.
    fn run(&self, source: &str, services: &serde_json::Map<String, serde_json::Value>, truthy: bool) -> Result<Outcome, ExprError> {
        let services = serde_json::to_string(services).map_err(engine_json)?;
        self.interrupted.set(false);
        self.deadline.set(Some(Instant::now() + TIME_LIMIT));
        let result = self.context.with(|ctx| -> Result<Outcome, ExprError> {
            let run = self.run.clone().restore(&ctx).map_err(engine)?;
            let answer: Object = run.call((source, services, truthy)).map_err(|e| caught(&ctx, e))?;
            let field = |key: &str| -> Result<String, ExprError> { answer.get::<_, String>(key).map_err(|e| caught(&ctx, e)) };
            Ok(Outcome { kind: field("kind")?, name: field("name")?, text: field("text")? })
        });
        self.deadline.set(None);
        if self.interrupted.get() {
            self.interrupted.set(false);
            return Err(ExprError::Limit { what: time_limit() });
        }
        result
    }
}

/// The error an `Outcome` other than `ok`/`undefined` stands for.
fn outcome_error(outcome: Outcome) -> ExprError {
    let Outcome { kind, name, text } = outcome;
    match kind.as_str() {
        "unknown" => ExprError::UnknownName { name },
        "noservice" => ExprError::NoService { name },
        "notjson" => ExprError::NotJson { what: name },
        "syntax" => ExprError::Syntax { message: text },
        "limit" if name == "memory" => ExprError::Limit { what: memory_limit() },
        "limit" => ExprError::Limit { what: "stack depth limit".to_owned() },
        "thrown" => ExprError::Thrown { message: text },
        other => ExprError::Engine { message: format!("unexpected outcome `{other}`: {text}") },
    }
}

fn time_limit() -> String {
    format!("time limit of {} s", TIME_LIMIT.as_secs_f64())
}

fn memory_limit() -> String {
    format!("memory limit of {} MiB", MEMORY_LIMIT / (1024 * 1024))
}

/// [`PRELUDE_BYTECODE`] read back into the compiled script it holds; `None`
/// when the engine refuses it (an engine whose bytecode format changed since
/// the file was written), with the engine's exception left pending.
fn read_prelude_bytecode<'js>(ctx: &Ctx<'js>) -> Option<rquickjs::Value<'js>> {
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: `raw` is the live context `ctx` borrows. The bytes are trusted:
    // they are compiled from PRELUDE by this crate's engine (the unit test
    // checks it), and JS_ReadObject refuses bytecode of another format
    // version with an exception instead of reading it. The value it returns
    // is owned by `Value::from_raw`, which frees it.
    let script = unsafe {
        rquickjs::Value::from_raw(
            ctx.clone(),
            rquickjs::qjs::JS_ReadObject(raw, PRELUDE_BYTECODE.as_ptr(), PRELUDE_BYTECODE.len() as _, rquickjs::qjs::JS_READ_OBJ_BYTECODE as i32),
        )
    };
    (!script.is_exception()).then_some(script)
}

/// The prelude's set-up function, run from [`PRELUDE_BYTECODE`]; from the
/// script's source when the bytecode cannot be read, so a stale file costs
/// time, never behaviour.
fn load_prelude<'js>(ctx: &Ctx<'js>) -> Result<Function<'js>, ExprError> {
    let Some(script) = read_prelude_bytecode(ctx) else {
        // Clear the reader's exception, then parse the script instead.
        let _ = ctx.catch();
        return ctx.eval_with_options(PRELUDE, options(PRELUDE_NAME)).map_err(|e| caught(ctx, e));
    };
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: `raw` is the live context; JS_EvalFunction takes the reference
    // JS_DupValue gives it (`script` keeps and frees its own), and its result
    // is owned by `Value::from_raw`.
    let setup =
        unsafe { rquickjs::Value::from_raw(ctx.clone(), rquickjs::qjs::JS_EvalFunction(raw, rquickjs::qjs::JS_DupValue(raw, script.as_raw()))) };
    if setup.is_exception() {
        return Err(caught(ctx, rquickjs::Error::Exception));
    }
    setup.into_function().ok_or_else(|| ExprError::Engine { message: "the prelude did not give a function".to_owned() })
}

/// The `!!js` prelude (`src/prelude.js`) compiled to QuickJS bytecode by
/// this build's engine, as the committed `src/prelude.bytecode` holds it:
/// a script whose completion value is the set-up function, source text
/// left out, line numbers kept.
///
/// Errors: [`ExprError::Engine`] if the engine cannot be created or
/// refuses the script.
pub fn prelude_bytecode() -> Result<Vec<u8>, ExprError> {
    let runtime = Runtime::new().map_err(engine)?;
    let context = Context::full(&runtime).map_err(engine)?;
    context.with(|ctx| {
        let raw = ctx.as_raw().as_ptr();
        let source = std::ffi::CString::new(PRELUDE).map_err(|e| ExprError::Engine { message: e.to_string() })?;
        let name = std::ffi::CString::new(PRELUDE_NAME).map_err(|e| ExprError::Engine { message: e.to_string() })?;
        let flags = rquickjs::qjs::JS_EVAL_TYPE_GLOBAL | rquickjs::qjs::JS_EVAL_FLAG_COMPILE_ONLY;
        // SAFETY: `raw` is the live context; the source and name are
        // NUL-terminated and outlive the call; the compiled function is owned
        // by `Value::from_raw`, which frees it; the buffer JS_WriteObject
        // returns is `size` bytes, copied, then freed with the context's
        // allocator as QuickJS requires.
        unsafe {
            let compiled = rquickjs::qjs::JS_Eval(raw, source.as_ptr(), PRELUDE.len() as _, name.as_ptr(), flags as i32);
            let compiled = rquickjs::Value::from_raw(ctx.clone(), compiled);
            if compiled.is_exception() {
                return Err(caught(&ctx, rquickjs::Error::Exception));
            }
            let mut size = 0;
            let flags = rquickjs::qjs::JS_WRITE_OBJ_BYTECODE | rquickjs::qjs::JS_WRITE_OBJ_STRIP_SOURCE;
            let buffer = rquickjs::qjs::JS_WriteObject(raw, &mut size, compiled.as_raw(), flags as i32);
            if buffer.is_null() {
                return Err(caught(&ctx, rquickjs::Error::Exception));
            }
            let bytes = std::slice::from_raw_parts(buffer, size as usize).to_vec();
            rquickjs::qjs::js_free(raw, buffer.cast());
            Ok(bytes)
        }
    })
}

fn options(filename: &str) -> rquickjs::context::EvalOptions {
    let mut options = rquickjs::context::EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.filename = Some(filename.to_owned());
    options
}

fn engine(error: rquickjs::Error) -> ExprError {
    match error {
        rquickjs::Error::Allocation => ExprError::Limit { what: memory_limit() },
        // A NUL byte in the source: QuickJS takes C strings.
        rquickjs::Error::InvalidString(_) => ExprError::Syntax { message: "the source contains a NUL character".to_owned() },
        other => ExprError::Engine { message: other.to_string() },
    }
}

fn engine_json(error: serde_json::Error) -> ExprError {
    ExprError::Engine { message: error.to_string() }
}

/// An error from calling into the engine. An exception that escaped the
/// prelude's own `catch` (an interrupt, out of memory while handling an
/// error) is fetched from the context and described.
fn caught(ctx: &Ctx<'_>, error: rquickjs::Error) -> ExprError {
    if !matches!(error, rquickjs::Error::Exception) {
        return engine(error);
    }
    let value = ctx.catch();
    let text = match value.as_exception() {
        Some(exception) => exception.message().unwrap_or_default(),
        None if value.is_null() => "out of memory".to_owned(),
        None => value.as_string().and_then(|s| s.to_string().ok()).unwrap_or_else(|| format!("{:?}", value.type_of())),
    };
    if text.contains("interrupted") {
        ExprError::Limit { what: time_limit() }
    } else if text.contains("out of memory") {
        ExprError::Limit { what: memory_limit() }
    } else if text.contains("stack overflow") {
        ExprError::Limit { what: "stack depth limit".to_owned() }
    } else {
        ExprError::Engine { message: text }
    }
}

#[cfg(test)]
mod tests;
