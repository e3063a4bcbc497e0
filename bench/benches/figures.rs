//! The in-process figures, each beside its baseline, with criterion.
//!
//! Run through `bench/run.sh` (which builds the plugin libraries in release
//! first and then prints the table), or alone:
//! `cargo bench -p cordis-bench --features criterion --bench figures`.
//! `CORDIS_BENCH_QUICK=1` takes fewer and shorter samples.
//!
//! Benchmark ids (read back by `cordis-bench report`):
//! - `tool_call/{ours,direct,direct_execute}/{5,50,500,13000}`
//! - `durable_append/{ours,raw}` (interleaved: each runs both, times one)
//! - `replay/{ours,serde_value}/{10000,100000,1000000}`
//! - `resume/ours/{10000,100000,1000000}`
//! - `service_call/{ours,tool_only}`
//! - `store_append/{zstd,plain,raw}` (interleaved: each runs all three, times one)
//! - `store_replay/{ours,zstd_serde_value}/100000`
//! - `pg_append/{ours,plain}` (interleaved), `pg_append8/{ours,plain,statement}` (per
//!   round of 8 concurrent appends), `pg_replay/{ours,select}/100000`

use std::hint::black_box;
use std::time::{Duration, Instant};

use cordis_bench::inproc::{self, AppendBed, Direct, Kept, RawAppend, Resume, ServiceCallBed, ToolCallBed};
use cordis_bench::pg::PgBench;
use cordis_bench::{paths, workload};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode};

fn quick() -> bool {
    std::env::var_os("CORDIS_BENCH_QUICK").is_some_and(|v| v != "0")
}

/// Scales a measurement time down in quick mode.
fn secs(full: u64) -> Duration {
    if quick() {
        Duration::from_millis(full * 200)
    } else {
        Duration::from_secs(full)
    }
}

fn samples(full: usize) -> usize {
    if quick() {
        10
    } else {
        full
    }
}

fn or_die<T>(r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// Tool-call sizes.
const ITEMS: [usize; 4] = [5, 50, 500, 13_000];

fn tool_call(c: &mut Criterion) {
    let todo = or_die(paths::library("tool-todo"));
    let dir = or_die(paths::scratch("tool-call", true));
    let mut bed = or_die(ToolCallBed::new(&dir, &todo));
    let direct = Direct::new();
    let kept = Kept::default();
    let mut group = c.benchmark_group("tool_call");
    group.sample_size(samples(100)).measurement_time(secs(4)).warm_up_time(secs(1));
    for n in ITEMS {
        // About 1 MiB of arguments at 13 000 todos (the cap is 1 MiB):
        // fewer, longer samples.
        if n >= 10_000 {
            group.sample_size(samples(10)).measurement_time(secs(8));
        }
        let args = workload::todo_arguments(n);
        let first = bed.call(&args);
        assert!(!first.is_error, "the benchmark call must succeed: {}", first.text);
        or_die(direct.validate(&args));
        group.bench_with_input(BenchmarkId::new("ours", n), &args, |b, args| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters as usize;
                while left > 0 {
                    or_die(bed.rotate());
                    let k = left.min(bed.room());
                    let start = Instant::now();
                    for _ in 0..k {
                        black_box(bed.call(black_box(args)));
                    }
                    total += start.elapsed();
                    left -= k;
                }
                total
            });
        });
        group.bench_with_input(BenchmarkId::new("direct", n), &args, |b, args| {
            b.iter(|| black_box(direct.validate(black_box(args))));
        });
        group.bench_with_input(BenchmarkId::new("direct_execute", n), &args, |b, args| {
            b.iter(|| black_box(direct.execute(black_box(args), &kept)));
        });
    }
    group.finish();
}

