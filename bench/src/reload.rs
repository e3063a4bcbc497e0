//! The reload figure: a whole `cordis dev` process swapping in a new build
//! of `libtool_todo.so`, beside its baseline, `dlopen` and root-module
//! initialisation of a fresh copy of the same library in this process.
//!
//! | side | from | to |
//! | --- | --- | --- |
//! | ours ([`DevBed::reload`]) | the new build is renamed into the watched `plugins/` folder (it was written in a sibling folder on the same disk) | the host's `reloaded` notice has arrived on stderr and a `status` sent after it answers with the reload counted |
//! | baseline ([`load_fresh_copy`]) | a fresh copy of the same bytes is on disk (copying is not timed) | `lib_header_from_path` and `init_root_module::<PluginLibraryRef>` have returned, as the loader calls them |
//!
//! [`host_steps`] also times, on the same fresh files, the step the host
//! takes before that load: making its sealed private copy (in the kernel)
//! and checking it is a complete shared object.
//!
//! Each new build is the library with a few more trailing bytes, so its
//! content (and the host's private copy) is new every time, while the
//! code loaded is the same. A fresh path is used for every baseline load,
//! since `dlopen` returns the mapping it already has for a path it has seen.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use cordis_abi::abi_stable::library::lib_header_from_path;
use cordis_abi::PluginLibraryRef;
use serde_json::Value;

use crate::workload;

/// How long a reload may take before the figure gives up.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A running `cordis dev` on a composition that names a private copy of the
/// todo library, driven through its console (stdin/stdout).
pub struct DevBed {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    notices: Receiver<(Instant, String)>,
    /// The library file the composition names (`<dir>/plugins/libtool_todo.so`).
    plugin: PathBuf,
    /// Where new builds are written before they are renamed into place.
    staging: PathBuf,
    /// The bytes of the library as built.
    build: Vec<u8>,
    reloads: u64,
}

/// Resident memory of a process, bytes (`NaN` when unknown).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rss {
    /// `VmRSS`.
    pub total: f64,
    /// `RssAnon`: heap, stacks, written data pages.
    pub anon: f64,
    /// `RssFile`: mapped file pages (the library copies' code and
    /// read-only data), shared with the page cache.
    pub file: f64,
}

impl Default for Rss {
    fn default() -> Self {
        Rss { total: f64::NAN, anon: f64::NAN, file: f64::NAN }
    }
}

/// One reload, in seconds from the rename.
#[derive(Debug, Clone, Copy)]
pub struct ReloadTimes {
    /// Until the host's `reloaded …` line arrived on stderr.
    pub notice: f64,
    /// Until the `status` sent after the notice answered with the new reload
    /// count: the figure.
    pub answered: f64,
    /// The first `todo_write` call served by the new version (it compiles
    /// the tool's schema, which is done at first call): not part of the
    /// figure.
    pub first_call: f64,
}

impl DevBed {
    /// Starts `cordis dev` (the binary `cordis`) in `dir`, on a composition
    /// naming `./plugins/libtool_todo.so`, a copy of `library`; sessions are
    /// not synced (`--durability none`). Waits for the console to be ready
    /// and makes one `todo_write` call.
    ///
    /// # Errors
    /// A message when it does not start or the call fails.
    pub fn start(cordis: &Path, library: &Path, dir: &Path) -> Result<DevBed, String> {
        DevBed::start_with(cordis, library, dir, &[])
    }

