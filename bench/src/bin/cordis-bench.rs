//! The benchmark runner: measures the whole-process figures (boot, reload,
//! memory),
//! runs the reference oracle, reads the in-process figures criterion
//! measured, and prints one table of ratios against baselines measured in
//! the same run. `bench/run.sh` runs criterion and then this.
//!
//! ```text
//! cordis-bench [--runs N] [--rss-runs N] [--reloads N] [--criterion DIR] [--oracle DIR|none] [--oracle-calls N] [--oracle-runs N] [--out FILE] [--no-python]
//! cordis-bench --smoke      every figure once, tiny sizes, no criterion, no oracle: checks it all still runs
//! cordis-bench --tokens     only the token estimate against DeepSeek's tokenizer, o200k_base and cl100k_base, as a table
//!
//! `--no-python` leaves out the one peer of this runner that needs Python
//! (DeepSeek's tokenizer, installed by `bench/tokenizer/setup.sh`).
//! cordis-bench --summaries  only the summary requests per compaction of a long scripted turn, as a table
//! cordis-bench --profile tool_call|direct|replay|resume [SIZE] [SECONDS]
//!                           repeat one in-process workload (for `perf record` or callgrind)
//! cordis-bench --profile reload [RELOADS]
//!                           reload the todo library RELOADS times in a `cordis dev`
//!                           child (`perf record` follows it)
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use cordis_bench::criterion_results;
use cordis_bench::inproc::{self, AppendBed, Direct, Kept, RawAppend, Resume, ToolCallBed};
use cordis_bench::paths;
use cordis_bench::process::{interleaved, Program};
use cordis_bench::reload;
use cordis_bench::stats::{format_value, Shown, Summary, Unit};
use cordis_bench::tokens;
use cordis_bench::workload;
use serde_json::Value;

struct Options {
    smoke: bool,
    runs: usize,
    rss_runs: usize,
    reloads: usize,
    criterion: PathBuf,
    oracle: Option<PathBuf>,
    oracle_calls: usize,
    oracle_runs: usize,
    out: Option<PathBuf>,
    /// Markdown table rows measured by other runners (`bench/mcp.sh`,
    /// `bench/mcp_client.sh`, `bench/web.py`), in this table's six columns,
    /// read from the `--rows` files and added to the main table in order.
    rows: Vec<String>,
    /// Only the token estimate's figure, printed as a table of its own.
    tokens_only: bool,
    /// Only the harness store's following figure (`--follow`).
    follow_only: bool,
    /// Only the summary requests' figure, printed as a table of its own.
    summaries_only: bool,
    /// Count the token estimate's texts with DeepSeek's tokenizer (a
    /// Python virtualenv); off under `--no-python` (`bench/run.sh
    /// --rust-only`).
    deepseek: bool,
}

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        smoke: false,
        runs: 30,
        rss_runs: 5,
        reloads: 30,
        criterion: criterion_results::default_dir(&paths::target_dir()),
        oracle: Some(paths::repo_root().join("bench").join("reference")),
        oracle_calls: 10_000,
        oracle_runs: 5,
        out: Some(paths::target_dir().join("bench-scratch").join("figures.md")),
        rows: Vec::new(),
        tokens_only: false,
        follow_only: false,
        summaries_only: false,
        deepseek: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--smoke" => o.smoke = true,
            "--tokens" => o.tokens_only = true,
            "--follow" => o.follow_only = true,
            "--summaries" => o.summaries_only = true,
            "--no-python" => o.deepseek = false,
            "--runs" => o.runs = number(&value("--runs")?)?,
            "--rss-runs" => o.rss_runs = number(&value("--rss-runs")?)?,
            "--reloads" => o.reloads = number(&value("--reloads")?)?,
            "--criterion" => o.criterion = PathBuf::from(value("--criterion")?),
            "--oracle" => {
                let v = value("--oracle")?;
                o.oracle = if v == "none" { None } else { Some(PathBuf::from(v)) };
            }
            "--oracle-calls" => o.oracle_calls = number(&value("--oracle-calls")?)?,
            "--oracle-runs" => o.oracle_runs = number(&value("--oracle-runs")?)?,
            "--out" => o.out = Some(PathBuf::from(value("--out")?)),
            "--rows" => o.rows.push(external_rows(std::path::Path::new(&value("--rows")?))?),
            "-h" | "--help" => {
                println!("usage: cordis-bench [--smoke] [--runs N] [--rss-runs N] [--reloads N] [--criterion DIR] [--oracle DIR|none] [--oracle-calls N] [--oracle-runs N] [--out FILE] [--rows FILE]... [--no-python] | --tokens [--no-python] | --summaries");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    if o.smoke {
        o.runs = 1;
        o.rss_runs = 1;
        o.reloads = 2;
        o.oracle = None;
        o.out = None;
    }
    Ok(o)
}

/// The table rows in `file`: every line that starts with `| `, less a
/// header (`| figure |`) and its separator (`| --- |`).
///
/// # Errors
/// When the file cannot be read or a row has other than six columns.
fn external_rows(file: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("--rows {}: {e}", file.display()))?;
    let mut out = String::new();
    for (n, line) in text.lines().enumerate() {
        if !line.starts_with("| ") || line.starts_with("| figure |") || line.starts_with("| --- |") {
            continue;
        }
        let columns = line.trim_end().trim_end_matches('|').split(" | ").count();
        if columns != 6 {
            return Err(format!(
                "--rows {}:{}: {columns} columns, expected 6 (figure, ours, baseline, ratio, target, verdict)",
                file.display(),
                n + 1
            ));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    Ok(out)
}

fn number(s: &str) -> Result<usize, String> {
    s.parse().ok().filter(|n| *n > 0).ok_or_else(|| format!("expected a positive number, got {s}"))
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--profile") {
        if let Err(e) = profile_loop(&argv[2..]) {
            eprintln!("cordis-bench: {e}");
            std::process::exit(1);
        }
        return;
    }
    let options = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cordis-bench: {e}");
            std::process::exit(2);
        }
    };
    if options.tokens_only || options.summaries_only || options.follow_only {
        let mut f = Figures::default();
        let measured = if options.tokens_only {
            token_figure(&options, &mut f)
        } else if options.follow_only {
            harness_follow_figure(&options, &mut f)
        } else {
            summary_requests_figure(&options, &mut f)
        };
        if let Err(e) = measured {
            eprintln!("cordis-bench: {e}");
            std::process::exit(1);
        }
        let mut out = String::from("| figure | ours | baseline (same run) | ratio | target | verdict |\n| --- | --- | --- | --- | --- | --- |\n");
        let rows = if options.tokens_only {
            token_rows(&f)
        } else if options.follow_only {
            harness_follow_rows(&f)
        } else {
            summary_rows(&f)
        };
        for r in rows {
            out.push_str(&format!("| {} | {} | {} | {} | {} | {} |\n", r.figure, r.ours, r.baseline, r.ratio, r.target, r.verdict));
        }
        print!("{out}");
        return;
    }
    match run(&options) {
        Ok(report) => {
            println!("{report}");
            if let Some(out) = &options.out {
                match std::fs::write(out, &report) {
                    Ok(()) => eprintln!("cordis-bench: table written to {}", out.display()),
                    Err(e) => eprintln!("cordis-bench: cannot write {}: {e}", out.display()),
                }
            }
        }
        Err(e) => {
            eprintln!("cordis-bench: {e}");
            std::process::exit(1);
        }
    }
}

/// Every measured quantity, by name.
#[derive(Default)]
struct Figures {
    /// Seconds (per process, per call, per event, per replay).
    time: BTreeMap<String, Summary>,
    /// Bytes of peak RSS.
    rss: BTreeMap<String, Summary>,
    /// Notes on figures that could not be measured.
    missing: BTreeMap<String, String>,
    /// The token estimate against the tokenizers, by kind of text.
    tokens: Vec<tokens::Counted>,
    /// Seconds it took to build `o200k_base`.
    tokenizer_build: Option<f64>,
    /// What loading DeepSeek's vocabulary cost.
    deepseek: Option<tokens::DeepSeek>,
}

impl Figures {
    fn t(&self, key: &str) -> Option<Summary> {
        self.time.get(key).copied()
    }
}

fn progress(what: &str) {
    eprintln!("cordis-bench: {what}");
}

fn run(o: &Options) -> Result<String, String> {
    let load_before = load_average();
    let at_start = Start::now();
    let started = Instant::now();
    let mut f = Figures::default();
    whole_process(o, &mut f)?;
    private_copy_figure(o, &mut f)?;
    reload_figure(o, &mut f)?;
    memory(o, &mut f)?;
    if o.smoke {
        in_process_once(&mut f)?;
    } else {
        from_criterion(o, &mut f)?;
    }
    store_sizes(o, &mut f)?;
    harness_follow_figure(o, &mut f)?;
    compaction_figure(o, &mut f)?;
    token_figure(o, &mut f)?;
    summary_requests_figure(o, &mut f)?;
    oracle(o, &mut f);
    let load_after = load_average();
    Ok(render(o, &f, &at_start, &load_before, &load_after, started.elapsed().as_secs_f64()))
}

// ---------------------------------------------------------------- whole process

const ENTRIES: [usize; 3] = [1, 10, 50];