/// Benchmarks `sides` in one interleaved loop: every iteration runs each
/// side once, in an order that rotates with the iteration (so no side
/// always runs right after another), and each side's benchmark counts only
/// its own time. The disk's latency drifts with whatever else the machine
/// is doing; measured this way, every side sees the same drift.
fn interleaved(group: &mut BenchmarkGroup<'_, WallTime>, sides: &mut [(&str, &mut dyn FnMut())]) {
    let names: Vec<String> = sides.iter().map(|(name, _)| name.to_string()).collect();
    for (timed, name) in names.iter().enumerate() {
        group.bench_function(name.as_str(), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    for k in 0..sides.len() {
                        let which = (i as usize + k) % sides.len();
                        let start = Instant::now();
                        (sides[which].1)();
                        if which == timed {
                            total += start.elapsed();
                        }
                    }
                }
                total
            });
        });
    }
}

fn durable_append(c: &mut Criterion) {
    let todo = or_die(paths::library("tool-todo"));
    let dir = or_die(paths::scratch("append", true));
    let bed = or_die(AppendBed::new(&dir, &todo));
    or_die(bed.append());
    let line = bed.line();
    let mut raw = or_die(RawAppend::new(&dir.join("raw.jsonl"), &line));
    // One event through the session, one raw line, alternating which
    // goes first.
    let mut group = c.benchmark_group("durable_append");
    group.sample_size(samples(40)).measurement_time(secs(6)).warm_up_time(secs(1));
    interleaved(
        &mut group,
        &mut [
            ("ours", &mut || {
                or_die(bed.append());
            }),
            ("raw", &mut || raw.append().unwrap_or_else(|e| panic!("raw append: {e}"))),
        ],
    );
    group.finish();
}

/// Log lengths for replay and resume.
pub const EVENTS: [usize; 3] = [10_000, 100_000, 1_000_000];

fn replay_and_resume(c: &mut Criterion) {
    let todo = or_die(paths::library("tool-todo"));
    let dir = or_die(paths::scratch("replay", true));
    let replay_host = or_die(inproc::boot(&dir, &workload::todo_entry(&todo), true, cordis_session::Durability::None));
    let resume_dir = dir.join("resume");
    std::fs::create_dir_all(&resume_dir).unwrap_or_else(|e| panic!("{e}"));
    let mut logs = Vec::new();
    for n in EVENTS {
        let id = format!("log-{n}");
        let store = Resume::path_in(&resume_dir, &id);
        std::fs::create_dir_all(store.parent().unwrap_or(&resume_dir)).unwrap_or_else(|e| panic!("{e}"));
        let facts = workload::write_session_log(&store, &id, n).unwrap_or_else(|e| panic!("{e}"));
        let plan = or_die(inproc::replay_to_plan(&replay_host, &store));
        let expected: serde_json::Value = facts.plan.clone();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&plan).ok(), Some(expected), "replayed plan");
        logs.push((n, id, store));
    }
    let resume = {
        let mut by_n = Vec::new();
        for (n, id, _) in &logs {
            by_n.push((*n, or_die(Resume::new(&resume_dir, &todo, id))));
        }
        by_n
    };

    let mut group = c.benchmark_group("replay");
    group.sampling_mode(SamplingMode::Flat).warm_up_time(secs(1));
    for (n, _, path) in &logs {
        let (count, time) = sizes(*n);
        group.sample_size(count).measurement_time(time);
        group.bench_with_input(BenchmarkId::new("ours", n), path, |b, path| {
            b.iter(|| black_box(or_die(inproc::replay_to_plan(&replay_host, path))));
        });
        group.bench_with_input(BenchmarkId::new("serde_value", n), path, |b, path| {
            b.iter(|| black_box(or_die(inproc::parse_as_values(path))));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("resume");
    group.sampling_mode(SamplingMode::Flat).warm_up_time(secs(1));
    for (n, r) in &resume {
        let (count, time) = sizes(*n);
        group.sample_size(count).measurement_time(time);
        group.bench_with_input(BenchmarkId::new("ours", n), r, |b, r| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let session = or_die(r.run());
                    total += start.elapsed();
                    drop(session);
                    r.reset().unwrap_or_else(|e| panic!("reset: {e}"));
                }
                total
            });
        });
    }
    group.finish();
}

