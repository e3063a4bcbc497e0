//! The `cordis` command.

fn main() -> std::process::ExitCode {
    cordis_host::cli::main()
}
