//! The command-line suite: the `cordis` binary as users meet it, injected
//! faults, and a real model provider over recorded streams.

mod cli;
mod faults;
mod llm_openai;