    /// [`DevBed::start`] with more arguments after `dev` (e.g.
    /// `--memory-budget 1`, which makes every reload a restart in place).
    ///
    /// # Errors
    /// As [`DevBed::start`].
    pub fn start_with(cordis: &Path, library: &Path, dir: &Path, dev_args: &[&str]) -> Result<DevBed, String> {
        let plugins = dir.join("plugins");
        let staging = dir.join("staging");
        for d in [&plugins, &staging] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let build = std::fs::read(library).map_err(|e| format!("{}: {e}", library.display()))?;
        let plugin = plugins.join("libtool_todo.so");
        std::fs::write(&plugin, &build).map_err(|e| format!("{}: {e}", plugin.display()))?;
        let composition = dir.join("cordis.yml");
        std::fs::write(&composition, "- id: tool-todo\n  name: ./plugins/libtool_todo.so\n  config:\n    allowParallelInProgress: true\n")
            .map_err(|e| format!("{}: {e}", composition.display()))?;
        let mut child = Command::new(cordis)
            .arg("-c")
            .arg(&composition)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--durability")
            .arg("none")
            .arg("dev")
            .args(dev_args)
            .current_dir(dir)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {} dev: {e}", cordis.display()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
            return Err("cordis dev: no pipes".into());
        };
        // Each stderr line is stamped as it arrives, so the notice's time
        // does not depend on when this side looks.
        let (tx, notices) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        let mut bed = DevBed { child, stdin, stdout: BufReader::new(stdout), notices, plugin, staging, build, reloads: 0 };
        let ready = bed.read_answer()?;
        if ready["ready"] != true {
            return Err(format!("cordis dev did not say it is ready: {ready}"));
        }
        bed.call_todo_write()?;
        Ok(bed)
    }

    fn read_answer(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).map_err(|e| format!("reading cordis dev: {e}"))?;
        if n == 0 {
            let why: Vec<String> = self.notices.try_iter().map(|(_, l)| l).collect();
            return Err(format!("cordis dev exited; stderr: {}", why.join("\n")));
        }
        serde_json::from_str(&line).map_err(|e| format!("cordis dev answered {line:?}: {e}"))
    }

    /// Sends one console command and reads its answer.
    ///
    /// # Errors
    /// A message when the process is gone or the answer is not JSON.
    pub fn send(&mut self, command: &str) -> Result<Value, String> {
        writeln!(self.stdin, "{command}").and_then(|()| self.stdin.flush()).map_err(|e| format!("writing to cordis dev: {e}"))?;
        self.read_answer()
    }

    fn call_todo_write(&mut self) -> Result<(), String> {
        let answer = self.send(&format!("call todo_write {}", workload::todo_arguments(5)))?;
        if answer["isError"] != false {
            return Err(format!("todo_write through cordis dev failed: {answer}"));
        }
        Ok(())
    }

    /// The bytes of the `n`th new build: the library plus `n` trailing bytes.
    pub fn build_bytes(&self, n: u64) -> Vec<u8> {
        let mut bytes = self.build.clone();
        bytes.resize(self.build.len() + usize::try_from(n).unwrap_or(usize::MAX), 0);
        bytes
    }

    /// Lands a new build and times it until the new version answers.
    ///
    /// # Errors
    /// A message when the host refuses the build, says nothing within 30 s,
    /// or does not count the reload.
    pub fn reload(&mut self) -> Result<ReloadTimes, String> {
        let n = self.reloads + 1;
        let staged = self.staging.join("libtool_todo.so");
        std::fs::write(&staged, self.build_bytes(n)).map_err(|e| format!("{}: {e}", staged.display()))?;
        // Older notices (start-up, the previous reload) are not this one's.
        while self.notices.try_recv().is_ok() {}
        let start = Instant::now();
        std::fs::rename(&staged, &self.plugin).map_err(|e| format!("{}: {e}", self.plugin.display()))?;
        let notice = loop {
            let left = TIMEOUT.saturating_sub(start.elapsed());
            let (at, line) = self.notices.recv_timeout(left).map_err(|_| format!("no reload notice from cordis dev within {TIMEOUT:?}"))?;
            if line.starts_with("cordis dev: reloaded ") {
                break at.duration_since(start).as_secs_f64();
            }
            if line.contains("keeps serving") || line.contains("not reloaded") {
                return Err(format!("cordis dev refused the new build: {line}"));
            }
        };
        let status = self.send("status")?;
        let answered = start.elapsed().as_secs_f64();
        if status["reloads"].as_u64() != Some(n) {
            return Err(format!("after reload {n}, cordis dev's status is {status}"));
        }
        let call = Instant::now();
        self.call_todo_write()?;
        let first_call = call.elapsed().as_secs_f64();
        self.reloads = n;
        Ok(ReloadTimes { notice, answered, first_call })
    }

    /// The process's resident memory now, in bytes: `VmRSS` and its
    /// anonymous and file-backed parts (`RssAnon`, `RssFile`).
    pub fn rss(&self) -> Rss {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let field = |name: &str| -> f64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
                .map_or(f64::NAN, |kib| kib * 1024.0)
        };
        Rss { total: field("VmRSS:"), anon: field("RssAnon:"), file: field("RssFile:") }
    }
}

impl Drop for DevBed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The steps of a reload that the host takes on a new build, each timed
/// alone in this process on a fresh file, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    /// The sealed private copy of the new build and its ELF check, as the
    /// host's loader makes it (`LibraryCache::changed_copy`: memfd, copy in
    /// the kernel, seals, check), nothing loaded.
    pub copy: f64,
    /// `dlopen` + root-module init of a fresh copy on disk: the baseline.
    pub load: f64,
}

