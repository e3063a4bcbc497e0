//! Durable session files: one JSONL file per session under
//! `<state dir>/sessions/`.
//!
//! - Each event is written with one `write` of its whole line to a file
//!   opened in append mode, then synced according to [`Durability`].
//! - A file is locked (`flock`, exclusive) by the one process appending to
//!   it; a second process is refused with a clear message.
//! - A torn last line (a crash mid-write) is reported and cut before the next
//!   append: nothing acknowledged is lost, since an acknowledged event is a
//!   complete line.
//! - Reading keeps every good line and reports each bad one with its line
//!   number; the file is never rewritten, only a torn tail is cut.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::event::{Event, Header};

use super::fs::{create_private_dir, lock_exclusive, set_private_mode, sync_dir};
use super::jsonl::{parse_appended, parse_log, parse_whole};
use super::{
    check_id, io, Appended, Durability, FileMark, LineProblem, LogWriter, Mark, Position, ReadLog, SessionStore, Since, StoreError, TAIL_CHECK,
};

/// Our own store: one JSONL file per session in one folder,
/// `<state dir>/sessions/<id>.jsonl`.
#[derive(Debug, Clone)]
pub struct FlatStore {
    dir: PathBuf,
}

impl FlatStore {
    /// Opens (creating, mode `0700`) `<state_dir>/sessions`.
    ///
    /// # Errors
    /// [`StoreError::Io`] when the folder cannot be created.
    pub fn open(state_dir: &Path) -> Result<FlatStore, StoreError> {
        let dir = state_dir.join("sessions");
        create_private_dir(state_dir)?;
        create_private_dir(&dir)?;
        Ok(FlatStore { dir })
    }

    /// The sessions folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `id`.
    ///
    /// # Errors
    /// [`StoreError::BadId`].
    pub fn path_of(&self, id: &str) -> Result<PathBuf, StoreError> {
        check_id(id)?;
        Ok(self.dir.join(format!("{id}.jsonl")))
    }

    /// Creates the file of a new session (mode `0600`), locks it and writes
    /// its header.
    ///
    /// # Errors
    /// [`StoreError::Exists`], [`StoreError::Io`].
    pub fn create(&self, header: &Header, durability: Durability) -> Result<FlatWriter, StoreError> {
        let (path, file) = self.create_file(&header.id)?;
        let mut writer = FlatWriter::locked(file, &path, &header.id, durability)?;
        let mut line =
            serde_json::to_string(header).map_err(|e| StoreError::BadHeader { path: path.display().to_string(), detail: e.to_string() })?;
        line.push('\n');
        writer.write_line(line.as_bytes())?;
        writer.sync()?;
        sync_dir(&self.dir);
        Ok(writer)
    }

