//! The cordis engine: plugins loaded, applied and run.
//!
//! It takes a [`cordis_composition::Composition`], loads each entry's
//! library through the stable ABI of `cordis-abi`, checks its config, runs
//! its `apply` in a fiber, and serves the sessions of `cordis-session` to
//! the tools and the agent loop.
//!
//! - [`capabilities`]: the host capabilities plugins look up by name and
//!   version, and the check of what a plugin requires;
//! - [`context`]: fibers, effects, services and `inject` (the host side of
//!   the ABI's `HostContext`);
//! - [`tools`]: the tool registry and the pipeline of one call;
//! - [`loader`]: name resolution, library loading, unwrapping exports,
//!   config checks, applying entries, the session store an entry chooses;
//! - [`runtime`]: booting a [`Host`] from a composition;
//! - [`agent`]: the agent loop, the model seam and the scripted model;
//! - [`reload`]: hot reload of the composition and plugin libraries
//!   (`cordis dev`).
//!
//! Dependency order, leaves first: `capabilities` ← `context` ← `tools` ←
//! `agent`;
//! `context` ← `loader` ← `runtime` ← `reload`.
//!
//! The engine knows nothing about todos: everything todo lives in the
//! `tool-todo` plugin library.

pub mod agent;
pub mod capabilities;
pub mod context;
pub mod dynamic_tools;
pub mod loader;
pub mod reload;
pub mod runtime;
pub mod stdio;
pub mod tools;

pub use runtime::{BootError, Host, HostOptions};
