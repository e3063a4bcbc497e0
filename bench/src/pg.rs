//! The PostgreSQL figures: a server of the benchmark's own (started like the
//! tests' one, data on the disk under test), a host whose composition keeps
//! sessions in it, and the plain-SQL baselines on the same server.
//!
//! | figure | ours | baseline |
//! | --- | --- | --- |
//! | append, 1 writer | [`PgBench::session`] + `append_text`: the session pipeline, one commit per event | [`PlainInsert::insert`]: `INSERT` of the same row, autocommit, into a table without triggers |
//! | append, 8 writers | the same on 8 sessions from 8 threads | 8 connections inserting at once |
//! | append, 8 writers, the store's statement alone | [`StoreStatement::append`]: the `append_event` call the store sends (lease check and lock, insert, triggers), 8 connections at once | as above |
//! | replay | `sessions.view(id)` → plan | [`PgBench::select_lines`]: `SELECT line ... ORDER BY seq` |

use std::path::Path;
use std::sync::Arc;

use cordis_engine::Host;
use cordis_session::postgres::{self as postgres_store, AppendRow};
use cordis_session::{Appender, Durability, Session};
use cordis_tests::PgServer;
use postgres::{Client, NoTls};

use crate::inproc::{boot, open_turn};
use crate::workload;

/// The environment variable the benchmark composition names.
const URL_VAR: &str = "CORDIS_BENCH_PG_URL";

/// A server, a host over it, and the baseline table.
pub struct PgBench {
    /// The server (stopped when dropped).
    pub server: PgServer,
    /// A host whose sessions are in the server.
    pub host: Host,
    data: String,
}

impl PgBench {
    /// Starts a server under `dir` and boots a host on it.
    ///
    /// # Errors
    /// A message when the host does not boot or the baseline table cannot be
    /// made.
    pub fn start(dir: &Path, library: &Path) -> Result<PgBench, String> {
        let server = PgServer::start_in(dir);
        // Read once by the host at boot, in this single-threaded setup.
        std::env::set_var(URL_VAR, server.url());
        let composition = format!(
            "{}- id: sessions\n  name: session-postgres\n  config:\n    urlEnv: {URL_VAR}\n    schema: bench\n",
            workload::todo_entry(library)
        );
        let host = boot(dir, &composition, false, Durability::Event)?;
        let mut client = Client::connect(&server.url(), NoTls).map_err(|e| e.to_string())?;
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS plain_events (session_id text NOT NULL, seq bigint NOT NULL, time bigint NOT NULL, \
                 type text NOT NULL, line text NOT NULL, PRIMARY KEY (session_id, seq))",
            )
            .map_err(|e| e.to_string())?;
        Ok(PgBench { server, host, data: workload::todo_arguments(5) })
    }

    /// A new session in the database with an open turn.
    ///
    /// # Errors
    /// The store's error.
    pub fn session(&self) -> Result<Arc<Session>, String> {
        let session = self.host.services.sessions.create(None).map_err(|e| e.to_string())?;
        open_turn(&session)?;
        Ok(session)
    }

    /// Appends one `todo/write` event (committed when this returns).
    ///
    /// # Errors
    /// The append's error.
    pub fn append(&self, session: &Session) -> Result<u64, String> {
        session.append_text(tool_todo::TODO_WRITE, &self.data, Appender::Host).map_err(|e| e.to_string())
    }

    /// A baseline inserter on its own connection.
    ///
    /// # Errors
    /// A message when it cannot connect.
    pub fn plain(&self, line: &str) -> Result<PlainInsert, String> {
        let mut client = Client::connect(&self.server.url(), NoTls).map_err(|e| e.to_string())?;
        let statement =
            client.prepare("INSERT INTO plain_events (session_id, seq, time, type, line) VALUES ($1, $2, $3, $4, $5)").map_err(|e| e.to_string())?;
        Ok(PlainInsert { client, statement, id: format!("plain-{}", uuid_like()), seq: 0, line: line.to_string() })
    }

    /// The store's append statement on its own connection, for a session
    /// of its own whose writer lease it holds: what the database does for
    /// one of our appends, without the host's side of it.
    ///
    /// # Errors
    /// A message when it cannot connect or make the session and lease rows.
    pub fn store_statement(&self, line: &str) -> Result<StoreStatement, String> {
        let mut client = Client::connect(&self.server.url(), NoTls).map_err(|e| e.to_string())?;
        let id = format!("statement-{}", uuid_like());
        let token = format!("token-{id}");
        client
            .execute("INSERT INTO bench.sessions (id, header, created_at) VALUES ($1, '{}', 0)", &[&id])
            .and_then(|_| {
                client.execute(
                    "INSERT INTO bench.writers (session_id, token, holder, expires_at) VALUES ($1, $2, 'cordis-bench', now() + interval '1 day')",
                    &[&id, &token],
                )
            })
            .map_err(|e| e.to_string())?;
        Ok(StoreStatement { client, id, token, seq: 0, line: line.to_string() })
    }

    /// The baseline of replay: every line of session `id`, in order.
    ///
    /// # Errors
    /// The query's error.
    pub fn select_lines(&self, client: &mut Client, id: &str) -> Result<usize, String> {
        let rows = client.query("SELECT line FROM bench.events WHERE session_id = $1 ORDER BY seq", &[&id]).map_err(|e| e.to_string())?;
        Ok(rows.iter().map(|r| r.get::<_, &str>(0).len()).filter(|n| *n > 0).count())
    }

    /// A connection for baselines.
    ///
    /// # Errors
    /// A message when it cannot connect.
    pub fn client(&self) -> Result<Client, String> {
        Client::connect(&self.server.url(), NoTls).map_err(|e| e.to_string())
    }
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{nanos:x}-{:?}", std::thread::current().id()).replace(['(', ')'], "")
}

/// The baseline append: one autocommitted `INSERT` of a row like ours.
pub struct PlainInsert {
    client: Client,
    statement: postgres::Statement,
    id: String,
    seq: i64,
    line: String,
}

impl PlainInsert {
    /// Inserts the next row.
    ///
    /// # Errors
    /// The database's error.
    pub fn insert(&mut self) -> Result<(), String> {
        let time = 1_760_000_000_000i64 + self.seq;
        self.client.execute(&self.statement, &[&self.id, &self.seq, &time, &"todo/write", &self.line]).map_err(|e| e.to_string())?;
        self.seq += 1;
        Ok(())
    }
}

/// The store's append statement called directly, through the store's own
/// [`postgres_store::append_event`] with durability per event (see
/// [`PgBench::store_statement`]).
pub struct StoreStatement {
    client: Client,
    id: String,
    token: String,
    seq: i64,
    line: String,
}

impl StoreStatement {
    /// Appends the next event, committed when this returns.
    ///
    /// # Errors
    /// The database's error, or a message when the lease was refused.
    pub fn append(&mut self) -> Result<(), String> {
        let row = AppendRow { session: &self.id, seq: self.seq, time: 1_760_000_000_000i64 + self.seq, kind: "todo/write", line: &self.line };
        if !postgres_store::append_event(&mut self.client, "bench", &self.token, &row, true).map_err(|e| e.to_string())? {
            return Err(format!("session {}: the writer lease was refused", self.id));
        }
        self.seq += 1;
        Ok(())
    }
}