/// Samples and measurement time for a log of `n` events.
fn sizes(n: usize) -> (usize, Duration) {
    match n {
        n if n <= 10_000 => (samples(50), secs(4)),
        n if n <= 100_000 => (samples(20), secs(8)),
        _ => (10, if quick() { Duration::from_secs(8) } else { Duration::from_secs(25) }),
    }
}

/// The harness store: a durable append in each encoding beside the raw
/// `write` + `fdatasync`, and the replay of a 100 000-event `.jsonl.zstd`
/// log beside decompressing and parsing its lines.
fn harness_store(c: &mut Criterion) {
    let todo = or_die(paths::library("tool-todo"));
    let dir = or_die(paths::scratch("harness-store", true));
    let zstd = or_die(AppendBed::with_store(&dir.join("zstd"), &todo, Some("zstd")));
    let plain = or_die(AppendBed::with_store(&dir.join("plain"), &todo, Some("none")));
    or_die(zstd.append());
    or_die(plain.append());
    let mut raw = or_die(RawAppend::new(&dir.join("raw.jsonl"), &zstd.line()));
    let mut group = c.benchmark_group("store_append");
    group.sample_size(samples(30)).measurement_time(secs(6)).warm_up_time(secs(1));
    interleaved(
        &mut group,
        &mut [
            ("zstd", &mut || {
                or_die(zstd.append());
            }),
            ("plain", &mut || {
                or_die(plain.append());
            }),
            ("raw", &mut || raw.append().unwrap_or_else(|e| panic!("raw append: {e}"))),
        ],
    );
    group.finish();

    let n = 100_000;
    let flat = dir.join("flat.jsonl");
    let facts = workload::write_session_log(&flat, "store-replay", n).unwrap_or_else(|e| panic!("{e}"));
    let log = or_die(inproc::harness_copy(&flat, &dir.join("replay-root"), cordis_session::Compression::Zstd));
    let host = or_die(inproc::boot(&dir, &workload::todo_entry(&todo), true, cordis_session::Durability::None));
    let plan = or_die(inproc::replay_to_plan(&host, &log));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&plan).ok(), Some(facts.plan), "replayed plan");
    let mut group = c.benchmark_group("store_replay");
    group.sampling_mode(SamplingMode::Flat).warm_up_time(secs(1));
    let (count, time) = sizes(n);
    group.sample_size(count).measurement_time(time);
    group.bench_with_input(BenchmarkId::new("ours", n), &log, |b, log| {
        b.iter(|| black_box(or_die(inproc::replay_to_plan(&host, log))));
    });
    group.bench_with_input(BenchmarkId::new("zstd_serde_value", n), &log, |b, log| {
        b.iter(|| black_box(or_die(inproc::zstd_parse_as_values(log))));
    });
    group.finish();
}

