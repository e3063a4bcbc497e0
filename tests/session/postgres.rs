//! Sessions on PostgreSQL, against a real server each test starts itself
//! (`PgServer`: initdb into a temporary folder, pg_ctl on a loopback port).
//! "Hosts" are `cordis` processes with their own working and state
//! directories sharing one database.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cordis_tests::dev::Dev;
use cordis_tests::{cordis_exe, plugin_dir, repo_root, text, todo_call, PgServer, Rng, Scratch};
use serde_json::Value;

const URL_VAR: &str = "CORDIS_TEST_PG_URL";

/// A stand-in for one machine: its own folder (working directory and state
/// directory) and a composition that keeps sessions in the shared database.
struct HostDir {
    scratch: Scratch,
    url: String,
}

impl HostDir {
    fn new(server: &PgServer) -> HostDir {
        let scratch = Scratch::new();
        scratch.composition(&format!(
            "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n\
             - id: sessions\n  name: session-postgres\n  config:\n    urlEnv: {URL_VAR}\n    schema: agents\n"
        ));
        HostDir { scratch, url: server.url() }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(cordis_exe());
        cmd.args(args)
            .current_dir(self.scratch.path())
            .env("CORDIS_PLUGIN_PATH", plugin_dir())
            .env("XDG_CONFIG_HOME", self.scratch.path().join(".config"))
            .env(URL_VAR, &self.url)
            .env_remove("RUST_LOG");
        cmd
    }

    fn cordis(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run cordis")
    }

    /// One scripted turn; returns the session id.
    fn run(&self, session: Option<&str>, prompt: &str) -> String {
        let script = repo_root().join("examples/plan-and-ship.script.yml").display().to_string();
        let mut args = vec!["run", "--script", &script];
        if let Some(id) = session {
            args.extend(["--session", id]);
        }
        args.push(prompt);
        let out = self.cordis(&args);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "cordis run failed: {stdout}{stderr}");
        let line = stdout.lines().find(|l| l.starts_with("session ")).unwrap_or_else(|| panic!("no session line: {stdout}"));
        line.split_whitespace().nth(1).unwrap().to_string()
    }

    fn export(&self, id: &str) -> String {
        let out = self.cordis(&["session", "export", id]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "export {id}: {stderr}");
        stdout
    }

    /// Starts `cordis dev` (on `session`) and waits until it is ready.
    fn dev(&self, session: Option<&str>) -> Dev {
        let args: Vec<&str> = session.map_or_else(Vec::new, |id| vec!["--session", id]);
        let mut cmd = Dev::command(self.scratch.path(), &[], &args);
        cmd.env(URL_VAR, &self.url);
        Dev::spawn(cmd).unwrap_or_else(|e| panic!("{e}"))
    }
}

