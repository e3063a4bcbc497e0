//! Benchmarks of cordis against baselines measured in the same run.
//!
//! Every figure is paired with a baseline that does the least work the figure
//! could possibly cost, measured by the same command on the same machine a
//! moment before or after: the ratio is what we report, not the absolute
//! time. `bench/run.sh` runs everything and prints one table.
//!
//! - [`paths`]: where the compiled libraries, binaries and scratch files are;
//! - [`workload`]: the inputs (tool arguments, session logs, compositions);
//! - [`inproc`]: the in-process figures and their baselines, shared by the
//!   criterion benches (`benches/figures.rs`) and the smoke run;
//! - [`stats`]: medians and spreads;
//! - [`criterion_results`]: reading what criterion measured;
//! - [`process`]: whole-process timing and peak RSS (`/usr/bin/time -v`);
//! - [`reload`]: hot reload in a running `cordis dev` and its baseline;
//! - [`pg`]: the PostgreSQL store against plain SQL on a server of its own;
//! - [`tokens`]: the compaction's token estimate against real tokenizers.
//!
//! Nothing here asserts on a time: the smoke run (`cordis-bench --smoke`,
//! run by `tests/smoke.rs`) only checks that every figure still runs.

pub mod criterion_results;
pub mod inproc;
pub mod paths;
pub mod pg;
pub mod process;
pub mod reload;
pub mod stats;
pub mod tokens;
pub mod workload;
