//! One module per `cordis` command; each has a `run` that the dispatcher in
//! [`crate::cli`] calls with the parsed arguments.

pub mod acp;
pub mod check;
pub mod config;
pub mod dev;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod plugins;
pub mod run;
pub mod session;
pub mod tools;
pub mod web;
