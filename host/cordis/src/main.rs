//! The `cordis` command: the command line over the engine, the session
//! stores and the MCP server. Everything it does lives in those crates;
//! this one parses arguments, runs them and prints.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