fn whole_process(o: &Options, f: &mut Figures) -> Result<(), String> {
    progress(&format!("boot: {} interleaved runs of each program", o.runs));
    let root = paths::repo_root();
    let cordis = paths::binary("cordis")?;
    let bare = paths::binary("bare-dlopen")?;
    let todo = paths::library("tool-todo")?;
    let named = paths::library("fixture-named")?;
    let dir = paths::scratch("boot", true)?;
    let default = Program::new(&cordis, &args(&["-c", &root.join("cordis.yml").display().to_string(), "check"]), &root);
    let bare_todo = Program::new(&bare, &args(&[&todo.display().to_string()]), &root);
    let bare_both = Program::new(&bare, &args(&[&todo.display().to_string(), &named.display().to_string()]), &root);
    // Refusal time against size: flow nesting past the limit, 40 KB to 4 MB.
    let mut refusals = Vec::new();
    for (label, n) in [("40k", 10_000usize), ("400k", 100_000), ("4m", 1_000_000)] {
        let file = dir.join(format!("deep-{label}.yml"));
        let text = format!("- name: x\n  config: {}1{}\n", "[a, ".repeat(n), "]".repeat(n));
        let text = if text.len() > 4_000_000 { format!("- name: x\n  config: {}1{}\n", "[a, ".repeat(790_000), "]".repeat(790_000)) } else { text };
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
        refusals.push(Program::new(&cordis, &args(&["-c", &file.display().to_string(), "check"]), &dir).expecting(2));
    }
    // The dialect: an include with patches, a package name, `!!js`.
    let dialect =
        Program::new(&cordis, &args(&["-c", &root.join("examples/compositions/with-patches.cordis.yml").display().to_string(), "check"]), &root);
    // The floor of any command: starting this binary and exiting.
    let floor = Program::new(&cordis, &args(&["--version"]), &root);
    // The default composition with no layout check remembered: what the
    // first start after a library or the host changed pays.
    let checked = default.clone().with_env("CORDIS_CACHE_DIR", "off");
    let mut programs = vec![default, bare_todo, bare_both, dialect, floor, checked];
    programs.extend(refusals);
    for n in ENTRIES {
        let file = dir.join(format!("cordis-{n}.yml"));
        std::fs::write(&file, workload::composition(n, &todo, &named)).map_err(|e| format!("{}: {e}", file.display()))?;
        programs.push(Program::new(&cordis, &args(&["-c", &file.display().to_string(), "check"]), &dir));
    }
    let refs: Vec<&Program> = programs.iter().collect();
    let times = interleaved(&refs, o.runs, || Ok(()))?;
    let names = [
        "boot/default",
        "boot/bare",
        "boot/bare_both",
        "boot/dialect",
        "boot/floor",
        "boot/checked",
        "refuse/40k",
        "refuse/400k",
        "refuse/4m",
        "boot/entries/1",
        "boot/entries/10",
        "boot/entries/50",
    ];
    for (name, t) in names.iter().zip(times) {
        if let Some(s) = Summary::of(&t) {
            f.time.insert((*name).to_string(), s);
        }
    }
    Ok(())
}

/// What the sealed private copy `cordis run` and `cordis dev` load every
/// library from costs at start-up: loading libtool_todo.so through a cache
/// of private copies (memfd, copy in the kernel, seals, ELF check, dlopen,
/// init) beside loading it in place (ELF check, dlopen, init), each time from
/// a fresh file so `dlopen` maps it anew; interleaved.
fn private_copy_figure(o: &Options, f: &mut Figures) -> Result<(), String> {
    let runs = if o.smoke { 1 } else { o.runs };
    progress(&format!("private copy: {runs} interleaved loads of each kind"));
    let todo = paths::library("tool-todo")?;
    let dir = paths::scratch("private-copy", true)?;
    let (mut sealed, mut in_place) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let a = dir.join(format!("libtool_todo_a{i}.so"));
        let b = dir.join(format!("libtool_todo_b{i}.so"));
        std::fs::copy(&todo, &a).map_err(|e| e.to_string())?;
        std::fs::copy(&todo, &b).map_err(|e| e.to_string())?;
        let start = Instant::now();
        cordis_engine::loader::LibraryCache::private_copies().load(&a).map_err(|e| e.to_string())?;
        sealed.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        cordis_engine::loader::library::load_library(&b).map_err(|e| e.to_string())?;
        in_place.push(start.elapsed().as_secs_f64());
    }
    f.time.insert("load/private_copy".into(), Summary::of(&sealed).ok_or("no loads")?);
    f.time.insert("load/in_place".into(), Summary::of(&in_place).ok_or("no loads")?);
    Ok(())
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_string()).collect()
}

/// The shortest pause between the steps of the reload figure; each pause is
/// up to twice this, and a reload is followed by two pauses and a baseline
/// load before the next.
fn reload_pause_ms(o: &Options) -> u64 {
    if o.smoke {
        100
    } else {
        300
    }
}

fn reload_figure(o: &Options, f: &mut Figures) -> Result<(), String> {
    let runs = o.reloads;
    progress(&format!("reload: {runs} reloads in one `cordis dev`, each followed by a baseline load"));
    let cordis = paths::binary("cordis")?;
    let todo = paths::library("tool-todo")?;
    let dir = paths::scratch("reload", true)?;
    let pause = std::time::Duration::from_millis(reload_pause_ms(o));
    let fresh = if o.smoke { 1 } else { 10 };
    let r = reload::measure(&cordis, &todo, &dir, runs as u64, fresh, pause)?;
    for (key, values) in [
        ("reload/ours", &r.answered),
        ("reload/notice", &r.notice),
        ("reload/first_call", &r.first_call),
        ("reload/baseline", &r.baseline),
        ("reload/copy", &r.copy),
        ("reload/restart", &r.restart),
        ("reload/first_of_process", &r.first_of_process),
    ] {
        f.time.insert(key.into(), Summary::of(values).ok_or("no reloads")?);
    }
    for (part, before, after) in
        [("", r.rss_before.total, r.rss_after.total), ("_anon", r.rss_before.anon, r.rss_after.anon), ("_file", r.rss_before.file, r.rss_after.file)]
    {
        f.rss.insert(format!("reload/before{part}"), Summary::single(before));
        f.rss.insert(format!("reload/after{part}"), Summary::single(after));
        f.rss.insert(format!("reload/per_reload{part}"), Summary::single((after - before) / runs as f64));
    }
    let slow = r.answered.iter().filter(|t| **t > 0.1).count();
    f.time.insert("reload/slow".into(), Summary::single(slow as f64));
    f.rss.insert("reload/library".into(), Summary::single(std::fs::metadata(&todo).map_or(f64::NAN, |m| m.len() as f64)));
    Ok(())
}

fn memory(o: &Options, f: &mut Figures) -> Result<(), String> {
    let events = if o.smoke { 1_000 } else { 10_000 };
    progress(&format!("memory: peak RSS, {} runs each, host with a {events}-event session", o.rss_runs));
    let root = paths::repo_root();
    let cordis = paths::binary("cordis")?;
    let bare = paths::binary("bare-dlopen")?;
    let todo = paths::library("tool-todo")?;
    let dir = paths::scratch("memory", true)?;
    let state = dir.join("state");
    let sessions = state.join("sessions");
    std::fs::create_dir_all(&sessions).map_err(|e| e.to_string())?;
    let pristine = dir.join("pristine.jsonl");
    let id = "bench-session";
    workload::write_session_log(&pristine, id, events).map_err(|e| e.to_string())?;
    let live = sessions.join(format!("{id}.jsonl"));
    let host = Program::new(
        &cordis,
        &args(&[
            "-c",
            &root.join("cordis.yml").display().to_string(),
            "--state-dir",
            &state.display().to_string(),
            "--durability",
            "none",
            "run",
            "--session",
            id,
            "--script",
            &root.join("examples/plan-and-ship.script.yml").display().to_string(),
        ]),
        &root,
    );
    let bare_todo = Program::new(&bare, &args(&[&todo.display().to_string()]), &root);
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..o.rss_runs {
        std::fs::copy(&pristine, &live).map_err(|e| format!("{}: {e}", live.display()))?;
        ours.push(host.peak_rss()?);
        base.push(bare_todo.peak_rss()?);
    }
    f.rss.insert("memory/host".into(), Summary::of(&ours).ok_or("no RSS runs")?);
    f.rss.insert("memory/bare".into(), Summary::of(&base).ok_or("no RSS runs")?);
    f.time.insert("memory/events".into(), Summary::single(events as f64));
    Ok(())
}

// ---------------------------------------------------------------- in process

/// List sizes of the tool-call figures; 13 000 todos is about 1 MiB of
/// arguments, the cap.
const ITEMS: [usize; 4] = [5, 50, 500, 13_000];
const EVENTS: [usize; 3] = [10_000, 100_000, 1_000_000];