    /// Creates the file of a new session `id`: mode `0600`, opened for
    /// appending, refusing an id that exists.
    fn create_file(&self, id: &str) -> Result<(PathBuf, File), StoreError> {
        let path = self.path_of(id)?;
        let mut options = OpenOptions::new();
        options.append(true).create_new(true).read(true);
        set_private_mode(&mut options);
        let file = options.open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                StoreError::Exists(id.to_string())
            } else {
                StoreError::Io { path: path.display().to_string(), source: e }
            }
        })?;
        Ok((path, file))
    }

    /// Writes a whole session at once (an import): creates the file (mode
    /// `0600`, refusing an existing id), writes the header and every event,
    /// and syncs it before returning.
    ///
    /// # Errors
    /// [`StoreError::Exists`], [`StoreError::Io`].
    pub fn write_whole(&self, header: &Header, events: &[Event]) -> Result<PathBuf, StoreError> {
        let (path, file) = self.create_file(&header.id)?;
        let bad_header = |e: serde_json::Error| StoreError::BadHeader { path: path.display().to_string(), detail: e.to_string() };
        let mut out = std::io::BufWriter::new(&file);
        serde_json::to_writer(&mut out, header).map_err(bad_header)?;
        out.write_all(b"\n").map_err(io(&path))?;
        for event in events {
            out.write_all(event.to_line().as_bytes()).map_err(io(&path))?;
        }
        out.flush().map_err(io(&path))?;
        drop(out);
        file.sync_all().map_err(io(&path))?;
        sync_dir(&self.dir);
        Ok(path)
    }

    /// Opens session `id` for appending: locks the file, reads it, and cuts a
    /// torn last line (reported in the returned log's `problems`).
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Locked`], [`StoreError::BadHeader`], [`StoreError::Io`].
    pub fn open_for_append(&self, id: &str, durability: Durability) -> Result<(FlatWriter, ReadLog), StoreError> {
        let path = self.path_of(id)?;
        let file = OpenOptions::new().read(true).append(true).open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                StoreError::NotFound { id: id.to_string(), dir: self.dir.display().to_string() }
            } else {
                StoreError::Io { path: path.display().to_string(), source: e }
            }
        })?;
        let mut writer = FlatWriter::locked(file, &path, id, durability)?;
        let mut log = read_file(&path)?;
        if let Some(line) = log.unterminated.take() {
            writer.write_line(b"\n")?;
            writer.sync()?;
            log.problems.push(LineProblem::note(line, "the last line had no newline; one was added (nothing was lost)"));
        }
        if let Some((line, offset)) = log.torn {
            writer.file.set_len(offset).map_err(io(&path))?;
            writer.file.sync_all().map_err(io(&path))?;
            // A torn line was never acknowledged: cutting it is the normal
            // recovery after a crash, so it is a note, not a loss.
            log.problems.push(LineProblem::note(line, "torn last line (the writer stopped mid-line); cut before the next append"));
            log.torn = None;
        }
        Ok((writer, log))
    }

    /// Every session file's id, sorted.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn ids(&self) -> Result<Vec<String>, StoreError> {
        let mut ids = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io(&self.dir))? {
            let entry = entry.map_err(io(&self.dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = name.strip_suffix(".jsonl") {
                if check_id(id).is_ok() {
                    ids.push(id.to_string());
                }
            }
        }
        ids.sort();
        Ok(ids)
    }
}

/// The appending end of one session file; holds the file's lock.
#[derive(Debug)]
pub struct FlatWriter {
    file: File,
    path: PathBuf,
    durability: Durability,
    unsynced: bool,
}

impl FlatWriter {
    fn locked(file: File, path: &Path, id: &str, durability: Durability) -> Result<FlatWriter, StoreError> {
        lock_exclusive(&file, path, id)?;
        Ok(FlatWriter { file, path: path.to_path_buf(), durability, unsynced: false })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one whole line with a single write, then syncs per the
    /// durability setting.
    ///
    /// # Errors
    /// [`StoreError::Io`]; the event must then be treated as not written.
    pub fn append(&mut self, line: &[u8]) -> Result<(), StoreError> {
        self.write_line(line)?;
        match self.durability {
            Durability::Event => self.sync(),
            Durability::Turn | Durability::None => {
                self.unsynced = true;
                Ok(())
            }
        }
    }

    fn write_line(&mut self, line: &[u8]) -> Result<(), StoreError> {
        // `write_all` on a file opened with O_APPEND: one write(2) for any
        // line a regular file accepts whole, which is every line we write.
        self.file.write_all(line).map_err(io(&self.path))
    }

    /// Marks the end of a turn: syncs under [`Durability::Turn`].
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub fn end_turn(&mut self) -> Result<(), StoreError> {
        if self.durability == Durability::Turn && self.unsynced {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(io(&self.path))?;
        self.unsynced = false;
        Ok(())
    }
}

/// Reads a session file without locking it: every good line, each bad line
/// reported with its number, and a torn last line noted (not cut).
///
/// # Errors
/// [`StoreError::Io`] or [`StoreError::BadHeader`] when line 1 is not a
/// session header.
pub fn read_file(path: &Path) -> Result<ReadLog, StoreError> {
    let bytes = fs::read(path).map_err(io(path))?;
    parse_log(&bytes, path)
}

/// Reads the JSONL log at `path` after `after` (see
/// [`SessionStore::read_since`]): from the byte where the last read
/// stopped when the file is the same one (device and inode), is at least
/// that long, and still holds the same bytes just before that point;
/// otherwise the whole file. `missing` is the error for a file that is not
/// there.
pub(crate) fn read_file_since(path: &Path, after: &Position, missing: impl FnOnce() -> StoreError) -> Result<(Since, Position), StoreError> {
    let mut file = File::open(path).map_err(|e| if e.kind() == std::io::ErrorKind::NotFound { missing() } else { io(path)(e) })?;
    let meta = file.metadata().map_err(io(path))?;
    let identity = identity_of(&meta);
    if let Mark::File(mark) = after.mark() {
        let at = mark.lines.consumed;
        let checked = mark.tail.len() as u64;
        if mark.identity == identity && meta.len() >= at && checked <= at {
            let from = at - checked;
            let mut bytes = Vec::with_capacity(usize::try_from(meta.len() - from).unwrap_or(0));
            file.seek(SeekFrom::Start(from)).map_err(io(path))?;
            file.read_to_end(&mut bytes).map_err(io(path))?;
            if bytes.starts_with(&mark.tail) {
                let mut lines = mark.lines;
                if let Some(read) = parse_appended(&bytes[mark.tail.len()..], &mut lines) {
                    let appended = Appended { events: read.events, lines: read.lines, problems: read.problems, torn: read.torn };
                    let end = usize::try_from(lines.consumed - from).unwrap_or(bytes.len()).min(bytes.len());
                    let tail = bytes[end.saturating_sub(TAIL_CHECK as usize)..end].to_vec();
                    let position = after.advanced(&appended, Mark::File(FileMark { identity, lines, tail }));
                    return Ok((Since::Appended(appended), position));
                }
            }
        }
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.seek(SeekFrom::Start(0)).map_err(io(path))?;
    file.read_to_end(&mut bytes).map_err(io(path))?;
    let (log, lines) = parse_whole(&bytes, path)?;
    let end = usize::try_from(lines.consumed).unwrap_or(bytes.len()).min(bytes.len());
    let tail = bytes[end.saturating_sub(TAIL_CHECK as usize)..end].to_vec();
    let position = Position::of_whole(&log, Mark::File(FileMark { identity, lines, tail }));
    Ok((Since::Whole(log), position))
}

/// A file's device and inode (zeros where the platform has none).
pub(crate) fn identity_of(meta: &fs::Metadata) -> (u64, u64) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        (0, 0)
    }
}

impl SessionStore for FlatStore {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn check_id(&self, id: &str) -> Result<(), StoreError> {
        check_id(id)
    }

    fn create(&self, header: &Header, durability: Durability) -> Result<Box<dyn LogWriter>, StoreError> {
        Ok(Box::new(FlatStore::create(self, header, durability)?))
    }

    fn open_for_append(&self, id: &str, durability: Durability) -> Result<(Box<dyn LogWriter>, ReadLog), StoreError> {
        let (writer, log) = FlatStore::open_for_append(self, id, durability)?;
        Ok((Box::new(writer), log))
    }

    fn read(&self, id: &str) -> Result<ReadLog, StoreError> {
        let path = self.path_of(id)?;
        if !path.exists() {
            return Err(StoreError::NotFound { id: id.to_string(), dir: self.dir.display().to_string() });
        }
        read_file(&path)
    }

    fn read_since(&self, id: &str, after: &Position) -> Result<(Since, Position), StoreError> {
        let path = self.path_of(id)?;
        read_file_since(&path, after, || StoreError::NotFound { id: id.to_string(), dir: self.dir.display().to_string() })
    }

    fn write_whole(&self, header: &Header, events: &[Event]) -> Result<String, StoreError> {
        FlatStore::write_whole(self, header, events).map(|p| p.display().to_string())
    }

    fn ids(&self) -> Result<Vec<String>, StoreError> {
        FlatStore::ids(self)
    }

    fn contains(&self, path: &Path) -> bool {
        self.dir.canonicalize().is_ok_and(|dir| path.starts_with(dir))
    }

    fn log_file(&self, id: &str) -> Option<PathBuf> {
        self.path_of(id).ok().filter(|p| p.is_file())
    }
}

impl LogWriter for FlatWriter {
    fn append(&mut self, event: &Event) -> Result<(), StoreError> {
        FlatWriter::append(self, event.to_line().as_bytes())
    }

    fn end_turn(&mut self) -> Result<(), StoreError> {
        FlatWriter::end_turn(self)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{skipped_lines, ProblemKind};

    #[test]
    fn reads_good_lines_and_reports_bad_ones() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\n",
            "{\"seq\":0,\"time\":1,\"type\":\"a\",\"data\":{}}\n",
            "{\"seq\":1,\"time\":1,\"type\":\"b\",\"data\":{}}{\"seq\":2,\"type\":\"c\",\"data\":{}}\n",
            "\0\0\0\n",
            "{\"seq\":1,\"time\":1,\"type\":\"b\",\"data\":{\"x\":\"\\r\u{2028}\u{85}\"},\"bogus\":1}\n",
            "{\"seq\":1,\"time\":2,\"type\":\"b\",\"data\":{\"x\":1}}\r\n",
            "{\"seq\":2,\"ti",
        );
        let log = parse_log(text.as_bytes(), Path::new("s.jsonl")).unwrap();
        // Line 3 holds two whole records: both are read.
        assert_eq!(log.events.len(), 4);
        assert_eq!(log.lines, vec![2, 3, 3, 6]);
        assert_eq!(log.events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), ["a", "b", "c", "b"]);
        let shown: Vec<(usize, ProblemKind)> = log.problems.iter().map(|p| (p.line, p.kind)).collect();
        assert_eq!(
            shown,
            [(3, ProblemKind::Note), (4, ProblemKind::Skipped), (5, ProblemKind::Skipped), (6, ProblemKind::Broken), (6, ProblemKind::Note)]
        );
        assert_eq!(log.problems[0].message, "2 records on one line (a missing newline); each is read and kept");
        assert!(log.problems[2].message.contains("unknown field"));
        assert_eq!(log.problems[3].message, "seq 1 follows 2: a duplicate or out-of-order seq (kept)");
        assert!(log.problems[4].message.starts_with("1 line is ended by CRLF"), "{}", log.problems[4].message);
        assert_eq!(skipped_lines(&log.problems), 2);
        assert_eq!(log.torn, Some((7, (text.len() - "{\"seq\":2,\"ti".len()) as u64)));
        assert!(log.unterminated.is_none());
    }

    #[test]
    fn a_whole_last_record_without_newline_is_kept_and_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let store = FlatStore::open(dir.path()).unwrap();
        let mut w = store.create(&Header::new("nl", None), Durability::Event).unwrap();
        w.append(b"{\"seq\":0,\"time\":1,\"type\":\"a\",\"data\":{}}").unwrap();
        drop(w);
        let (mut w, log) = store.open_for_append("nl", Durability::Event).unwrap();
        assert_eq!(log.events.len(), 1);
        assert!(log.problems[0].message.contains("no newline"), "{:?}", log.problems);
        w.append(b"{\"seq\":1,\"time\":1,\"type\":\"b\",\"data\":{}}\n").unwrap();
        drop(w);
        let log = read_file(&store.path_of("nl").unwrap()).unwrap();
        assert_eq!(log.events.len(), 2);
        assert!(log.problems.is_empty(), "{:?}", log.problems);
    }

    #[test]
    fn out_of_order_seqs_are_reported_and_kept() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n",
            "{\"seq\":0,\"type\":\"a\",\"data\":{}}\n",
            "{\"seq\":7,\"type\":\"a\",\"data\":{}}\n",
        );
        let log = parse_log(text.as_bytes(), Path::new("s.jsonl")).unwrap();
        assert_eq!(log.events.len(), 2);
        assert_eq!(log.problems[0].line, 3);
        assert_eq!(log.problems[0].message, "seq 7 follows 0: a gap from 1 to 6 (the events after it are kept)");
        let one =
            "{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n{\"seq\":0,\"type\":\"a\",\"data\":{}}\n{\"seq\":2,\"type\":\"a\",\"data\":{}}\n";
        let log = parse_log(one.as_bytes(), Path::new("s.jsonl")).unwrap();
        assert_eq!(log.problems[0].message, "seq 2 follows 0: a gap, seq 1 is missing (the events after it are kept)");
        let v7 = "{\"type\":\"session\",\"version\":7,\"id\":\"s\"}\n";
        assert!(parse_log(v7.as_bytes(), Path::new("s.jsonl")).unwrap_err().to_string().contains("version 7"));
    }

    #[test]
    fn ids_cannot_escape() {
        for bad in ["", "../x", "/abs", "a/b", ".hidden", "a\0b", &"x".repeat(129)] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
        check_id("s-2026.11_30").unwrap();
    }

    #[test]
    fn second_writer_is_refused_and_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let store = FlatStore::open(dir.path()).unwrap();
        let header = Header::new("abc", None);
        let mut w = store.create(&header, Durability::Event).unwrap();
        w.append(b"{\"seq\":0,\"time\":1,\"type\":\"a\",\"data\":{}}\n").unwrap();
        assert!(matches!(store.open_for_append("abc", Durability::Event), Err(StoreError::Locked { .. })));
        w.append(b"{\"seq\":1,\"ti").unwrap();
        drop(w);
        let (_, log) = store.open_for_append("abc", Durability::Event).unwrap();
        assert_eq!(log.events.len(), 1);
        assert_eq!(log.problems.len(), 1);
        assert!(log.problems[0].message.contains("torn"));
        let after = fs::read_to_string(store.path_of("abc").unwrap()).unwrap();
        assert!(after.ends_with("\"data\":{}}\n"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(store.path_of("abc").unwrap()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    /// The outline of a whole read, and of the reads so far, to compare.
    fn seqs(events: &[Event], lines: &[usize]) -> Vec<(u64, usize)> {
        events.iter().map(|e| e.seq).zip(lines.iter().copied()).collect()
    }

    fn line(seq: u64) -> String {
        format!("{{\"seq\":{seq},\"time\":1,\"type\":\"a\",\"data\":{{}}}}\n")
    }

    fn appended(store: &FlatStore, at: &Position) -> (Appended, Position) {
        match store.read_since("s", at).unwrap() {
            (Since::Appended(a), next) => (a, next),
            (Since::Whole(_), _) => panic!("read whole after {at:?}"),
        }
    }

    #[test]
    fn reads_since_a_position_wait_for_torn_lines_and_take_back_the_newline_of_a_kept_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = FlatStore::open(dir.path()).unwrap();
        let path = store.path_of("s").unwrap();
        let mut w = store.create(&Header::new("s", None), Durability::None).unwrap();
        w.append(line(0).as_bytes()).unwrap();
        let (Since::Whole(log), at) = store.read_since("s", &Position::start()).unwrap() else { panic!("not whole") };
        assert_eq!(seqs(&log.events, &log.lines), [(0, 2)]);
        // Half a line: not read, reported torn, read once whole.
        let next = line(1);
        w.append(&next.as_bytes()[..10]).unwrap();
        let (torn, at) = appended(&store, &at);
        assert!(torn.events.is_empty() && torn.torn == Some((3, (fs::metadata(&path).unwrap().len() - 10))), "{torn:?}");
        w.append(&next.as_bytes()[10..]).unwrap();
        let (one, at) = appended(&store, &at);
        assert_eq!((seqs(&one.events, &one.lines), one.torn), (vec![(1, 3)], None));
        // A whole record without its newline is read (as a whole read keeps
        // it); the newline that completes it later is not a line of its own.
        w.append(line(2).trim_end().as_bytes()).unwrap();
        let (kept, at) = appended(&store, &at);
        assert_eq!(seqs(&kept.events, &kept.lines), [(2, 4)]);
        w.append(format!("\n{}", line(3)).as_bytes()).unwrap();
        let (after, at) = appended(&store, &at);
        assert_eq!(seqs(&after.events, &after.lines), [(3, 5)]);
        let whole = read_file(&path).unwrap();
        assert_eq!(seqs(&whole.events, &whole.lines), [(0, 2), (1, 3), (2, 4), (3, 5)]);
        assert!(whole.problems.is_empty(), "{:?}", whole.problems);
        // A kept record followed by anything but its newline was not an
        // append: read whole.
        w.append(line(4).trim_end().as_bytes()).unwrap();
        let (_, at) = appended(&store, &at);
        w.append(line(5).as_bytes()).unwrap();
        let (Since::Whole(glued), _) = store.read_since("s", &at).unwrap() else { panic!("glued records read as an append") };
        assert_eq!(glued.events.len(), 6);
        drop(w);
    }

    #[test]
    fn a_file_rewritten_or_replaced_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = FlatStore::open(dir.path()).unwrap();
        let path = store.path_of("s").unwrap();
        let header = "{\"type\":\"session\",\"version\":0,\"id\":\"s\"}\n";
        fs::write(&path, format!("{header}{}{}", line(0), line(1))).unwrap();
        let (_, at) = store.read_since("s", &Position::start()).unwrap();
        // The same length and inode, other bytes before the position.
        fs::write(&path, format!("{header}{}{}", line(0), line(7))).unwrap();
        let (Since::Whole(log), at) = store.read_since("s", &at).unwrap() else { panic!("a rewrite of the same length read as an append") };
        assert_eq!(log.events[1].seq, 7);
        // Another file in its place, longer.
        let other = dir.path().join("other");
        fs::write(&other, format!("{header}{}{}{}", line(0), line(7), line(8))).unwrap();
        fs::rename(&other, &path).unwrap();
        let (Since::Whole(log), at) = store.read_since("s", &at).unwrap() else { panic!("a replaced file read as an append") };
        assert_eq!(log.events.len(), 3);
        // Cut shorter.
        fs::write(&path, format!("{header}{}", line(0))).unwrap();
        let (Since::Whole(log), _) = store.read_since("s", &at).unwrap() else { panic!("a cut file read as an append") };
        assert_eq!(log.events.len(), 1);
        fs::remove_file(&path).unwrap();
        assert!(matches!(store.read_since("s", &at), Err(StoreError::NotFound { .. })));
    }
}
