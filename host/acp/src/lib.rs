//! `cordis acp`: the agent served to an editor over the Agent Client
//! Protocol (ACP v1: JSON-RPC 2.0, one message per line on stdio).
//!
//! - [`rpc`]: the framing, the error codes, the requests the agent sends
//!   (permission) and their answers.
//! - [`updates`]: the session log read as `session/update`s, the same for
//!   a running prompt and for `session/load`; the plan is sent whole after
//!   every `todo/write`.
//! - [`serve`]: one connection (`initialize`, `session/new`, `/load`,
//!   `/resume`, `/list`, `/close`, `/prompt`, `/cancel`).
//!
//! The caller keeps stdout for the protocol alone
//! ([`cordis_engine::stdio::isolate_stdout`]) before any plugin loads.

mod live;
mod mcp;
mod prompt;
pub mod rpc;
mod server;
pub mod updates;

pub use server::{serve, AcpError, AcpOptions, PROTOCOL_VERSION};