fn from_criterion(o: &Options, f: &mut Figures) -> Result<(), String> {
    progress(&format!("reading criterion samples from {}", o.criterion.display()));
    let mut ids: Vec<String> = Vec::new();
    for n in ITEMS {
        for side in ["ours", "direct", "direct_execute"] {
            ids.push(format!("tool_call/{side}/{n}"));
        }
    }
    ids.push("durable_append/ours".into());
    ids.push("durable_append/raw".into());
    ids.push("service_call/ours".into());
    ids.push("service_call/tool_only".into());
    for n in EVENTS {
        ids.push(format!("replay/ours/{n}"));
        ids.push(format!("replay/serde_value/{n}"));
        ids.push(format!("resume/ours/{n}"));
    }
    for side in ["zstd", "plain", "raw"] {
        ids.push(format!("store_append/{side}"));
    }
    ids.push(format!("store_replay/ours/{STORE_EVENTS}"));
    ids.push(format!("store_replay/zstd_serde_value/{STORE_EVENTS}"));
    for side in ["ours", "plain"] {
        ids.push(format!("pg_append/{side}"));
        ids.push(format!("pg_append8/{side}"));
    }
    ids.push("pg_append8/statement".into());
    ids.push(format!("pg_replay/ours/{STORE_EVENTS}"));
    ids.push(format!("pg_replay/select/{STORE_EVENTS}"));
    for id in ids {
        match criterion_results::per_iteration(&o.criterion, &id)? {
            Some(s) => {
                f.time.insert(id, s);
            }
            None => {
                f.missing.insert(id, "not measured: run the criterion benches first (bench/run.sh does)".into());
            }
        }
    }
    Ok(())
}

/// Events of the harness-store replay figure.
const STORE_EVENTS: usize = 100_000;

/// Events of the compaction figure's session.
const COMPACTION_EVENTS: usize = 100_000;

/// Compaction's cost on a long session: the time to compact it by hand
/// (range, summary request, replacement, plan; the summarizer a stand-in
/// that answers at once) against the time to build the next request
/// without compaction, and the size of that request before and after.
fn compaction_figure(o: &Options, f: &mut Figures) -> Result<(), String> {
    progress("compaction of a long session");
    let n = if o.smoke { 3_001 } else { COMPACTION_EVENTS };
    let runs = if o.smoke { 2 } else { 7 };
    let dir = paths::scratch("compaction", true)?;
    let id = "compact-long";
    let path = inproc::Resume::path_in(&dir, id);
    std::fs::create_dir_all(path.parent().unwrap_or(&dir)).map_err(|e| e.to_string())?;
    workload::write_session_log(&path, id, n).map_err(|e| e.to_string())?;
    let todo = paths::library("tool-todo")?;
    let bed = inproc::CompactionBed::new(&dir, &todo, id)?;
    let (mut compact, mut request) = (Vec::new(), Vec::new());
    let (mut before, mut after) = (0, 0);
    let mut tokens = (0, 0);
    for _ in 0..runs {
        let session = bed.open()?;
        let (t, bytes) = timed(|| bed.request_bytes(&session));
        request.push(t);
        before = bytes?;
        let (t, r) = timed(|| bed.compact(&session));
        compact.push(t);
        tokens = r?;
        after = bed.request_bytes(&session)?;
        drop(session);
        bed.reset().map_err(|e| e.to_string())?;
    }
    let put = |f: &mut Figures, k: &str, v: Option<Summary>| {
        if let Some(v) = v {
            f.time.insert(format!("compaction/{k}"), v);
        }
    };
    put(f, "compact", Summary::of(&compact));
    put(f, "request", Summary::of(&request));
    put(f, "bytes/before", Some(Summary::single(before as f64)));
    put(f, "bytes/after", Some(Summary::single(after as f64)));
    put(f, "tokens/before", Some(Summary::single(tokens.0 as f64)));
    put(f, "tokens/after", Some(Summary::single(tokens.1 as f64)));
    put(f, "events", Some(Summary::single(n as f64)));
    Ok(())
}

/// The summary of the summary-requests figure's scripted model: a
/// checkpoint in the structure the compaction asks for.
const CHECKPOINT: &str = "## Goal\n- a long job\n## Open work\n- the steps after the last one done";

/// Steps of the summary-requests figure's turn.
const SUMMARY_STEPS: usize = 40;

