//! The cordis plugin host.
//!
//! A host reads a composition (`cordis.yml`), loads plugin libraries through
//! the stable ABI of `cordis-abi`, validates each entry's config before
//! `apply`, and runs agent sessions whose logs are event-sourced and durable.
//!
//! One module per concern:
//! - [`loader`]: composition, name resolution, library loading, unwrapping
//!   exports, config validation, applying entries;
//! - [`context`]: fibers, effects, services and `inject`;
//! - [`tools`]: the tool registry and execute pipeline;
//! - [`session`]: events, the append pipeline, persistence, replay,
//!   `deriveMessages()`;
//! - [`projection`]: folds of session events into small states;
//! - [`agent`]: the agent loop, the model trait and the scripted model;
//! - [`hmr`]: hot reload of the composition and plugin libraries (`cordis dev`);
//! - [`mcp`]: `cordis mcp`, the tools served over the Model Context Protocol;
//! - [`runtime`]: booting a host from a composition;
//! - [`cli`]: the `cordis` command.
//!
//! The host knows nothing about todos: everything todo lives in the
//! `tool-todo` plugin library.

pub mod agent;
pub mod cli;
pub mod context;
pub mod hmr;
pub mod json;
pub mod loader;
pub mod mcp;
pub mod projection;
pub mod runtime;
pub mod session;
pub mod tools;

pub use runtime::{BootError, Host, HostOptions};
