//! Whole-process figures: wall time from spawn to exit, and peak resident
//! memory as `/usr/bin/time -v` reports it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// A command to run many times.
#[derive(Debug, Clone)]
pub struct Program {
    /// The executable.
    pub exe: std::path::PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working folder.
    pub cwd: std::path::PathBuf,
    /// The exit code a run must end with (0 unless set).
    pub expect_code: i32,
    /// Environment variables set for it, on top of the runner's.
    pub env: Vec<(String, String)>,
}

impl Program {
    /// `exe args...`, run in `cwd`.
    pub fn new(exe: &Path, args: &[String], cwd: &Path) -> Program {
        Program { exe: exe.to_path_buf(), args: args.to_vec(), cwd: cwd.to_path_buf(), expect_code: 0, env: Vec::new() }
    }

    /// The same program, expected to exit with `code` (a refusal, say).
    pub fn expecting(mut self, code: i32) -> Program {
        self.expect_code = code;
        self
    }

    /// The same program with the environment variable `key` set to `value`.
    pub fn with_env(mut self, key: &str, value: &str) -> Program {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c.args(&self.args).current_dir(&self.cwd).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        c
    }

    /// Runs once; returns the wall time in seconds.
    ///
    /// # Errors
    /// A message with the program's stderr when it cannot start or exits
    /// non-zero.
    pub fn time(&self) -> Result<f64, String> {
        let start = Instant::now();
        let out = self.command().output().map_err(|e| format!("cannot run {}: {e}", self.exe.display()))?;
        let elapsed = start.elapsed().as_secs_f64();
        if out.status.code() != Some(self.expect_code) {
            return Err(format!("{} {} failed ({}): {}", self.exe.display(), self.args.join(" "), out.status, String::from_utf8_lossy(&out.stderr)));
        }
        Ok(elapsed)
    }

    /// Runs once under `/usr/bin/time -v`; returns the peak RSS in bytes.
    ///
    /// # Errors
    /// A message when `/usr/bin/time` is missing, the program fails, or the
    /// report has no "Maximum resident set size" line.
    pub fn peak_rss(&self) -> Result<f64, String> {
        let out = Command::new("/usr/bin/time")
            .arg("-v")
            .arg(&self.exe)
            .args(&self.args)
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run /usr/bin/time (Debian package `time`): {e}"))?;
        let report = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("{} failed under /usr/bin/time ({}): {report}", self.exe.display(), out.status));
        }
        max_rss_kib(&report).map(|kib| kib * 1024.0).ok_or_else(|| format!("no peak RSS in the report of /usr/bin/time -v: {report}"))
    }
}

/// The "Maximum resident set size (kbytes)" of a `/usr/bin/time -v` report.
pub fn max_rss_kib(report: &str) -> Option<f64> {
    report.lines().find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):")).and_then(|v| v.trim().parse().ok())
}

/// Runs the programs `runs` times each, interleaved (a, b, a, b, ...) so a
/// burst of load from other processes on the machine hits both sides
/// alike; returns each program's wall times in seconds. `before` runs
/// untimed before every run (to reset files).
///
/// # Errors
/// The first failure.
pub fn interleaved(programs: &[&Program], runs: usize, mut before: impl FnMut() -> Result<(), String>) -> Result<Vec<Vec<f64>>, String> {
    let mut times = vec![Vec::with_capacity(runs); programs.len()];
    // One untimed run of each warms the page cache.
    for p in programs {
        before()?;
        p.time()?;
    }
    for _ in 0..runs {
        for (i, p) in programs.iter().enumerate() {
            before()?;
            times[i].push(p.time()?);
        }
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_peak_rss_line() {
        let report = "\tCommand being timed: \"true\"\n\tMaximum resident set size (kbytes): 1536\n\tAverage stack size (kbytes): 0\n";
        assert_eq!(max_rss_kib(report), Some(1536.0));
        assert_eq!(max_rss_kib("nothing"), None);
    }
}