fn written_todos(export: &str) -> HashSet<String> {
    export
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "todo/write")
        .filter_map(|e| e["data"]["todos"][0]["content"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn sessions_live_in_the_database_and_move_both_ways() {
    let server = PgServer::start();
    let host = HostDir::new(&server);
    let id = host.run(None, "plan the release");
    host.run(Some(&id), "again");
    let out = host.cordis(&["session", "ls"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success() && stdout.contains(&id), "{stdout}{stderr}");
    assert!(stdout.contains("todos:"), "the list shows the plan summary: {stdout}");
    let shown = host.cordis(&["session", "show", &id]);
    assert!(text(&shown).0.contains("todos:"), "{}", text(&shown).0);
    assert!(!host.scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl")).exists(), "nothing in the flat store");

    // The database holds one row per event, seq contiguous, enforced by it.
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    let rows = client.query("SELECT seq FROM agents.events WHERE session_id = $1 ORDER BY seq", &[&id]).unwrap();
    let seqs: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(seqs, (0..seqs.len() as i64).collect::<Vec<_>>());
    let next = seqs.len() as i64;
    let gap = client.execute("INSERT INTO agents.events (session_id, seq, time, type, line) VALUES ($1, $2, 0, 'x/y', '{}')", &[&id, &(next + 1)]);
    let refused = gap.unwrap_err().as_db_error().map(|d| d.message().to_string()).unwrap_or_default();
    assert!(refused.contains("does not follow"), "a gap is refused by the database: {refused}");
    let twice = client.execute("INSERT INTO agents.events (session_id, seq, time, type, line) VALUES ($1, 0, 0, 'x/y', '{}')", &[&id]);
    assert!(twice.is_err(), "a seq written twice is refused by the database");
    let migrations: i64 = client.query_one("SELECT count(*) FROM agents.schema_migrations", &[]).unwrap().get(0);
    assert_eq!(migrations, 3);

    // A file session (ours) goes in and comes back out byte for byte.
    let flat = Scratch::new();
    flat.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n");
    let script = repo_root().join("examples/plan-and-ship.script.yml").display().to_string();
    let out = flat.cordis(&["run", "--script", &script, "a file session"]);
    let flat_id = text(&out).0.lines().find(|l| l.starts_with("session ")).unwrap().split_whitespace().nth(1).unwrap().to_string();
    let file = flat.path().join(".cordis/sessions").join(format!("{flat_id}.jsonl"));
    let out = host.cordis(&["session", "import", &file.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(host.export(&flat_id), std::fs::read_to_string(&file).unwrap(), "export gives back the imported file");

    // A harness log (packed chunk rows) goes in; its events come back out.
    let harness = repo_root().join("tests/data/upstream-sessions/multi-turn.session.jsonl");
    let out = host.cordis(&["session", "import", &harness.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out).1);
    let from_file = host.cordis(&["session", "export", &harness.display().to_string()]);
    assert_eq!(host.export("228b7b82-84ed-49b7-a567-981c03b28c77"), text(&from_file).0);

    // Continued on the database, the imported session replays as from a file.
    host.run(Some(&flat_id), "continue it");
    assert!(host.export(&flat_id).len() > std::fs::read_to_string(&file).unwrap().len());
}

#[test]
fn a_password_never_goes_in_the_composition() {
    let scratch = Scratch::new();
    scratch.composition("- id: sessions\n  name: session-postgres\n  config:\n    url: postgres://cordis:s3cret@127.0.0.1:1/agents\n");
    let out = scratch.cordis(&["check"]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stdout.contains("carries a password") || stderr.contains("carries a password"), "{stdout}{stderr}");
    assert!(!stdout.contains("s3cret") && !stderr.contains("s3cret"), "the password is never printed: {stdout}{stderr}");
}

#[test]
fn hosts_share_sessions_one_writer_at_a_time() {
    let server = PgServer::start();
    let hosts: Vec<HostDir> = (0..3).map(|_| HostDir::new(&server)).collect();

    // Three hosts write three sessions at once, three turns each.
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                s.spawn(move || {
                    let id = h.run(None, &format!("host {i} turn 1"));
                    h.run(Some(&id), &format!("host {i} turn 2"));
                    h.run(Some(&id), &format!("host {i} turn 3"));
                    id
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, id) in ids.iter().enumerate() {
        let export = hosts[(i + 1) % 3].export(id);
        let turns = export.lines().filter(|l| l.contains("\"type\":\"turn/end\"")).count();
        assert_eq!(turns, 3, "host {i}'s session read from another host");
    }

    // Host 1 continues the session host 0 started.
    hosts[1].run(Some(&ids[0]), "taken over");
    assert_eq!(hosts[2].export(&ids[0]).lines().filter(|l| l.contains("\"type\":\"turn/end\"")).count(), 4);

    // A second writer on a live session is refused, naming the holder.
    let mut holder = hosts[0].dev(Some(&ids[1]));
    assert_eq!(holder.session, ids[1]);
    assert_eq!(holder.send(&todo_call("held by host 0"))["isError"], false);
    let script = repo_root().join("examples/plan-and-ship.script.yml").display().to_string();
    let out = hosts[2].cordis(&["run", "--script", &script, "--session", &ids[1], "mine now"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("is being written by cordis@") && stderr.contains(&format!("pid {}", holder.child.id())), "{stderr}");
    // The holder dies: its lock goes with its connection.
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = hosts[2].cordis(&["run", "--script", &script, "--session", &ids[1], "mine now"]);
        if out.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "the lock of a killed writer was not released: {}", text(&out).1);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(written_todos(&hosts[1].export(&ids[1])).contains("held by host 0"));
}

#[test]
fn writers_killed_mid_turn_lose_no_acknowledged_event() {
    let server = PgServer::start();
    let hosts: Vec<HostDir> = (0..2).map(|_| HostDir::new(&server)).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut session: Option<String> = None;
    let mut acknowledged: Vec<String> = Vec::new();
    let kills = 50;
    for round in 0..kills {
        // Each round runs on the other host, resuming where the last left off.
        let host = &hosts[round % 2];
        let dev = host.dev(session.as_deref());
        session.get_or_insert(dev.session.clone());
        let delay = Duration::from_micros(5_000 + rng.next_u64() % 60_000);
        acknowledged.extend(dev.calls_until_killed(delay, &format!("round {round}")).0);
        let written = written_todos(&hosts[(round + 1) % 2].export(session.as_deref().unwrap()));
        for content in &acknowledged {
            assert!(written.contains(content), "round {round}: acknowledged {content:?} is missing");
        }
    }
    // Kills land anywhere, before a round's first call too; enough calls
    // must have been acknowledged for the check to mean something.
    assert!(acknowledged.len() >= 10, "only {} calls acknowledged over {kills} kills", acknowledged.len());
    eprintln!("postgres crash injection: {kills} kills, {} acknowledged events all present", acknowledged.len());
}

#[test]
fn watch_shows_a_plan_written_elsewhere_within_a_second() {
    let server = PgServer::start();
    let writer = HostDir::new(&server);
    let watcher = HostDir::new(&server);
    let mut dev = writer.dev(None);
    let id = dev.session.clone();
    dev.send(&todo_call("first"));

    let mut watch = watcher.command(&["session", "watch", &id]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let lines = BufReader::new(watch.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait_for = |needle: &str, within: Duration| -> Duration {
        let start = Instant::now();
        loop {
            let left = within.checked_sub(start.elapsed()).unwrap_or_else(|| panic!("`{needle}` not shown within {within:?}"));
            match rx.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return start.elapsed(),
                Ok(_) => {}
                Err(_) => panic!("`{needle}` not shown within {within:?}"),
            }
        }
    };
    wait_for("first", Duration::from_secs(10));
    for i in 0..5 {
        let content = format!("written elsewhere {i}");
        dev.send(&todo_call(&content));
        let took = wait_for(&content, Duration::from_secs(1));
        eprintln!("watch redrew after {took:?}");
    }
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn a_writer_carries_on_after_the_server_restarts() {
    let server = PgServer::start();
    let host = HostDir::new(&server);
    let mut dev = host.dev(None);
    let id = dev.session.clone();
    let mut call = |content: &str| -> Value { dev.send(&todo_call(content)) };
    assert_eq!(call("before")["isError"], false);
    server.restart();
    let after = call("after the restart");
    assert_eq!(after["isError"], false, "{after}");
    assert_eq!(call("and on")["isError"], false);
    drop(dev);
    let written = written_todos(&host.export(&id));
    for content in ["before", "after the restart", "and on"] {
        assert!(written.contains(content), "{content} is missing");
    }
}
