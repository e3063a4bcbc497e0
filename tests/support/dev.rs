//! `cordis dev` driven through its console (stdin/stdout): start it,
//! send commands, read the JSON answers, wait for reloads and notices.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{cordis_exe, plugin_dir};

/// A running `cordis dev`, driven through its console; killed on drop.
/// Every suite that runs `cordis dev` starts it through this driver.
pub struct Dev {
    /// The process.
    pub child: Child,
    /// The console's input: one command per line.
    pub stdin: ChildStdin,
    /// The console's answers: one JSON value per line.
    pub stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<Vec<String>>>,
    /// The thread draining stderr into `stderr`; it ends at the process's
    /// exit.
    drain: Option<std::thread::JoinHandle<()>>,
    /// The id of the session the console's turns and calls go to.
    pub session: String,
}

impl Dev {
    /// Starts `cordis dev` in `dir` with `env` set and waits for its ready line.
    pub fn start(dir: &Path, env: &[(&str, &str)]) -> Dev {
        Dev::start_with(dir, env, &[])
    }

    /// [`Dev::start`] with more arguments after `dev`.
    pub fn start_with(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Dev {
        let mut cmd = Dev::command(dir, &[], args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        Dev::spawn(cmd).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The command that runs `cordis GLOBAL... dev ARGS...` in `dir`: the
    /// compiled plugins on the plugin path, the user patch layer looked
    /// for in `dir/.config` (so none applies), no `RUST_LOG`. Add
    /// environment variables to it, then [`Dev::spawn`] it.
    pub fn command(dir: &Path, global: &[&str], args: &[&str]) -> Command {
        let mut cmd = Command::new(cordis_exe());
        cmd.args(global)
            .arg("dev")
            .args(args)
            .current_dir(dir)
            .env("CORDIS_PLUGIN_PATH", plugin_dir())
            .env("XDG_CONFIG_HOME", dir.join(".config"))
            .env_remove("RUST_LOG");
        cmd
    }

    /// Spawns `cmd` (a `cordis dev` from [`Dev::command`], or one set up by
    /// hand) with its stdio piped and waits for the console's ready line.
    ///
    /// # Errors
    /// What the process printed when it exits or answers something else
    /// than the ready line.
    pub fn spawn(mut cmd: Command) -> Result<Dev, String> {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start cordis dev");
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let err = child.stderr.take().expect("piped stderr");
        let drain = std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
            }
        });
        let mut first = String::new();
        let _ = stdout.read_line(&mut first);
        let ready = serde_json::from_str::<Value>(&first).ok().filter(|r| r["ready"] == true);
        let Some(ready) = ready else {
            let _ = child.kill();
            let _ = child.wait();
            let _ = drain.join();
            let err = stderr.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("\n");
            return Err(format!("cordis dev is not ready: {first:?}; stderr:\n{err}"));
        };
        let session = ready["session"].as_str().expect("the ready line names the session").to_string();
        Ok(Dev { child, stdin, stdout, stderr, drain: Some(drain), session })
    }

    /// Waits for the process to exit (after a kill, or the end of its
    /// input) and returns every line it wrote to stderr.
    pub fn finish(mut self) -> Vec<String> {
        let _ = self.child.wait();
        if let Some(drain) = self.drain.take() {
            let _ = drain.join();
        }
        self.stderr()
    }

    /// Sends `todo_write` calls until the process is killed `delay` from
    /// now (see [`crate::calls_until_killed`]); returns the acknowledged
    /// contents and the stderr lines.
    pub fn calls_until_killed(mut self, delay: Duration, label: &str) -> (Vec<String>, Vec<String>) {
        let acknowledged = crate::calls_until_killed(&mut self.child, &mut self.stdin, &mut self.stdout, delay, label);
        (acknowledged, self.finish())
    }

    /// Sends one console command and reads its answer.
    pub fn send(&mut self, line: &str) -> Value {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap_or_else(|_| panic!("bad answer {answer:?} to {line:?}; stderr: {:?}", self.stderr()))
    }

    /// One `todo_write` call with a single pending todo `content` (see
    /// [`crate::todo_call`]): its result.
    pub fn todo(&mut self, content: &str) -> Value {
        self.send(&crate::todo_call(content))
    }

    /// Kills the process (SIGKILL) and returns what it wrote to stderr.
    pub fn kill(mut self) -> Vec<String> {
        let _ = self.child.kill();
        self.finish()
    }

    /// `call TOOL ARGS`: the tool's result as the console gives it.
    pub fn call(&mut self, tool: &str, args: &str) -> Value {
        self.send(&format!("call {tool} {args}"))
    }

    /// The text of the fixture tool `version` (which build is serving).
    pub fn version(&mut self) -> String {
        self.call("version", "{}")["text"].as_str().unwrap().to_string()
    }

    /// How many reloads `status` counts.
    pub fn reloads(&mut self) -> u64 {
        self.send("status")["reloads"].as_u64().unwrap()
    }

    /// The fiber id of running entry `id`.
    pub fn fiber(&mut self, id: &str) -> u64 {
        self.entry(id).unwrap()["fiber"].as_u64().unwrap()
    }

    /// Running entry `id` as `status` shows it, if it runs.
    pub fn entry(&mut self, id: &str) -> Option<Value> {
        let status = self.send("status");
        status["entries"].as_array().unwrap().iter().find(|e| e["id"] == id).cloned()
    }

    /// Every line the host wrote to stderr so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Polls `done` every 50 ms until it holds; fails after 30 s saying
    /// `what` did not happen, with the host's stderr.
    pub fn wait_until(&mut self, what: &str, mut done: impl FnMut(&mut Dev) -> bool) {
        let start = Instant::now();
        while !done(self) {
            assert!(start.elapsed() < Duration::from_secs(30), "{what} after 30 s; stderr: {:?}", self.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The ids of the running entries, from `status`.
    pub fn running(&mut self) -> Vec<String> {
        let status = self.send("status");
        status["entries"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()).collect()
    }

    /// Waits until `reloads` reaches `n`; then waits out a quiet period and
    /// checks no further reload happened.
    pub fn expect_reloads(&mut self, n: u64) {
        self.wait_until(&format!("no reload {n}"), |dev| dev.reloads() >= n);
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(self.reloads(), n, "exactly one reload per change; stderr: {:?}", self.stderr());
    }

    /// Waits until stderr has a line containing `text`.
    pub fn expect_notice(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(line) = self.stderr().into_iter().find(|l| l.contains(text)) {
                return line;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no notice {text:?}; stderr: {:?}", self.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The files under `dir` this process has open, as the kernel names
    /// them (`… (deleted)` once unlinked or replaced).
    pub fn open_files_under(&self, dir: &Path) -> Vec<String> {
        let dir = dir.canonicalize().unwrap();
        let Ok(fds) = std::fs::read_dir(format!("/proc/{}/fd", self.child.id())) else { return Vec::new() };
        fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| target.starts_with(&dir))
            .map(|target| target.display().to_string())
            .collect()
    }

    /// The process's resident set, in KiB (0 when it cannot be read).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|n| n.parse().ok()).unwrap_or(0)
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
