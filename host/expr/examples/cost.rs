//! Measures what an evaluator costs: creating it (runtime, context,
//! prelude), its first evaluation, and later evaluations.
//!
//! `cargo run --release -p cordis-expr --example cost`

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring example: a failure ends it with the message

use std::time::{Duration, Instant};

use cordis_expr::{Environment, Evaluator};

const EXPRESSION: &str = "(process.env.DSH_PERMISSION_MODE ?? (process.env.DSH_SNAPSHOT === undefined \
                          ? 'workspace-write' : 'danger-full-access')) === 'danger-full-access' ? 'never' : 'ask'";

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let env = Environment::current();
    let services = serde_json::Map::new();
    let rounds = 200;
    let (mut new, mut first) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let start = Instant::now();
        let evaluator = Evaluator::new(&env).expect("evaluator");
        new += start.elapsed();
        let start = Instant::now();
        evaluator.eval(EXPRESSION, &services).expect("first evaluation");
        first += start.elapsed();
    }
    let evaluator = Evaluator::new(&env).expect("evaluator");
    let later_rounds = 10_000;
    let start = Instant::now();
    for _ in 0..later_rounds {
        evaluator.eval(EXPRESSION, &services).expect("evaluation");
    }
    let later = start.elapsed();
    println!("Evaluator::new:   {:8.1} µs (mean of {rounds})", micros(new) / rounds as f64);
    println!("first eval:       {:8.1} µs (mean of {rounds})", micros(first) / rounds as f64);
    println!("later eval:       {:8.1} µs (mean of {later_rounds})", micros(later) / later_rounds as f64);
}
