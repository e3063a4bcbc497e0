//! The TypeScript harness's session store, both ways, checked by its
//! published backend (installed pinned into `target/store-backend` by
//! `tests/store-backend/setup.sh` on first use):
//!
//! - every root the backend wrote (`tests/fixtures/dsh-store/`: zstd, plain,
//!   a torn last frame, a corrupted middle frame) reads here as the backend
//!   reads it;
//! - sessions `cordis run` and `cordis dev` write through a composition's
//!   persistence entry (zstd and plain, several turns, processes killed
//!   mid-turn) load in the backend with every acknowledged event;
//! - a session the backend wrote, continued by `cordis run`, loads in the
//!   backend with its old and new events.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use cordis_tests::dev::Dev;
use cordis_tests::{cordis_exe, plugin_dir, repo_root, text, Rng, Scratch, StoreBackend};
use serde_json::Value;

fn store_fixture(part: &str) -> PathBuf {
    repo_root().join("tests/fixtures/dsh-store").join(part)
}

fn values(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn header_id(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    values(&text)[0]["id"].as_str().unwrap().to_string()
}

/// What the reference backend loads for session `id` in `root`, without
/// repairing anything: the header, then every event.
fn reference_read(root: &Path, id: &str, compression: &str) -> Vec<Value> {
    let out = StoreBackend::get().run(&["read", "--inspect", "--root", &root.display().to_string(), "--id", id, "--compression", compression]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the reference refused {id} in {}: {stdout}{stderr}", root.display());
    values(&stdout)
}

/// What `cordis session export` gives for `id` (with `--root` when given).
fn cordis_export(scratch: &Scratch, root: Option<&Path>, id: &str) -> Vec<Value> {
    let mut args = vec!["session".to_string(), "export".into()];
    if let Some(root) = root {
        args.extend(["--root".into(), root.display().to_string()]);
    }
    args.push(id.into());
    let out = scratch.cordis(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "cordis refused {id}: {stderr}");
    values(&stdout)
}

fn tree_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(tree_bytes(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_root_reads_as_the_reference_reads_it() {
    let scratch = Scratch::new();
    let expected = store_fixture("expected");
    let mut compared = 0;
    for root in ["zstd", "plain"] {
        for entry in std::fs::read_dir(&expected).unwrap().flatten().filter(|e| e.path().is_file()) {
            let want = values(&std::fs::read_to_string(entry.path()).unwrap());
            let id = want[0]["id"].as_str().unwrap().to_string();
            let got = cordis_export(&scratch, Some(&store_fixture(root)), &id);
            assert_eq!(got, want, "{root}/{id}");
            compared += 1;
        }
    }
    assert_eq!(compared, 8);

    // A torn last frame: the complete frames kept, the open turn closed as
    // the reference closes it, and the file left as it was.
    let torn = store_fixture("torn");
    let before = tree_bytes(&torn);
    let want_file = std::fs::read_dir(expected.join("torn")).unwrap().flatten().next().unwrap().path();
    let id = header_id(&want_file);
    let want = values(&std::fs::read_to_string(&want_file).unwrap());
    assert_eq!(cordis_export(&scratch, Some(&torn), &id), want);
    let shown = scratch.cordis(&["session", "show", "--root", &torn.display().to_string(), &id]);
    let (stdout, _) = text(&shown);
    assert!(stdout.contains("torn last frame at byte 4841"), "{stdout}");
    assert!(stdout.contains("closed with step/end, turn/end"), "{stdout}");
    assert_eq!(tree_bytes(&torn), before, "reading must not change the store");

    // A corrupted complete frame: the whole log is refused, naming the frame.
    let corrupt = store_fixture("corrupt");
    let before = tree_bytes(&corrupt);
    let out = scratch.cordis(&["session", "export", "--root", &corrupt.display().to_string(), "228b7b82-84ed-49b7-a567-981c03b28c77"]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success() && stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("the frame at byte 1951 fails its check") && stderr.contains("checksum"), "{stderr}");
    assert_eq!(tree_bytes(&corrupt), before);

    // A session file named directly, without --root.
    let file = store_fixture("zstd/--project--/d9d967e8-0112-471c-a3b5-dfdc171aba61/session.jsonl.zstd");
    let got = cordis_export(&scratch, None, &file.display().to_string());
    let want = values(&std::fs::read_to_string(expected.join("d9d967e8-0112-471c-a3b5-dfdc171aba61.jsonl")).unwrap());
    assert_eq!(got, want);
}

#[test]
fn a_root_mixing_both_encodings_is_refused() {
    let scratch = Scratch::new();
    let root = scratch.path().join("mixed");
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    };
    let a = "--project--/228b7b82-84ed-49b7-a567-981c03b28c77/session.jsonl.zstd";
    let b = "--project--/d9d967e8-0112-471c-a3b5-dfdc171aba61/session.jsonl";
    copy(&store_fixture("zstd").join(a), &root.join(a));
    copy(&store_fixture("plain").join(b), &root.join(b));
    let out = scratch.cordis(&["session", "ls", "--root", &root.display().to_string()]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("mixes both encodings"), "{stderr}");
}

fn persistence_composition(scratch: &Scratch, compression: &str) {
    scratch.composition(&format!(
        "- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n\
         - id: persistence\n  name: '@deepseek-ai/dsh-session-persistence-jsonl'\n  config:\n    root: ./.sessions\n    compression: {compression}\n"
    ));
}

fn script() -> String {
    repo_root().join("examples/plan-and-ship.script.yml").display().to_string()
}

/// Runs one scripted turn; returns the session id.
fn run_turn(scratch: &Scratch, session: Option<&str>, prompt: &str) -> String {
    let script = script();
    let mut args = vec!["run", "--script", &script];
    if let Some(id) = session {
        args.extend(["--session", id]);
    }
    args.push(prompt);
    let out = scratch.cordis(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "cordis run failed: {stdout}{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("session ")).unwrap_or_else(|| panic!("no session line: {stdout}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

#[test]
fn sessions_cordis_writes_load_in_the_reference() {
    for compression in ["zstd", "none"] {
        let scratch = Scratch::new();
        persistence_composition(&scratch, compression);
        let id = run_turn(&scratch, None, "plan the release");
        run_turn(&scratch, Some(&id), "again");
        run_turn(&scratch, Some(&id), "and once more");
        let root = scratch.path().join(".sessions");
        // The harness's layout, nothing in the flat store.
        let suffix = if compression == "zstd" { "session.jsonl.zstd" } else { "session.jsonl" };
        let files: Vec<PathBuf> = tree_bytes(&root).into_iter().map(|(p, _)| p).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(files[0].ends_with(format!("{id}/{suffix}")), "{files:?}");
        assert!(files[0].parent().unwrap().parent().unwrap().file_name().unwrap().to_str().unwrap().starts_with("--"));
        assert!(!scratch.path().join(".cordis/sessions").join(format!("{id}.jsonl")).exists());

        let ours = cordis_export(&scratch, None, &id);
        let theirs = reference_read(&root, &id, compression);
        assert_eq!(theirs, ours, "{compression}: the reference must load every event as written");
        let turns = theirs.iter().filter(|e| e["type"] == "turn/end").count();
        assert_eq!(turns, 3, "{compression}");
        assert!(theirs.iter().any(|e| e["type"] == "todo/write"));
        assert_eq!(theirs[0]["delegationDepth"], 0);
    }
}

#[test]
fn a_reference_session_continued_by_cordis_loads_in_the_reference() {
    let scratch = Scratch::new();
    persistence_composition(&scratch, "zstd");
    let root = scratch.path().join(".sessions");
    let source = repo_root().join("tests/data/upstream-sessions/multi-turn.session.jsonl");
    let mut write = StoreBackend::get()
        .command(&["write", "--root", &root.display().to_string(), "--batch", "5", "--cwd", &scratch.path().display().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    write.stdin.take().unwrap().write_all(&std::fs::read(&source).unwrap()).unwrap();
    let written = write.wait_with_output().unwrap();
    assert!(written.status.success(), "{}", text(&written).1);
    let id = "228b7b82-84ed-49b7-a567-981c03b28c77";
    let old = reference_read(&root, id, "zstd");

    run_turn(&scratch, Some(id), "continue the plan");
    let after = reference_read(&root, id, "zstd");
    assert_eq!(after[..old.len()], old[..], "the old events must load unchanged");
    assert!(after.len() > old.len() + 5, "new events: {}", after.len() - old.len());
    assert!(after[old.len()..].iter().any(|e| e["type"] == "todo/write"));
    for (i, e) in after[1..].iter().enumerate() {
        assert_eq!(e["seq"], i as u64, "seq runs on without a gap");
    }
    assert_eq!(cordis_export(&scratch, None, id), after);
}

#[test]
fn runs_killed_mid_turn_lose_no_acknowledged_event() {
    for compression in ["zstd", "none"] {
        let scratch = Scratch::new();
        persistence_composition(&scratch, compression);
        let root = scratch.path().join(".sessions");
        let mut rng = Rng(0x7e57_5eed ^ compression.len() as u64);
        let mut session: Option<String> = None;
        let mut acknowledged: Vec<String> = Vec::new();
        for round in 0..16 {
            let args: Vec<&str> = session.as_deref().map_or_else(Vec::new, |id| vec!["--session", id]);
            let dev = Dev::spawn(Dev::command(scratch.path(), &[], &args)).unwrap_or_else(|e| panic!("{compression} round {round}: {e}"));
            session.get_or_insert(dev.session.clone());
            let delay = Duration::from_micros(5_000 + rng.next_u64() % 60_000);
            acknowledged.extend(dev.calls_until_killed(delay, &format!("{compression} round {round}")).0);

            // Nothing is on disk before a session's first append: a process
            // killed before any call leaves no session to continue.
            let log_name = if compression == "zstd" { "session.jsonl.zstd" } else { "session.jsonl" };
            let on_disk = tree_bytes(&root).iter().any(|(p, _)| p.ends_with(format!("{}/{log_name}", session.as_deref().unwrap())));
            if !on_disk {
                assert!(acknowledged.is_empty(), "{compression} round {round}: calls were acknowledged but nothing is on disk");
                session = None;
                continue;
            }
            // The reference loads the log the killed process left (without
            // repairing it) with every acknowledged write.
            let id = session.as_deref().unwrap();
            let events = reference_read(&root, id, compression);
            let written: HashSet<&str> =
                events.iter().filter(|e| e["type"] == "todo/write").filter_map(|e| e["data"]["todos"][0]["content"].as_str()).collect();
            for content in &acknowledged {
                assert!(written.contains(content.as_str()), "{compression} round {round}: acknowledged {content:?} is missing");
            }
            assert_eq!(events.last().unwrap()["type"], "turn/end", "{compression} round {round}: the loaded log is balanced");
        }
        // The kills land anywhere, before the first call as well as between
        // calls; some calls must have been acknowledged for the check to
        // mean something.
        assert!(acknowledged.len() >= 3, "{compression}: only {} calls acknowledged", acknowledged.len());
    }
}

#[test]
fn watch_follows_file_stores_within_a_second() {
    for store in ["flat", "harness"] {
        let scratch = Scratch::new();
        if store == "harness" {
            persistence_composition(&scratch, "zstd");
        } else {
            scratch.composition("- id: todo\n  name: tool-todo\n  config:\n    allowParallelInProgress: true\n");
        }
        let mut dev = Dev::start(scratch.path(), &[]);
        let id = dev.session.clone();
        let mut call = |content: &str| {
            let answer = dev.call("todo_write", &format!(r#"{{"todos": [{{"content": "{content}", "status": "pending"}}]}}"#));
            assert_eq!(answer["isError"], false, "{answer}");
        };
        call("first");
        let mut watch = Command::new(cordis_exe())
            .args(["session", "watch", &id])
            .current_dir(scratch.path())
            .env("CORDIS_PLUGIN_PATH", plugin_dir())
            .env("XDG_CONFIG_HOME", scratch.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let lines = BufReader::new(watch.stdout.take().unwrap());
        std::thread::spawn(move || lines.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
        let wait_for = |needle: &str, within: Duration| {
            let start = std::time::Instant::now();
            loop {
                let left = within.checked_sub(start.elapsed()).unwrap_or_else(|| panic!("{store}: `{needle}` not shown within {within:?}"));
                match rx.recv_timeout(left) {
                    Ok(line) if line.contains(needle) => return,
                    Ok(_) => {}
                    Err(_) => panic!("{store}: `{needle}` not shown within {within:?}"),
                }
            }
        };
        wait_for("first", Duration::from_secs(10));
        for i in 0..3 {
            let content = format!("update {i}");
            call(&content);
            wait_for(&content, Duration::from_secs(1));
        }
        let _ = watch.kill();
        let _ = watch.wait();
    }
}

#[test]
fn damage_in_the_middle_is_refused_never_cut() {
    let scratch = Scratch::new();
    persistence_composition(&scratch, "zstd");
    let id = "d9d967e8-0112-471c-a3b5-dfdc171aba61";
    let rel = format!("--project--/{id}/session.jsonl.zstd");
    let root = scratch.path().join(".sessions");
    std::fs::create_dir_all(root.join(&rel).parent().unwrap()).unwrap();
    let mut bytes = std::fs::read(store_fixture("zstd").join(&rel)).unwrap();
    // Frame 2's first block claims far more bytes than the file holds, as a
    // flipped size field would; whole frames follow it.
    let frames = cordis_session::store::harness::frames::split(&bytes).unwrap();
    let start = frames.complete[2].start;
    let descriptor = bytes[start + 4];
    let single = descriptor & 0x20 != 0;
    let size_bytes = match descriptor >> 6 {
        0 => usize::from(single),
        f => 1 << f,
    };
    let dictionary = match descriptor & 3 {
        3 => 4,
        n => n as usize,
    };
    let block = start + 5 + usize::from(!single) + dictionary + size_bytes;
    bytes[block] |= 0xF8;
    bytes[block + 1] = 0xFF;
    bytes[block + 2] = 0x0F;
    std::fs::write(root.join(&rel), &bytes).unwrap();
    let before = tree_bytes(&root);

    let out = scratch.cordis(&["session", "show", "--root", &root.display().to_string(), id]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("the frame at byte {start} claims more bytes than the file holds")), "{stderr}");
    let script = script();
    let out = scratch.cordis(&["run", "--script", &script, "--session", id, "continue"]);
    assert!(!out.status.success(), "{}", text(&out).0);
    assert!(text(&out).1.contains("this is damage, not a torn write"), "{}", text(&out).1);
    assert_eq!(tree_bytes(&root), before, "a damaged log is never cut");
}

#[test]
fn ids_that_look_like_paths_stay_ids_in_a_root() {
    let scratch = Scratch::new();
    let root = scratch.path().join("root");
    let source = store_fixture("plain/--project--/d9d967e8-0112-471c-a3b5-dfdc171aba61/session.jsonl");
    for id in ["a/b", "x.jsonl", "../../etc"] {
        let out = scratch.cordis(&["session", "import", "--root", &root.display().to_string(), &source.display().to_string(), "--id", id]);
        assert!(out.status.success(), "{id}: {}", text(&out).1);
    }
    let out = scratch.cordis(&["session", "ls", "--root", &root.display().to_string()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success() && !stderr.contains("skipping"), "{stdout}{stderr}");
    assert_eq!(stdout.lines().filter(|l| l.contains("115 events")).count(), 3, "{stdout}");
    for id in ["a/b", "x.jsonl", "../../etc"] {
        let got = cordis_export(&scratch, Some(&root), id);
        assert_eq!(got[0]["id"], id);
        assert_eq!(got.len(), 116);
    }
    assert!(tree_bytes(&root).iter().all(|(p, _)| p.starts_with(&root)));
    // A log whose header is destroyed is still listed by its folder's name,
    // with the damage, not left out without a word.
    let log = tree_bytes(&root).into_iter().map(|(p, _)| p).find(|p| p.to_string_lossy().contains("x.jsonl")).unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[..8].copy_from_slice(b"\0garbage");
    std::fs::write(&log, &bytes).unwrap();
    let out = scratch.cordis(&["session", "ls", "--root", &root.display().to_string()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("skipping session x.jsonl: ") && stderr.contains(&log.display().to_string()), "{stderr}");
    assert_eq!(stdout.lines().filter(|l| l.contains("115 events")).count(), 2, "{stdout}");
}