/// Writes `bytes` to `<dir>/src-<n>.so` and a copy `<dir>/copy-<n>.so` (not
/// timed), then times the host's private copy of the first and `dlopen`
/// with the root module's initialisation (abi_stable's version and layout
/// checks) of the second, as the loader calls them. The last is the reload
/// figure's baseline.
///
/// # Errors
/// A message when a file cannot be written or the library does not load.
pub fn host_steps(bytes: &[u8], dir: &Path, n: u64) -> Result<Steps, String> {
    let source = dir.join(format!("src-{n}.so"));
    let copy = dir.join(format!("copy-{n}.so"));
    std::fs::write(&source, bytes).map_err(|e| format!("{}: {e}", source.display()))?;
    std::fs::write(&copy, bytes).map_err(|e| format!("{}: {e}", copy.display()))?;
    let source = source.canonicalize().map_err(|e| format!("{}: {e}", source.display()))?;
    let cache = cordis_engine::loader::LibraryCache::private_copies().allow_writable(true);
    let start = Instant::now();
    let sealed = cache.changed_copy(&source).map_err(|e| e.to_string())?;
    let copied = start.elapsed().as_secs_f64();
    std::hint::black_box(sealed);
    let load = load_fresh_copy(&copy)?;
    Ok(Steps { copy: copied, load })
}

/// Times `dlopen` and the root module's initialisation of `copy`, a path
/// this process has not loaded; returns seconds.
///
/// # Errors
/// A message when the library does not load.
pub fn load_fresh_copy(copy: &Path) -> Result<f64, String> {
    let start = Instant::now();
    let header = lib_header_from_path(copy).map_err(|e| format!("{}: {e}", copy.display()))?;
    let module = header.init_root_module::<PluginLibraryRef>().map_err(|e| format!("{}: {e}", copy.display()))?;
    let plugins = (module.plugins())().len();
    let elapsed = start.elapsed().as_secs_f64();
    std::hint::black_box(plugins);
    Ok(elapsed)
}

/// The measurements of [`measure`].
#[derive(Debug, Clone, Default)]
pub struct ReloadRuns {
    /// Per reload: rename → new version answering (`status`).
    pub answered: Vec<f64>,
    /// Per fresh `cordis dev`: its first reload, rename → answering.
    pub first_of_process: Vec<f64>,
    /// Per reload: rename → the host's notice.
    pub notice: Vec<f64>,
    /// Per reload: the first call served by the new version.
    pub first_call: Vec<f64>,
    /// Per baseline run: `dlopen` + init of a fresh copy.
    pub baseline: Vec<f64>,
    /// Per baseline run: making the sealed private copy, as the host does.
    pub copy: Vec<f64>,
    /// Per reload of a `cordis dev` whose memory budget makes every reload
    /// a restart in place: rename → answering.
    pub restart: Vec<f64>,
    /// Resident memory of `cordis dev` before the first reload.
    pub rss_before: Rss,
    /// Resident memory of `cordis dev` after the last reload.
    pub rss_after: Rss,
}

/// `runs` reloads of one `cordis dev` started in `dir`, each followed by a
/// baseline load; between steps a pause of `pause` to twice `pause`
/// (longer than the host's 150 ms debounce, and varied, so that a new
/// build lands at no fixed moment of whatever the host does in the
/// background, as a developer's builds do). Then `fresh` more `cordis dev`
/// processes, one reload each: the first reload of a process; then `fresh`
/// reloads of a `cordis dev` that restarts in place for every reload.
///
/// # Errors
/// The first failure.
pub fn measure(cordis: &Path, library: &Path, dir: &Path, runs: u64, fresh: u64, pause: Duration) -> Result<ReloadRuns, String> {
    let mut jitter = Jitter(0x9e37_79b9_7f4a_7c15);
    let mut pause = move || std::thread::sleep(pause + pause.mul_f64(jitter.next()));
    let mut bed = DevBed::start(cordis, library, &dir.join("dev"))?;
    let copies = dir.join("baseline");
    std::fs::create_dir_all(&copies).map_err(|e| format!("{}: {e}", copies.display()))?;
    // One untimed baseline run, as the host has loaded the library once
    // before its first reload.
    host_steps(&bed.build_bytes(0), &copies, 0)?;
    pause();
    let mut out = ReloadRuns { rss_before: bed.rss(), ..ReloadRuns::default() };
    for i in 1..=runs {
        let t = bed.reload()?;
        out.answered.push(t.answered);
        out.notice.push(t.notice);
        out.first_call.push(t.first_call);
        pause();
        let steps = host_steps(&bed.build_bytes(i), &copies, i)?;
        out.baseline.push(steps.load);
        out.copy.push(steps.copy);
        pause();
    }
    out.rss_after = bed.rss();
    drop(bed);
    for i in 1..=fresh {
        let mut bed = DevBed::start(cordis, library, &dir.join(format!("fresh-{i}")))?;
        pause();
        out.first_of_process.push(bed.reload()?.answered);
    }
    // A budget of 1 MiB: every reload is a restart in place.
    let mut bed = DevBed::start_with(cordis, library, &dir.join("restart"), &["--memory-budget", "1"])?;
    for _ in 0..fresh {
        pause();
        out.restart.push(bed.reload()?.answered);
    }
    Ok(out)
}

/// A fraction in [0, 1) that changes on every call (splitmix64).
struct Jitter(u64);

impl Jitter {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}
