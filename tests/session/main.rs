//! The session suite: agent turns and their logs, crashes, the harness's
//! store both ways, PostgreSQL, and the harness's own session files.

mod agent_turn;
mod compaction;
mod crash;
mod harness_store;
mod postgres;
mod read_inputs;
mod store_contract;
mod upstream;
