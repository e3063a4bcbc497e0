//! `cordis web`: the store's sessions and their plans, live, in a browser.

use std::process::ExitCode;

use crate::cli::boot::boot_for_sessions;
use crate::cli::{Cli, CliError};

/// The options of `cordis web`, as given on the command line.
pub struct WebArgs<'a> {
    /// `--http ADDR`.
    pub http: &'a str,
    /// `--token TOKEN`.
    pub token: Option<&'a String>,
    /// Each `--allow-host NAME`.
    pub allow_hosts: &'a [String],
    /// Each `--allow-origin ORIGIN`.
    pub allow_origins: &'a [String],
    /// `--heartbeat SECS`.
    pub heartbeat: f64,
}

/// Serves until the process is stopped.
///
/// # Errors
/// Exit 2 when the address or the security options are refused, or the
/// store cannot be opened.
pub fn run(cli: &Cli, args: WebArgs<'_>) -> Result<ExitCode, CliError> {
    let WebArgs { http, token, allow_hosts, allow_origins, heartbeat } = args;
    let addr = cordis_web::parse_addr(http).map_err(|e| e.to_string())?;
    if !(0.1..=3600.0).contains(&heartbeat) {
        return Err(format!("--heartbeat {heartbeat}: give between 0.1 and 3600 seconds").into());
    }
    let options = cordis_web::WebOptions {
        addr,
        token: token.cloned(),
        allowed_hosts: allow_hosts.to_vec(),
        allowed_origins: allow_origins.to_vec(),
        heartbeat: std::time::Duration::from_secs_f64(heartbeat),
    };
    cordis_web::check(&options).map_err(|e| e.to_string())?;
    let host = boot_for_sessions(cli)?;
    let place = host.services.sessions.store().map_or_else(|| host.state_dir.display().to_string(), |s| s.location());
    cordis_web::run(&host.services, options, |addr| eprintln!("cordis web: serving the sessions of {place} at http://{addr}/"))
        .map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}
