//! The code of the plugin guide (`docs/plugins.md`), one module per
//! example, compiled with the workspace. Each `rust` block of the guide is
//! an excerpt of these files (or of `plugins/todo/todo-read`), which the
//! integration suite checks line by line (`tests/engine/plugin_guide.rs`),
//! and the suite loads this library and calls its tools, so every example
//! in the guide both compiles and runs.
//!
//! The modules keep the guide's compact layout, so rustfmt leaves them
//! alone.

#[rustfmt::skip]
mod hello;
#[rustfmt::skip]
mod borrowing;
#[rustfmt::skip]
mod stamp;
#[rustfmt::skip]
mod service;

cordis_abi::export_library!();