/// Summary requests per compaction in one long scripted turn (`cordis run`,
/// a 2400-token window, threshold 0.5, `compactionRetries: 1`): with a
/// summarizer that answers well, and with one that always answers
/// something that is not a summary. Counted from the log: a
/// `compaction/start` per request, a `compaction/end` without `error` per
/// compaction that landed.
fn summary_requests_figure(o: &Options, f: &mut Figures) -> Result<(), String> {
    progress("summary requests per compaction in a long turn");
    let steps = if o.smoke { 12 } else { SUMMARY_STEPS };
    let cordis = paths::binary("cordis")?;
    let todo = paths::library("tool-todo")?;
    for (case, summary) in [("good", CHECKPOINT), ("failing", "Sure! Continuing with the next item.")] {
        let dir = paths::scratch(&format!("summaries-{case}"), true)?;
        let composition = format!(
            "{}- id: compaction\n  name: '@deepseek-ai/dsh-compaction-basic'\n  config:\n    thresholdRatio: 0.5\n    retainRatio: 0.1\n    maxTokens: 512\n    compactionRetries: 1\n",
            workload::todo_entry(&todo)
        );
        std::fs::write(dir.join("cordis.yml"), composition).map_err(|e| e.to_string())?;
        let mut script = String::from("model: long\ncontextWindow: 2400\nsummaries:\n");
        for _ in 0..steps * 2 {
            script.push_str(&format!("  - {}\n", serde_json::to_string(summary).map_err(|e| e.to_string())?));
        }
        script.push_str("steps:\n");
        for i in 0..steps {
            let todos = serde_json::json!({"todos": [
                {"content": format!("step {i}: {}", "work item text ".repeat(20)), "status": "completed"},
                {"content": format!("step {i} next"), "status": "in_progress"},
            ]});
            script.push_str(&format!(
                "  - text: {}\n    calls:\n      - name: todo_write\n        arguments: {}\n",
                serde_json::to_string(&format!("Working on step {i}.")).map_err(|e| e.to_string())?,
                serde_json::to_string(&todos.to_string()).map_err(|e| e.to_string())?
            ));
        }
        script.push_str("  - text: Done.\n");
        std::fs::write(dir.join("long.script.yml"), script).map_err(|e| e.to_string())?;
        let out = Command::new(&cordis)
            .args(["run", "--script", "long.script.yml", "do the long job"])
            .current_dir(&dir)
            .output()
            .map_err(|e| format!("cordis run: {e}"))?;
        if !out.status.success() {
            return Err(format!("cordis run ({case} summaries) failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let id = stdout
            .lines()
            .find_map(|l| l.strip_prefix("session "))
            .and_then(|l| l.split_whitespace().next())
            .ok_or_else(|| format!("cordis run printed no session line: {stdout}"))?;
        let log = std::fs::read_to_string(dir.join(".cordis").join("sessions").join(format!("{id}.jsonl"))).map_err(|e| e.to_string())?;
        let (mut requests, mut landed) = (0u32, 0u32);
        for line in log.lines() {
            let Ok(event) = serde_json::from_str::<Value>(line) else { continue };
            match event["type"].as_str() {
                Some("compaction/start") => requests += 1,
                Some("compaction/end") if event["data"].get("error").is_none() => landed += 1,
                _ => {}
            }
        }
        f.time.insert(format!("summaries/{case}/requests"), Summary::single(f64::from(requests)));
        f.time.insert(format!("summaries/{case}/landed"), Summary::single(f64::from(landed)));
        f.time.insert("summaries/steps".into(), Summary::single(steps as f64));
    }
    Ok(())
}

/// The compaction's token estimate against DeepSeek's tokenizer (unless
/// `--no-python`), `o200k_base` and `cl100k_base` on English, code and
/// Chinese text, and what each costs.
fn token_figure(o: &Options, f: &mut Figures) -> Result<(), String> {
    progress("the token estimate against o200k_base and cl100k_base");
    let tokenizers = tokens::Tokenizers::new()?;
    f.tokenizer_build = Some(tokenizers.o200k_build_seconds);
    let runs = if o.smoke { 1 } else { 20 };
    let mut texts = Vec::new();
    for (kind, source, text) in tokens::texts(&paths::repo_root(), o.smoke)? {
        f.tokens.push(tokenizers.count(kind, source, &text, runs));
        texts.push(text);
    }
    if o.deepseek {
        progress("the token estimate against DeepSeek's tokenizer (bench/tokenizer/setup.sh)");
        let mut deepseek = tokens::DeepSeek::count(&paths::repo_root(), &paths::target_dir(), &mut f.tokens, &texts)?;
        progress("the compaction's count with DeepSeek's tokenizer.json as its `tokenizer`");
        deepseek.count_with_vocabulary(&mut f.tokens, &texts)?;
        f.deepseek = Some(deepseek);
    }
    Ok(())
}

/// The rows of [`summary_requests_figure`].
fn summary_rows(f: &Figures) -> Vec<Row> {
    let t = |k: &str| f.t(k);
    let mut rows = Vec::new();
    let count = |k: &str| t(k).map(|s| s.median);
    let (good, landed, failing) = (count("summaries/good/requests"), count("summaries/good/landed"), count("summaries/failing/requests"));
    let steps = count("summaries/steps").map_or_else(|| "—".into(), |n| format!("{n:.0}"));
    let shown = |n: Option<f64>| n.map_or_else(|| "—".into(), |n| format!("{n:.0}"));
    rows.push(Row {
        figure: "summary requests per compaction".into(),
        ours: format!(
            "a {steps}-step scripted turn (2400-token window, threshold 0.5), a summarizer that answers well: {} requests, {} compactions",
            shown(good),
            shown(landed)
        ),
        baseline: "one request per compaction, the least there can be".into(),
        ratio: match (good, landed) {
            (Some(g), Some(l)) if l > 0.0 => format!("{:.2} requests per compaction", g / l),
            _ => "—".into(),
        },
        target: "≤ compactions + compactionRetries + 1 in the turn".into(),
        verdict: match (good, landed) {
            (Some(g), Some(l)) => {
                if g <= l + 2.0 {
                    "met".into()
                } else {
                    format!("missed: {g:.0} > {:.0}", l + 2.0)
                }
            }
            _ => "not measured".into(),
        },
    });
    rows.push(Row {
        figure: "summary requests, a summarizer that never summarizes".into(),
        ours: format!("the same turn, every answer not a checkpoint: {} requests", shown(failing)),
        baseline: "compactionRetries + 1 = 2".into(),
        ratio: failing.map_or_else(|| "—".into(), |n| format!("{:.2}×", n / 2.0)),
        target: "≤ 1×".into(),
        verdict: verdict(failing.map(|n| n / 2.0), 1.0, true),
    });
    rows
}

/// The rows of [`token_figure`]: per text, the estimate against DeepSeek's
/// tokenizer (the target: within 15%), with `o200k_base` and
/// `cl100k_base` beside it; then what a real tokenizer would cost.
fn token_rows(f: &Figures) -> Vec<Row> {
    let mut rows = Vec::new();
    let off = |estimate: u64, of: u64| (estimate as f64 / of.max(1) as f64 - 1.0) * 100.0;
    let measured = f.deepseek.is_some();
    for c in &f.tokens {
        let error = off(c.estimate, c.deepseek);
        rows.push(Row {
            figure: format!("token estimate, {}", c.kind),
            ours: format!(
                "{}: {} characters, estimated {} tokens in {}",
                c.source,
                c.chars,
                c.estimate,
                show(Summary::of(&c.estimate_seconds), Unit::Seconds)
            ),
            baseline: format!(
                "DeepSeek's tokenizer: {}; o200k_base: {} in {}; cl100k_base: {}",
                if measured {
                    format!(
                        "{} tokens (pure-Python encoder: {}) in {}",
                        c.deepseek,
                        c.deepseek_pure,
                        show(Some(Summary::single(c.deepseek_seconds)), Unit::Seconds)
                    )
                } else {
                    "not counted (--no-python)".into()
                },
                c.o200k,
                show(Summary::of(&c.o200k_seconds), Unit::Seconds),
                c.cl100k
            ),
            ratio: format!(
                "{} ({:+.1}% of o200k_base, {:+.1}% of cl100k_base); {} o200k_base's time",
                if measured { format!("{error:+.1}% of DeepSeek") } else { "—".into() },
                off(c.estimate, c.o200k),
                off(c.estimate, c.cl100k),
                x(ratio_of(Summary::of(&c.estimate_seconds), Summary::of(&c.o200k_seconds)))
            ),
            target: "within 15% of DeepSeek's tokenizer".into(),
            verdict: if !measured {
                "not measured".into()
            } else if error.abs() <= 15.0 {
                "met".into()
            } else {
                format!("missed: {error:+.1}%")
            },
        });
    }
    for c in f.tokens.iter().filter(|_| measured) {
        let error = off(c.vocabulary, c.deepseek_pure);
        rows.push(Row {
            figure: format!("token count with `tokenizer: deepseek`, {}", c.kind),
            ours: format!(
                "the compaction with DeepSeek's tokenizer.json as its `tokenizer`: {} tokens in {} (first count)",
                c.vocabulary,
                show(Some(Summary::single(c.vocabulary_seconds)), Unit::Seconds)
            ),
            baseline: format!(
                "DeepSeek's pure-Python encoder: {} tokens; `tokenizers` from Python: {} tokens in {}",
                c.deepseek_pure,
                c.deepseek,
                show(Some(Summary::single(c.deepseek_seconds)), Unit::Seconds)
            ),
            ratio: format!(
                "{error:+.2}% of the pure encoder ({:+.2}% of `tokenizers`); {} the estimate's time",
                off(c.vocabulary, c.deepseek),
                x(ratio_of(Some(Summary::single(c.vocabulary_seconds)), Summary::of(&c.estimate_seconds)))
            ),
            target: "within 15% of DeepSeek's tokenizer".into(),
            verdict: if error.abs() <= 15.0 { "met".into() } else { format!("missed: {error:+.1}%") },
        });
    }
    if let Some(d) = &f.deepseek {
        rows.push(Row {
            figure: "a real tokenizer's start-up".into(),
            ours: format!(
                "the estimate: nothing to load; the compaction's `tokenizer` (read on its own thread as the host boots): {}",
                show(Some(Summary::single(d.vocabulary_load_seconds)), Unit::Seconds)
            ),
            baseline: format!(
                "DeepSeek's tokenizer.json ({:.1} MB) loaded by `tokenizers` from Python: {}; building o200k_base (tiktoken-rs): {}",
                d.bytes as f64 / 1e6,
                show(Some(Summary::single(d.load_seconds)), Unit::Seconds),
                show(f.tokenizer_build.map(Summary::single), Unit::Seconds)
            ),
            ratio: "—".into(),
            target: "state".into(),
            verdict: "reported".into(),
        });
    }
    rows
}

/// The sizes of the harness store's following figure: the long session and
/// its baseline, ten times shorter.
const FOLLOW_EVENTS: [usize; 2] = [2_000, 20_000];

/// A session of the harness store followed while a turn is in progress
/// ([`inproc::HarnessFollow`]): the read after each appended event on a
/// 2 000- and a 20 000-event log, interleaved, and a whole read of the
/// long log, which each change cost before.
fn harness_follow_figure(o: &Options, f: &mut Figures) -> Result<(), String> {
    progress("harness store: following a turn in progress");
    let runs = if o.smoke { 3 } else { 200 };
    let dir = paths::scratch("harness-follow", true)?;
    let mut sides = Vec::new();
    for n in FOLLOW_EVENTS {
        sides.push((n, inproc::HarnessFollow::new(&dir.join(n.to_string()), n)?, Vec::new()));
    }
    let mut whole = Vec::new();
    for run in 0..runs {
        for (_, side, times) in &mut sides {
            times.push(side.step()?);
        }
        if run % 20 == 0 {
            whole.push(sides[1].1.whole()?);
        }
    }
    for (n, _, times) in &sides {
        f.time.insert(format!("follow/{n}"), Summary::of(times).ok_or("no samples")?);
    }
    f.time.insert("follow/whole".into(), Summary::of(&whole).ok_or("no samples")?);
    Ok(())
}

/// The rows of [`harness_follow_figure`].
fn harness_follow_rows(f: &Figures) -> Vec<Row> {
    let t = |k: &str| f.t(k);
    let (short, long) = (FOLLOW_EVENTS[0], FOLLOW_EVENTS[1]);
    let ratio = ratio_of(t(&format!("follow/{long}")), t(&format!("follow/{short}")));
    vec![
        Row {
            figure: "harness store, following a turn in progress (read per appended event)".into(),
            ours: format!("`read_since` after one event, {long} events: {}", show(t(&format!("follow/{long}")), Unit::Seconds)),
            baseline: format!("the same on {short} events: {}", show(t(&format!("follow/{short}")), Unit::Seconds)),
            ratio: x(ratio),
            target: "≤ 1.5× (independent of the log's length)".into(),
            verdict: match ratio {
                Some(r) if r <= 1.5 => "met".into(),
                Some(r) => format!("missed: {:.2}× over the limit", r / 1.5),
                None => "not measured".into(),
            },
        },
        Row {
            figure: "harness store, following a turn in progress, against a whole read".into(),
            ours: format!("`read_since` after one event, {long} events: {}", show(t(&format!("follow/{long}")), Unit::Seconds)),
            baseline: format!(
                "a whole read of the same log (each change's cost while a turn was open, before): {}",
                show(t("follow/whole"), Unit::Seconds)
            ),
            ratio: x(ratio_of(t(&format!("follow/{long}")), t("follow/whole"))),
            target: "state".into(),
            verdict: "reported".into(),
        },
    ]
}

/// Disk bytes per event of one log in the harness store, zstd and plain
/// (written one frame per turn, as `--durability turn` does), beside our
/// flat file.
fn store_sizes(o: &Options, f: &mut Figures) -> Result<(), String> {
    progress("harness store: bytes per event");
    let n = if o.smoke { 3_001 } else { STORE_EVENTS };
    let dir = paths::scratch("store-sizes", true)?;
    let flat = dir.join("flat.jsonl");
    workload::write_session_log(&flat, "sizes", n).map_err(|e| e.to_string())?;
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len() as f64 / n as f64).map_err(|e| e.to_string());
    let zstd = inproc::harness_copy(&flat, &dir.join("zstd"), cordis_session::Compression::Zstd)?;
    let plain = inproc::harness_copy(&flat, &dir.join("plain"), cordis_session::Compression::None)?;
    f.time.insert("store/bytes/zstd".into(), Summary::single(size(&zstd)?));
    f.time.insert("store/bytes/plain".into(), Summary::single(size(&plain)?));
    f.time.insert("store/bytes/flat".into(), Summary::single(size(&flat)?));
    f.time.insert("store/bytes/events".into(), Summary::single(n as f64));
    Ok(())
}

/// The smoke run: every in-process figure once, small.
fn in_process_once(f: &mut Figures) -> Result<(), String> {
    progress("in-process figures, once each (smoke)");
    let todo = paths::library("tool-todo")?;
    let dir = paths::scratch("smoke", true)?;
    let mut bed = ToolCallBed::new(&dir.join("tool-call").tap_mkdir()?, &todo)?;
    let direct = Direct::new();
    let kept = Kept::default();
    for n in ITEMS {
        let arguments = workload::todo_arguments(n);
        let (ours, _) = timed(|| bed.call(&arguments));
        let result = bed.call(&arguments);
        if result.is_error {
            return Err(format!("todo_write with {n} items failed: {}", result.text));
        }
        let plan: Value = serde_json::from_str(&bed.plan().unwrap_or_default()).map_err(|e| e.to_string())?;
        if plan.as_array().map(Vec::len) != Some(n) {
            return Err(format!("after a call with {n} items the plan is {plan}"));
        }
        let (d, r) = timed(|| direct.validate(&arguments));
        r?;
        let (de, r) = timed(|| direct.execute(&arguments, &kept));
        r?;
        f.time.insert(format!("tool_call/ours/{n}"), Summary::single(ours));
        f.time.insert(format!("tool_call/direct/{n}"), Summary::single(d));
        f.time.insert(format!("tool_call/direct_execute/{n}"), Summary::single(de));
    }

    let service = cordis_bench::inproc::ServiceCallBed::new(&dir.join("service-call").tap_mkdir()?)?;
    let (ours, r) = timed(|| service.through_service());
    if r.is_error {
        return Err(format!("the call through a service failed: {}", r.text));
    }
    let (base, r) = timed(|| service.tool_only());
    if r.is_error {
        return Err(format!("the baseline tool call failed: {}", r.text));
    }
    f.time.insert("service_call/ours".into(), Summary::single(ours));
    f.time.insert("service_call/tool_only".into(), Summary::single(base));

    let append_dir = dir.join("append").tap_mkdir()?;
    let bed = AppendBed::new(&append_dir, &todo)?;
    bed.append()?;
    let (ours, r) = timed(|| bed.append());
    r?;
    let mut raw = RawAppend::new(&append_dir.join("raw.jsonl"), &bed.line())?;
    let (base, r) = timed(|| raw.append());
    r.map_err(|e| e.to_string())?;
    f.time.insert("durable_append/ours".into(), Summary::single(ours));
    f.time.insert("durable_append/raw".into(), Summary::single(base));
    for (side, compression) in [("zstd", "zstd"), ("plain", "none")] {
        let bed = AppendBed::with_store(&append_dir.join(side).tap_mkdir()?, &todo, Some(compression))?;
        bed.append()?;
        let (t, r) = timed(|| bed.append());
        r?;
        f.time.insert(format!("store_append/{side}"), Summary::single(t));
    }
    f.time.insert("store_append/raw".into(), Summary::single(base));
    {
        let flat = append_dir.join("replay.jsonl");
        workload::write_session_log(&flat, "store-replay", 3_001).map_err(|e| e.to_string())?;
        let log = inproc::harness_copy(&flat, &append_dir.join("replay-root"), cordis_session::Compression::Zstd)?;
        let host = inproc::boot(&append_dir, &workload::todo_entry(&todo), true, cordis_session::Durability::None)?;
        let (ours, plan) = timed(|| inproc::replay_to_plan(&host, &log));
        plan?;
        let (base, lines) = timed(|| inproc::zstd_parse_as_values(&log));
        if lines? != 3_002 {
            return Err("the zstd log does not have 3002 lines".into());
        }
        f.time.insert(format!("store_replay/ours/{STORE_EVENTS}"), Summary::single(ours));
        f.time.insert(format!("store_replay/zstd_serde_value/{STORE_EVENTS}"), Summary::single(base));
    }
    {
        let pg = cordis_bench::pg::PgBench::start(&append_dir.join("postgres").tap_mkdir()?, &todo)?;
        let session = pg.session()?;
        pg.append(&session)?;
        let (ours, r) = timed(|| pg.append(&session));
        r?;
        let line = session.with_events(|e| e.last().map(|e| e.to_line()).unwrap_or_default());
        let mut plain = pg.plain(line.trim_end())?;
        let (base, r) = timed(|| plain.insert());
        r?;
        for side in ["pg_append", "pg_append8"] {
            f.time.insert(format!("{side}/ours"), Summary::single(ours));
            f.time.insert(format!("{side}/plain"), Summary::single(base));
        }
        let mut statement = pg.store_statement(line.trim_end())?;
        let (alone, r) = timed(|| statement.append());
        r?;
        f.time.insert("pg_append8/statement".into(), Summary::single(alone));
        let flat = append_dir.join("pg-replay.jsonl");
        workload::write_session_log(&flat, "pg-replay", 3_001).map_err(|e| e.to_string())?;
        pg.host.services.sessions.import(&flat, Some("pg-replay")).map_err(|e| e.to_string())?;
        let (ours, r) = timed(|| pg.host.services.sessions.view("pg-replay").map(|(s, _)| s.state("todos")));
        r.map_err(|e| e.to_string())?;
        let mut client = pg.client()?;
        let (base, lines) = timed(|| pg.select_lines(&mut client, "pg-replay"));
        if lines? != 3_001 {
            return Err("the database session does not have 3001 events".into());
        }
        f.time.insert(format!("pg_replay/ours/{STORE_EVENTS}"), Summary::single(ours));
        f.time.insert(format!("pg_replay/select/{STORE_EVENTS}"), Summary::single(base));
    }

    let replay_dir = dir.join("replay").tap_mkdir()?;
    let host = inproc::boot(&replay_dir, &workload::todo_entry(&todo), true, cordis_session::Durability::None)?;
    for n in [1_000, 3_001] {
        let id = format!("log-{n}");
        let path = Resume::path_in(&replay_dir, &id);
        std::fs::create_dir_all(path.parent().unwrap_or(&replay_dir)).map_err(|e| e.to_string())?;
        let facts = workload::write_session_log(&path, &id, n).map_err(|e| e.to_string())?;
        let (ours, plan) = timed(|| inproc::replay_to_plan(&host, &path));
        let plan: Value = serde_json::from_str(&plan?).map_err(|e| e.to_string())?;
        if plan != facts.plan {
            return Err(format!("replaying {n} events gave the plan {plan}, expected {}", facts.plan));
        }
        let (base, lines) = timed(|| inproc::parse_as_values(&path));
        if lines? != n + 1 {
            return Err(format!("the {n}-event log does not have {} lines", n + 1));
        }
        let resume = Resume::new(&replay_dir, &todo, &id)?;
        let (res, session) = timed(|| resume.run());
        let session = session?;
        if session.len() != n + 1 {
            return Err(format!("resumed {n} events, then appended one, but the session holds {}", session.len()));
        }
        drop(session);
        resume.reset().map_err(|e| e.to_string())?;
        f.time.insert(format!("replay/ours/{n}"), Summary::single(ours));
        f.time.insert(format!("replay/serde_value/{n}"), Summary::single(base));
        f.time.insert(format!("resume/ours/{n}"), Summary::single(res));
    }
    Ok(())
}

trait MkDir {
    fn tap_mkdir(self) -> Result<PathBuf, String>;
}

impl MkDir for PathBuf {
    fn tap_mkdir(self) -> Result<PathBuf, String> {
        std::fs::create_dir_all(&self).map_err(|e| format!("{}: {e}", self.display()))?;
        Ok(self)
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed().as_secs_f64(), out)
}

/// Repeats one in-process workload for `seconds`, for a profiler to watch.
fn profile_loop(a: &[String]) -> Result<(), String> {
    let what = a.first().map(String::as_str).unwrap_or("tool_call");
    let size: usize = a.get(1).map_or(Ok(5), |s| number(s))?;
    let seconds: f64 = a.get(2).map_or(Ok(10), |s| number(s))? as f64;
    let todo = paths::library("tool-todo")?;
    let dir = paths::scratch("profile", true)?;
    let start = Instant::now();
    let mut count = 0u64;
    match what {
        "reload" => {
            let runs = size;
            let mut bed = reload::DevBed::start(&paths::binary("cordis")?, &todo, &dir)?;
            let mut times = Vec::new();
            for _ in 0..runs {
                times.push(bed.reload()?.answered);
                std::thread::sleep(std::time::Duration::from_millis(200));
                count += 1;
            }
            eprintln!("cordis-bench: rename → answered: {}", Shown(Summary::of(&times).ok_or("no reloads")?, Unit::Seconds));
        }
        "tool_call" => {
            let mut bed = ToolCallBed::new(&dir, &todo)?;
            let arguments = workload::todo_arguments(size);
            while start.elapsed().as_secs_f64() < seconds {
                bed.rotate()?;
                for _ in 0..1000 {
                    std::hint::black_box(bed.call(&arguments));
                }
                count += 1000;
            }
        }
        "direct" => {
            let direct = Direct::new();
            let arguments = workload::todo_arguments(size);
            while start.elapsed().as_secs_f64() < seconds {
                for _ in 0..1000 {
                    std::hint::black_box(direct.validate(&arguments)?);
                }
                count += 1000;
            }
        }
        "replay" | "resume" => {
            let id = "profile-log";
            let path = Resume::path_in(&dir, id);
            std::fs::create_dir_all(path.parent().unwrap_or(&dir)).map_err(|e| e.to_string())?;
            workload::write_session_log(&path, id, size).map_err(|e| e.to_string())?;
            let host = inproc::boot(&dir, &workload::todo_entry(&todo), true, cordis_session::Durability::None)?;
            let resume = Resume::new(&dir, &todo, id)?;
            let start = Instant::now();
            while start.elapsed().as_secs_f64() < seconds {
                if what == "replay" {
                    std::hint::black_box(inproc::replay_to_plan(&host, &path)?);
                } else {
                    drop(resume.run()?);
                    resume.reset().map_err(|e| e.to_string())?;
                }
                count += 1;
            }
        }
        other => return Err(format!("unknown workload {other}: tool_call, direct, replay, resume or reload")),
    }
    eprintln!("cordis-bench: {count} runs of {what} ({size}) in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}

// ---------------------------------------------------------------- oracle

fn oracle(o: &Options, f: &mut Figures) {
    let Some(dir) = &o.oracle else {
        f.missing.insert("oracle".into(), "not run (smoke mode or --oracle none)".into());
        return;
    };
    let script = dir.join("run.sh");
    if !script.is_file() {
        f.missing.insert("oracle".into(), format!("not run: no {}", script.display()));
        return;
    }
    let config = dir.join("cordis-parallel.yml");
    let (mut boot, mut rate) = (Vec::new(), Vec::new());
    for i in 0..o.oracle_runs {
        progress(&format!("reference oracle: run {} of {} (--bench {})", i + 1, o.oracle_runs, o.oracle_calls));
        let out = Command::new(&script).arg("--config").arg(&config).arg("--bench").arg(o.oracle_calls.to_string()).current_dir(dir).output();
        let out = match out {
            Ok(out) if out.status.success() => out,
            Ok(out) => {
                f.missing.insert(
                    "oracle".into(),
                    format!("failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")),
                );
                return;
            }
            Err(e) => {
                f.missing.insert("oracle".into(), format!("cannot run {}: {e}", script.display()));
                return;
            }
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(line) = text.lines().rev().find_map(|l| serde_json::from_str::<Value>(l).ok()) else {
            f.missing.insert("oracle".into(), format!("no JSON line in its output: {text}"));
            return;
        };
        let num = |k: &str| line[k].as_f64();
        match (num("boot_ms"), num("import_ms"), num("calls_per_s")) {
            (Some(b), Some(i), Some(r)) => {
                boot.push((b + i) / 1e3);
                rate.push(r);
            }
            _ => {
                f.missing.insert("oracle".into(), format!("unexpected output: {line}"));
                return;
            }
        }
    }
    if let (Some(b), Some(r)) = (Summary::of(&boot), Summary::of(&rate)) {
        f.time.insert("oracle/boot".into(), b);
        // Stored as seconds per call, like every other time.
        f.time.insert("oracle/call".into(), r.inverse());
    }
}

// ---------------------------------------------------------------- report

struct Row {
    figure: String,
    ours: String,
    baseline: String,
    ratio: String,
    target: String,
    verdict: String,
}

fn show(s: Option<Summary>, unit: Unit) -> String {
    s.map_or_else(|| "—".into(), |s| Shown(s, unit).to_string())
}

fn rate(s: Option<Summary>) -> String {
    show(s.map(|s| s.inverse()), Unit::PerSecond)
}

/// `at most` targets: ratio ≤ limit; `at least`: ratio ≥ limit.
fn verdict(ratio: Option<f64>, limit: f64, at_most: bool) -> String {
    let Some(r) = ratio.filter(|r| r.is_finite()) else { return "not measured".into() };
    let met = if at_most { r <= limit } else { r >= limit };
    if met {
        "met".into()
    } else if at_most {
        format!("missed: {:.2}× over the limit", r / limit)
    } else {
        format!("missed: {:.0}% short", (1.0 - r / limit) * 100.0)
    }
}

fn ratio_of(a: Option<Summary>, b: Option<Summary>) -> Option<f64> {
    Some(a?.median / b?.median)
}

fn x(r: Option<f64>) -> String {
    r.map_or_else(|| "—".into(), |r| if r >= 10.0 { format!("{r:.0}×") } else { format!("{r:.2}×") })
}

fn render(o: &Options, f: &Figures, at_start: &Start, load_before: &str, load_after: &str, seconds: f64) -> String {
    let t = |k: &str| f.t(k);
    let mut rows = Vec::new();
    let million = if o.smoke { "3001" } else { "1000000" };

    // A whole-process row against the bare `dlopen` of libtool_todo.so:
    // `what` ran as `key`, judged by `judge` on the ratio.
    let against_bare = |figure: &str, what: &str, key: &str, target: &str, judge: &dyn Fn(Option<f64>) -> String| {
        let r = ratio_of(t(key), t("boot/bare"));
        Row {
            figure: figure.into(),
            ours: format!("{what}: {}", show(t(key), Unit::Seconds)),
            baseline: format!("bare `dlopen` of libtool_todo.so: {}", show(t("boot/bare"), Unit::Seconds)),
            ratio: format!("{} slower", x(r)),
            target: target.into(),
            verdict: judge(r),
        }
    };
    rows.push(against_bare("boot", "`cordis check`, default composition", "boot/default", "≤ 2×", &|r| verdict(r, 2.0, true)));
    rows.push(against_bare("boot, floor", "`cordis --version` (the binary starting and exiting, no composition)", "boot/floor", "≤ 1.3×", &|r| {
        format!("{}; boot above the floor: {}", verdict(r, 1.3, true), x(ratio_of(t("boot/default"), t("boot/floor"))))
    }));
    rows.push(against_bare(
        "boot, layout check run",
        "`cordis check`, default composition, `CORDIS_CACHE_DIR=off` (the layout check run, as at the first start after the library or the host changed)",
        "boot/checked",
        "report",
        &|_| format!("{} the boot row", x(ratio_of(t("boot/checked"), t("boot/default")))),
    ));
    rows.push(against_bare(
        "boot, dialect",
        "`cordis check` on `examples/compositions/with-patches.cordis.yml` (an include with patches, a package name, `!!js`)",
        "boot/dialect",
        "≤ 2.5×",
        &|r| verdict(r, 2.5, true),
    ));

    let r = ratio_of(t("refuse/4m"), t("refuse/40k"));
    rows.push(Row {
        figure: "composition refusal".into(),
        ours: format!(
            "`cordis check` refusing flow nesting past the limit, whole process: 40 KB {}, 400 KB {}, 4 MB {}",
            show(t("refuse/40k"), Unit::Seconds),
            show(t("refuse/400k"), Unit::Seconds),
            show(t("refuse/4m"), Unit::Seconds)
        ),
        baseline: "the same at 40 KB (100× smaller)".into(),
        ratio: format!("{} at 100× the size", x(r)),
        target: "linear, under 1 s".into(),
        verdict: match t("refuse/4m") {
            Some(s) if s.median < 1.0 => "met".into(),
            Some(_) => "missed".into(),
            None => "—".into(),
        },
    });

    let r = ratio_of(t("load/private_copy"), t("load/in_place"));
    rows.push(Row {
        figure: "private copy (run, dev)".into(),
        ours: format!(
            "loading libtool_todo.so from a sealed private copy, as `cordis run` and `cordis dev` do: {}",
            show(t("load/private_copy"), Unit::Seconds)
        ),
        baseline: format!("loading it in place, as `cordis check` does: {}", show(t("load/in_place"), Unit::Seconds)),
        ratio: format!("{} slower", x(r)),
        target: "report".into(),
        verdict: "reported".into(),
    });

    let r = ratio_of(t("oracle/boot"), t("boot/default"));
    rows.push(Row {
        figure: "boot vs reference".into(),
        ours: format!("same: {}", show(t("boot/default"), Unit::Seconds)),
        baseline: format!("oracle `boot_ms + import_ms`: {}", show(t("oracle/boot"), Unit::Seconds)),
        ratio: format!("{} faster", x(r)),
        target: "≥ 20× faster".into(),
        verdict: if r.is_some() { verdict(r, 20.0, false) } else { f.missing.get("oracle").cloned().unwrap_or_default() },
    });

    let r = ratio_of(t("service_call/ours"), t("service_call/tool_only"));
    rows.push(Row {
        figure: "call through a service".into(),
        ours: format!(
            "a tool whose work is a call to an injected service (consumer → host handle → provider, `fixture-counter`): {}",
            show(t("service_call/ours"), Unit::Seconds)
        ),
        baseline: format!("a tool call that crosses no service (`fixture-named` echo): {}", show(t("service_call/tool_only"), Unit::Seconds)),
        ratio: format!("{} slower", x(r)),
        target: "report".into(),
        verdict: "reported".into(),
    });

    let r = ratio_of(t("tool_call/ours/5"), t("tool_call/direct/5"));
    rows.push(Row {
        figure: "tool call (5 items)".into(),
        ours: format!("registry → ABI → plugin → in-memory session: {}", show(t("tool_call/ours/5"), Unit::Seconds)),
        baseline: format!("same validation called directly: {}", show(t("tool_call/direct/5"), Unit::Seconds)),
        ratio: format!("{} slower", x(r)),
        target: "≤ 1.1×".into(),
        verdict: verdict(r, 1.1, true),
    });

    let r = ratio_of(t("oracle/call"), t("tool_call/ours/5"));
    rows.push(Row {
        figure: "tool call vs reference".into(),
        ours: format!("same, calls/s: {}", rate(t("tool_call/ours/5"))),
        baseline: format!("oracle `calls_per_s`: {}", rate(t("oracle/call"))),
        ratio: format!("{} faster", x(r)),
        target: "≥ 200×".into(),
        verdict: if r.is_some() { verdict(r, 200.0, false) } else { f.missing.get("oracle").cloned().unwrap_or_default() },
    });

    let r = ratio_of(t("durable_append/raw"), t("durable_append/ours"));
    rows.push(Row {
        figure: "durable append".into(),
        ours: format!("`todo/write` events/s, fdatasync each: {}", rate(t("durable_append/ours"))),
        baseline: format!("raw write + fdatasync, same line size: {}", rate(t("durable_append/raw"))),
        ratio: format!("{} of raw", x(r)),
        target: "≥ 0.8×".into(),
        verdict: verdict(r, 0.8, false),
    });

    for (side, label) in [("zstd", "`.jsonl.zstd`, a checksummed frame per event"), ("plain", "`.jsonl`")] {
        let ours = t(&format!("store_append/{side}"));
        let r = ratio_of(t("store_append/raw"), ours);
        rows.push(Row {
            figure: format!("durable append, harness store ({side})"),
            ours: format!("{label}, fdatasync each, events/s: {}", rate(ours)),
            baseline: format!("raw write + fdatasync, interleaved: {}", rate(t("store_append/raw"))),
            ratio: format!("{} of raw", x(r)),
            target: "state".into(),
            verdict: format!("flat store: {} of raw", x(ratio_of(t("durable_append/raw"), t("durable_append/ours")))),
        });
    }
    let ours = t(&format!("store_replay/ours/{STORE_EVENTS}"));
    let base = t(&format!("store_replay/zstd_serde_value/{STORE_EVENTS}"));
    let per = STORE_EVENTS as f64;
    rows.push(Row {
        figure: format!("replay, harness store ({STORE_EVENTS} events, zstd)"),
        ours: format!("`.jsonl.zstd` log → current plan: {} ({})", show(ours, Unit::Seconds), rate(ours.map(|s| s.scaled(1.0 / per)))),
        baseline: format!("zstd decompression + serde_json lines → Value: {}", show(base, Unit::Seconds)),
        ratio: format!("{} of baseline speed", x(ratio_of(base, ours))),
        target: "≥ 0.8×".into(),
        verdict: verdict(ratio_of(base, ours), 0.8, false),
    });
    let r = ratio_of(t("pg_append/plain"), t("pg_append/ours"));
    rows.push(Row {
        figure: "append, PostgreSQL store (1 writer)".into(),
        ours: format!("`todo/write` events/s, a commit each: {}", rate(t("pg_append/ours"))),
        baseline: format!("`INSERT` of the same row, autocommit, same server: {}", rate(t("pg_append/plain"))),
        ratio: format!("{} of plain", x(r)),
        target: "≥ 0.8×".into(),
        verdict: verdict(r, 0.8, false),
    });
    let eight = |k: &str| t(k).map(|s| s.scaled(1.0 / 8.0));
    let r = ratio_of(t("pg_append8/plain"), t("pg_append8/ours"));
    rows.push(Row {
        figure: "append, PostgreSQL store (8 writers, 8 sessions)".into(),
        ours: format!("events/s in all: {}", rate(eight("pg_append8/ours"))),
        baseline: format!("8 connections inserting at once: {}", rate(eight("pg_append8/plain"))),
        ratio: format!("{} of plain", x(r)),
        target: "≥ 0.6×".into(),
        verdict: verdict(r, 0.6, false),
    });
    // The same gap split in two: the database's part (the store's statement
    // alone, sent by 8 connections) and the host's part (ours against it).
    let r = ratio_of(t("pg_append8/plain"), t("pg_append8/statement"));
    rows.push(Row {
        figure: "append, PostgreSQL store (8 writers): the store's statement alone".into(),
        ours: format!("`append_event` from 8 connections: {}", rate(eight("pg_append8/statement"))),
        baseline: format!("8 connections inserting at once: {}", rate(eight("pg_append8/plain"))),
        ratio: format!("{} of plain; ours is {} of this", x(r), x(ratio_of(t("pg_append8/statement"), t("pg_append8/ours")))),
        target: "report".into(),
        verdict: "the database's share of the row above".into(),
    });
    let ours = t(&format!("pg_replay/ours/{STORE_EVENTS}"));
    let base = t(&format!("pg_replay/select/{STORE_EVENTS}"));
    rows.push(Row {
        figure: format!("replay, PostgreSQL store ({STORE_EVENTS} events)"),
        ours: format!("session → current plan: {} ({})", show(ours, Unit::Seconds), rate(ours.map(|s| s.scaled(1.0 / per)))),
        baseline: format!("`SELECT line ... ORDER BY seq` of the same rows: {}", show(base, Unit::Seconds)),
        ratio: format!("{} of baseline speed", x(ratio_of(base, ours))),
        target: "≥ 0.6×".into(),
        verdict: verdict(ratio_of(base, ours), 0.6, false),
    });
    let value = |k: &str| t(k).map_or_else(|| "—".into(), |s| format!("{:.0}", s.median));
    rows.push(Row {
        figure: format!("compaction, a session of {} events", value("compaction/events")),
        ours: format!(
            "compact by hand: {}; next request {} B → {} B (~{} → ~{} tokens)",
            show(t("compaction/compact"), Unit::Seconds),
            value("compaction/bytes/before"),
            value("compaction/bytes/after"),
            value("compaction/tokens/before"),
            value("compaction/tokens/after")
        ),
        baseline: format!("building the next request without compaction: {}", show(t("compaction/request"), Unit::Seconds)),
        ratio: format!(
            "{} the time; request {} smaller",
            x(ratio_of(t("compaction/compact"), t("compaction/request"))),
            x(ratio_of(t("compaction/bytes/before"), t("compaction/bytes/after")))
        ),
        target: "state".into(),
        verdict: "reported".into(),
    });
    rows.extend(token_rows(f));
    rows.extend(summary_rows(f));
    rows.extend(harness_follow_rows(f));
    let bytes = |k: &str| t(&format!("store/bytes/{k}")).map_or_else(|| "—".into(), |s| format!("{:.0} B", s.median));
    rows.push(Row {
        figure: "disk per event, harness store".into(),
        ours: format!("zstd (a frame per event): {}; plain: {}", bytes("zstd"), bytes("plain")),
        baseline: format!("our flat `.jsonl`: {}", bytes("flat")),
        ratio: format!("{} smaller (zstd vs flat)", x(ratio_of(t("store/bytes/flat"), t("store/bytes/zstd")))),
        target: "state".into(),
        verdict: format!("over {} events", t("store/bytes/events").map_or(0.0, |s| s.median)),
    });

    let n: f64 = million.parse().unwrap_or(1.0);
    let ours = t(&format!("replay/ours/{million}"));
    let base = t(&format!("replay/serde_value/{million}"));
    let r = ratio_of(base, ours);
    rows.push(Row {
        figure: format!("replay ({million} events)"),
        ours: format!("log → current plan: {} ({})", show(ours, Unit::Seconds), rate(ours.map(|s| s.scaled(1.0 / n)))),
        baseline: format!("serde_json lines → Value: {} ({})", show(base, Unit::Seconds), rate(base.map(|s| s.scaled(1.0 / n)))),
        ratio: format!("{} of baseline speed", x(r)),
        target: "≥ 1.0×".into(),
        verdict: verdict(r, 1.0, false),
    });

    let res = t(&format!("resume/ours/{million}"));
    let r = ratio_of(base, res);
    let sizes: Vec<String> = if o.smoke { vec!["1000".into(), "3001".into()] } else { EVENTS.iter().map(|n| n.to_string()).collect() };
    let growth: Vec<String> = sizes
        .iter()
        .filter_map(|n| {
            let per = t(&format!("resume/ours/{n}"))?.median / n.parse::<f64>().ok()?;
            Some(format!("{n}: {}/event", format_value(per, Unit::Seconds)))
        })
        .collect();
    rows.push(Row {
        figure: format!("resume ({million} events)"),
        ours: format!("reopen until the first append is in: {} (time per event: {})", show(res, Unit::Seconds), growth.join(", ")),
        baseline: format!("as replay: {}", show(base, Unit::Seconds)),
        ratio: format!("{} of baseline speed", x(r)),
        target: "≥ 1.0×".into(),
        verdict: verdict(r, 1.0, false),
    });

    let r = ratio_of(t("reload/ours"), t("reload/baseline"));
    rows.push(Row {
        figure: "reload".into(),
        ours: format!(
            "`cordis dev`: new libtool_todo.so renamed into place → `status` answers with the reload counted: {}",
            show(t("reload/ours"), Unit::Seconds)
        ),
        baseline: format!("`dlopen` + root-module init of a fresh copy, in process: {}", show(t("reload/baseline"), Unit::Seconds)),
        ratio: format!("{} slower", x(r)),
        target: "≤ 1.5×".into(),
        verdict: verdict(r, 1.5, true),
    });

    let host = f.rss.get("memory/host").copied();
    let bare = f.rss.get("memory/bare").copied();
    let events = t("memory/events").map_or(0.0, |s| s.median);
    rows.push(Row {
        figure: "memory (peak RSS)".into(),
        ours: format!("`cordis run --session` on a {events:.0}-event session, default composition: {}", show(host, Unit::Bytes)),
        baseline: format!("bare `dlopen`: {}", show(bare, Unit::Bytes)),
        ratio: format!("{} of bare", x(ratio_of(host, bare))),
        target: "≤ 4×".into(),
        verdict: verdict(ratio_of(host, bare), 4.0, true),
    });

    let mut out = String::new();
    let mode = if o.smoke { " (SMOKE RUN: one sample each, tiny sizes; not figures)" } else { "" };
    out.push_str(&format!("## cordis benchmarks{mode}\n\n"));
    out.push_str(&machine(at_start, load_before, load_after, seconds));
    out.push_str("\n| figure | ours | baseline (same run) | ratio | target | verdict |\n| --- | --- | --- | --- | --- | --- |\n");
    for r in &rows {
        out.push_str(&format!("| {} | {} | {} | {} | {} | {} |\n", r.figure, r.ours, r.baseline, r.ratio, r.target, r.verdict));
    }
    for rows in &o.rows {
        out.push_str(rows);
    }

    out.push_str("\n### Growth\n\nBoot (`cordis check`, whole process): the todo plugin plus N−1 entries of the `fixture-named` library.\n\n");
    out.push_str("| entries | cordis check | bare dlopen of the same libraries | ratio | added per entry | target ≤ 50 µs |\n| --- | --- | --- | --- | --- | --- |\n");
    let one = t("boot/entries/1");
    for n in ENTRIES {
        let ours = t(&format!("boot/entries/{n}"));
        let bare = if n == 1 { t("boot/bare") } else { t("boot/bare_both") };
        let added = match (ours, one) {
            (Some(a), Some(b)) if n > 1 => Some((a.median - b.median) / (n - 1) as f64),
            _ => None,
        };
        let per = added.map_or_else(|| "—".to_string(), |s| format_value(s, Unit::Seconds));
        let met = added.map_or_else(|| "—".to_string(), |s| verdict(Some(s * 1e6), 50.0, true));
        out.push_str(&format!(
            "| {n} | {} | {} | {} | {per} | {met} |\n",
            show(ours, Unit::Seconds),
            show(bare, Unit::Seconds),
            x(ratio_of(ours, bare))
        ));
    }

    let rss = |k: &str| f.rss.get(k).map_or(f64::NAN, |s| s.median);
    out.push_str(&format!(
        "\nReload (`cordis dev`, {} reloads of a {} library in one process, landing {}–{} ms apart): rename → the host's `reloaded` notice {}; the first reload of a freshly started `cordis dev` (rename → answering) {}; the first `todo_write` served by the new version (the host compiles the tool's schema) {}; a reload under `--memory-budget 1`, where every reload is a restart in place (rename → answering) {}. {} of the {} reloads took over 100 ms. The host's steps, each timed alone on fresh files beside the baseline: sealed private copy of the library and its ELF check {}, `dlopen` + init {}. Resident memory (VmRSS) {} before the first reload, {} after the last: {} per reload ({} of it anonymous memory, {} mapped file pages; target ≤ 0.1 MiB per reload: {}).\n",
        t("reload/ours").map_or(0, |s| s.n),
        format_value(rss("reload/library"), Unit::Bytes),
        reload_pause_ms(o) * 2,
        reload_pause_ms(o) * 4,
        show(t("reload/notice"), Unit::Seconds),
        show(t("reload/first_of_process"), Unit::Seconds),
        show(t("reload/first_call"), Unit::Seconds),
        show(t("reload/restart"), Unit::Seconds),
        t("reload/slow").map_or(0.0, |s| s.median),
        t("reload/ours").map_or(0, |s| s.n),
        show(t("reload/copy"), Unit::Seconds),
        show(t("reload/baseline"), Unit::Seconds),
        format_value(rss("reload/before"), Unit::Bytes),
        format_value(rss("reload/after"), Unit::Bytes),
        format_value(rss("reload/per_reload"), Unit::Bytes),
        format_value(rss("reload/per_reload_anon"), Unit::Bytes),
        format_value(rss("reload/per_reload_file"), Unit::Bytes),
        verdict(Some(rss("reload/per_reload") / (1024.0 * 1024.0)), 0.1, true),
    ));

    out.push_str("\nTool call by list size (`direct + encode/reply` is the tool's whole `execute_call_encoded`, what it runs for a call given as text, without registry, ABI or session; through the host it runs `execute_call_parsed`, the same work on contents borrowed from the host's parse).\n\n");
    out.push_str("| items | ours | direct validation | ratio | direct + encode/reply | ratio to that | target ≤ 1.2× |\n| --- | --- | --- | --- | --- | --- | --- |\n");
    for n in ITEMS {
        let ours = t(&format!("tool_call/ours/{n}"));
        let d = t(&format!("tool_call/direct/{n}"));
        let de = t(&format!("tool_call/direct_execute/{n}"));
        out.push_str(&format!(
            "| {n} | {} | {} | {} | {} | {} | {} |\n",
            show(ours, Unit::Seconds),
            show(d, Unit::Seconds),
            x(ratio_of(ours, d)),
            show(de, Unit::Seconds),
            x(ratio_of(ours, de)),
            verdict(ratio_of(ours, d), 1.2, true)
        ));
    }

    out.push_str("\nReplay and resume by log length (ratio = baseline time ÷ our time, so higher is better).\n\n");
    out.push_str("| events | replay | serde_json → Value | ratio | per event | resume | ratio | per event |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for n in &sizes {
        let nn: f64 = n.parse().unwrap_or(1.0);
        let rp = t(&format!("replay/ours/{n}"));
        let b = t(&format!("replay/serde_value/{n}"));
        let rs = t(&format!("resume/ours/{n}"));
        let per = |s: Option<Summary>| s.map_or_else(|| "—".into(), |s| format_value(s.median / nn, Unit::Seconds));
        out.push_str(&format!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} |\n",
            show(rp, Unit::Seconds),
            show(b, Unit::Seconds),
            x(ratio_of(b, rp)),
            per(rp),
            show(rs, Unit::Seconds),
            x(ratio_of(b, rs)),
            per(rs)
        ));
    }
    if !f.missing.is_empty() {
        out.push_str("\nNot measured:\n\n");
        for (k, v) in &f.missing {
            out.push_str(&format!("- {k}: {v}\n"));
        }
    }
    out
}

/// When the run started and what it measured: the commit checked out then,
/// and whether the work tree had changes on top of it (the binaries were
/// built from the work tree just before).
struct Start {
    date: String,
    commit: String,
}

impl Start {
    /// Now; the commit is `$CORDIS_BENCH_COMMIT` when set (bench/run.sh
    /// sets it before it builds), else the one checked out now.
    fn now() -> Start {
        let date = command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
        let commit = std::env::var("CORDIS_BENCH_COMMIT").ok().filter(|c| !c.is_empty()).unwrap_or_else(work_tree);
        Start { date, commit }
    }
}

/// The commit checked out, and the files changed on top of it.
fn work_tree() -> String {
    let repo = paths::repo_root().display().to_string();
    let mut commit = command_line("git", &["-C", &repo, "rev-parse", "--short", "HEAD"]);
    // Not trimmed: every porcelain line starts with two status columns and
    // a space.
    let changed = Command::new("git").args(["-C", &repo, "status", "--porcelain", "--untracked-files=no"]).output();
    let changed: Vec<String> =
        changed.map(|o| String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.get(3..)).map(str::to_string).collect()).unwrap_or_default();
    if !changed.is_empty() {
        commit.push_str(&format!(" with uncommitted changes to {}", changed.join(", ")));
    }
    commit
}

fn machine(at_start: &Start, load_before: &str, load_after: &str, seconds: f64) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let Start { date, commit } = at_start;
    let rustc = command_line("rustc", &["--version"]);
    format!(
        "- date: {date}; commit {commit}; {rustc}\n- machine: {cores} cores ({cpu}), {mem_gib:.1} GiB memory; shared with other builds, so expect noise\n- load average (1/5/15 min) before: {load_before}; after: {load_after}; this runner's part took {seconds:.0} s\n- spread: median (interquartile range, number of samples); ratios are ratios of medians\n"
    )
}

fn command_line(cmd: &str, a: &[&str]) -> String {
    Command::new(cmd)
        .args(a)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_else(|_| "?".into())
}
