//! Crash injection: a real `cordis dev` appends `todo_write` events to one
//! session and is killed with SIGKILL at random points, many times. After
//! each kill the session reopens with every acknowledged event present, a
//! torn last line (injected every few kills, as a write cut mid-line would
//! leave it) is reported and cut before the next append, and the next append
//! lands on a line of its own.

use std::collections::HashSet;
use std::io::Write;
use std::time::{Duration, Instant};

use cordis_session::store::read_file;
use cordis_tests::dev::Dev;
use cordis_tests::{Rng, Scratch};

struct Totals {
    kills: usize,
    acknowledged: usize,
    torn_cut: usize,
}

fn run_kills(kills: usize) -> Totals {
    let seed = std::env::var("CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_c0de_u64);
    let mut rng = Rng(seed);
    let scratch = Scratch::new();
    scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n");
    let mut session: Option<String> = None;
    let mut acknowledged: Vec<String> = Vec::new();
    let mut totals = Totals { kills: 0, acknowledged: 0, torn_cut: 0 };
    let mut injected_torn = false;
    for round in 0..kills {
        let args: Vec<&str> = session.as_deref().map_or_else(Vec::new, |id| vec!["--session", id]);
        let dev = Dev::spawn(Dev::command(scratch.path(), &[], &args)).unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
        let id = dev.session.clone();
        session.get_or_insert(id.clone());

        // Kill at a random point within the next ~60 ms of appends.
        let delay = Duration::from_micros(rng.next_u64() % 60_000);
        let (acked, warnings) = dev.calls_until_killed(delay, &format!("seed {seed} round {round}"));
        acknowledged.extend(acked);
        totals.kills += 1;
        if injected_torn {
            assert!(
                warnings.iter().any(|w| w.contains("torn last line") && w.contains("cut before the next append")),
                "seed {seed} round {round}: the injected torn line was not reported: {warnings:?}"
            );
            totals.torn_cut += 1;
            injected_torn = false;
        }

        // Reopen (read) the session: every acknowledged event is present.
        let path = scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl"));
        let log = read_file(&path).unwrap();
        let stray: Vec<_> = log.problems.iter().filter(|p| !p.message.contains("torn")).collect();
        assert!(stray.is_empty(), "seed {seed} round {round}: every append must be a line of its own: {stray:?}");
        let written: HashSet<String> = log
            .events
            .iter()
            .filter(|e| e.kind == "todo/write")
            .map(|e| e.data_value()["todos"][0]["content"].as_str().unwrap_or_default().to_string())
            .collect();
        for content in &acknowledged {
            assert!(written.contains(content), "seed {seed} round {round}: acknowledged {content:?} is missing");
        }
        totals.acknowledged = acknowledged.len();

        // Every few kills, leave a torn line the way a write cut short would.
        if round % 5 == 4 && round + 1 < kills {
            let raw = std::fs::read_to_string(&path).unwrap();
            let last = raw.lines().last().unwrap();
            let cut = 1 + (rng.next_u64() as usize) % (last.len() - 1);
            let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
            f.write_all(&last.as_bytes()[..cut]).unwrap();
            injected_torn = true;
        }
    }
    totals
}

#[test]
fn acknowledged_events_survive_two_hundred_kills() {
    let start = Instant::now();
    let totals = run_kills(200);
    eprintln!(
        "crash injection: {} kills survived, {} acknowledged events checked, {} torn tails cut, in {:?}",
        totals.kills,
        totals.acknowledged,
        totals.torn_cut,
        start.elapsed()
    );
    assert_eq!(totals.kills, 200);
    assert!(totals.acknowledged > 0);
}

/// The long version: `cargo test --test crash -- --ignored`.
#[test]
#[ignore]
fn soak_two_thousand_kills() {
    let totals = run_kills(2000);
    eprintln!("crash soak: {} kills, {} acknowledged events checked, {} torn tails cut", totals.kills, totals.acknowledged, totals.torn_cut);
}