/// The PostgreSQL store against plain SQL on the same server.
fn postgres_store(c: &mut Criterion) {
    let todo = or_die(paths::library("tool-todo"));
    let dir = or_die(paths::scratch("postgres", true));
    let bench = or_die(PgBench::start(&dir, &todo));
    let one = or_die(bench.session());
    or_die(bench.append(&one));
    let line = one.with_events(|e| e.last().map(|e| e.to_line()).unwrap_or_default());
    let mut plain = or_die(bench.plain(line.trim_end()));
    let mut group = c.benchmark_group("pg_append");
    group.sample_size(samples(30)).measurement_time(secs(6)).warm_up_time(secs(1));
    interleaved(
        &mut group,
        &mut [
            ("ours", &mut || {
                or_die(bench.append(&one));
            }),
            ("plain", &mut || or_die(plain.insert())),
        ],
    );
    group.finish();

    // Eight writers at once: one iteration is a round of 8 appends, one per
    // session, from 8 threads.
    let mut sessions: Vec<_> = (0..8).map(|_| or_die(bench.session())).collect();
    let mut plains: Vec<_> = (0..8).map(|_| or_die(bench.plain(line.trim_end()))).collect();
    let mut statements: Vec<_> = (0..8).map(|_| or_die(bench.store_statement(line.trim_end()))).collect();
    let mut group = c.benchmark_group("pg_append8");
    group.sample_size(samples(20)).measurement_time(secs(6)).warm_up_time(secs(1));
    group.bench_function("ours", |b| {
        b.iter_custom(|iters| {
            each_at_once(&mut sessions, iters, |session| {
                or_die(bench.append(session));
            })
        })
    });
    group.bench_function("plain", |b| b.iter_custom(|iters| each_at_once(&mut plains, iters, |p| or_die(p.insert()))));
    // The store's own statement from 8 connections: the database's part of
    // our appends, to tell it from the host's part.
    group.bench_function("statement", |b| b.iter_custom(|iters| each_at_once(&mut statements, iters, |p| or_die(p.append()))));
    group.finish();

    let n = 100_000;
    let flat = dir.join("replay.jsonl");
    let facts = workload::write_session_log(&flat, "pg-replay", n).unwrap_or_else(|e| panic!("{e}"));
    or_die(bench.host.services.sessions.import(&flat, Some("pg-replay")).map(drop).map_err(|e| e.to_string()));
    let replay = || -> Result<String, String> {
        let (session, _) = bench.host.services.sessions.view("pg-replay").map_err(|e| e.to_string())?;
        session.state("todos").ok_or_else(|| "no todos projection".to_string())
    };
    assert_eq!(serde_json::from_str::<serde_json::Value>(&or_die(replay())).ok(), Some(facts.plan), "replayed plan");
    let mut client = or_die(bench.client());
    assert_eq!(or_die(bench.select_lines(&mut client, "pg-replay")), n);
    let mut group = c.benchmark_group("pg_replay");
    group.sampling_mode(SamplingMode::Flat).warm_up_time(secs(1));
    let (count, time) = sizes(n);
    group.sample_size(count).measurement_time(time);
    group.bench_function(BenchmarkId::new("ours", n), |b| b.iter(|| black_box(or_die(replay()))));
    group.bench_function(BenchmarkId::new("select", n), |b| b.iter(|| black_box(or_die(bench.select_lines(&mut client, "pg-replay")))));
    group.finish();
}

/// Runs `op` `iters` times on each of `items`, each item on a thread of
/// its own, all at once; the wall time until the last one is done.
fn each_at_once<T: Send>(items: &mut [T], iters: u64, op: impl Fn(&mut T) + Sync) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for item in items.iter_mut() {
            let op = &op;
            s.spawn(move || (0..iters).for_each(|_| op(item)));
        }
    });
    start.elapsed()
}

/// A tool call whose tool calls an injected service, beside a tool call
/// that crosses no service (both through the registry, the ABI and a
/// plugin).
fn service_call(c: &mut Criterion) {
    let dir = or_die(paths::scratch("service-call", true));
    let bed = or_die(ServiceCallBed::new(&dir));
    assert!(!bed.through_service().is_error, "the benchmark call must succeed");
    assert!(!bed.tool_only().is_error, "the baseline call must succeed");
    let mut group = c.benchmark_group("service_call");
    group.sample_size(samples(100)).measurement_time(secs(3)).warm_up_time(secs(1));
    group.bench_function("ours", |b| b.iter(|| black_box(bed.through_service())));
    group.bench_function("tool_only", |b| b.iter(|| black_box(bed.tool_only())));
    group.finish();
}

criterion_group!(benches, tool_call, service_call, durable_append, replay_and_resume, harness_store, postgres_store);
criterion_main!(benches);
