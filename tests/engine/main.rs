//! The engine suite: the real loader and the real compiled plugin libraries
//! (ABI rules, rollback, services, hot reload under `cordis dev`), and the
//! todo tool driven through them.

mod abi_compat;
mod abi_evolution;
mod conformance;
mod dev;
mod hostile_input;
mod loader_path;
mod nudge;
mod plugin_guide;
mod plugin_template;
mod rollback;
mod services;
mod todo_read;
