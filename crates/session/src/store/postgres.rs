//! Sessions in PostgreSQL, for operators whose agents run on more than one
//! machine: every host writes to one database, any host continues any
//! session, one place lists and reads them.
//!
//! Tables, in the config's schema (default `cordis`), created and upgraded
//! by the store itself through numbered migrations (`schema_migrations`
//! records which ran):
//!
//! - `sessions(id, header, created_at)`: the header line as written;
//! - `events(session_id, seq, time, type, line)`: one row per event, `line`
//!   the event's JSON exactly as a file would hold it. The primary key
//!   `(session_id, seq)` and a trigger that accepts only `seq` = the last
//!   one + 1 keep every session's `seq` contiguous, whoever writes; a
//!   statement trigger sends `NOTIFY` on channel `cordis:<schema>` with the
//!   session id after every insert (what `cordis session watch` listens to).
//!
//! Guarantees, in database terms:
//!
//! - an event is acknowledged when its transaction has committed: one
//!   transaction per event under `--durability event` (the default), one per
//!   turn under `turn`; under `none` the commit does not wait for the WAL
//!   flush (`synchronous_commit = off` on that connection). The default
//!   assumes the server's `synchronous_commit` is `on` (or `remote_*` on a
//!   replicated server), PostgreSQL's default: then a committed event
//!   survives a crash of the server;
//! - one live writer per session across hosts: the writer holds a session
//!   advisory lock on its own connection; a second writer is refused with the
//!   holder's application name (`cordis@<host> pid <pid>`); a writer that
//!   dies drops its connection, and the server releases the lock;
//! - reading a session gives the same lines a file would, and the host
//!   replays them exactly as it replays a file (owned events validated by
//!   their owners, structure rules checked).
//!
//! The connection URL comes from an environment variable named in the
//! config (`urlEnv`), or from `url` when it carries no password; it is never
//! printed with its password.

use std::path::Path;
use std::sync::Mutex;

use postgres::{Client, NoTls};
use serde::Deserialize;
use serde_json::Value;

use crate::event::{Event, Header};

use super::{parse_log, Durability, Follower, LogWriter, ReadLog, SessionStore, StoreError};
use cordis_sync::LockExt;

/// The builtin name of this store (`cordis:session-postgres` also works).
pub const BUILTIN: &str = "session-postgres";

fn default_schema() -> String {
    "cordis".into()
}

/// The config of the PostgreSQL store: `{url | urlEnv, schema}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PostgresConfig {
    /// A connection URL without a password
    /// (`postgres://cordis@db.internal/agents`).
    #[serde(default)]
    pub url: Option<String>,
    /// The environment variable holding the connection URL (which may carry
    /// the password).
    #[serde(default)]
    pub url_env: Option<String>,
    /// The schema of the store's tables (default `cordis`): lower-case
    /// letters, digits and `_`, not starting with a digit.
    #[serde(default = "default_schema")]
    pub schema: String,
}

impl PostgresConfig {
    /// The JSON Schema of the config.
    pub fn schema() -> Value {
        serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "url": {"type": "string", "minLength": 1, "description": "connection URL without a password"},
                "urlEnv": {"type": "string", "minLength": 1, "description": "environment variable holding the connection URL"},
                "schema": {"type": "string", "pattern": "^[a-z_][a-z0-9_]{0,62}$", "default": "cordis"}
            }
        })
    }

    /// Checks that exactly one of `url` and `urlEnv` is given and that
    /// `url` carries no password (what can be checked without the
    /// environment).
    ///
    /// # Errors
    /// A message saying what to change.
    pub fn check(&self) -> Result<(), String> {
        match (&self.url, &self.url_env) {
            (Some(_), Some(_)) => Err("give `url` or `urlEnv`, not both".into()),
            (None, None) => Err("give `urlEnv` (the environment variable holding the connection URL) or `url`".into()),
            (Some(_), None) => self.resolve_url().map(drop),
            (None, Some(_)) => Ok(()),
        }
    }

    /// The connection URL: from the environment variable, or `url` when it
    /// carries no password.
    ///
    /// # Errors
    /// A message naming the variable or the problem, never the password.
    pub fn resolve_url(&self) -> Result<String, String> {
        match (&self.url, &self.url_env) {
            (Some(_), Some(_)) => Err("give `url` or `urlEnv`, not both".into()),
            (None, None) => Err("give `urlEnv` (the environment variable holding the connection URL) or `url`".into()),
            (None, Some(var)) => std::env::var(var).map_err(|_| format!("the environment variable `{var}` (urlEnv) is not set")),
            (Some(url), None) => {
                let config: postgres::Config = url.parse().map_err(|e| format!("`url` is not a PostgreSQL connection URL: {e}"))?;
                if config.get_password().is_some() {
                    return Err("`url` carries a password: put the URL in an environment variable and name it with `urlEnv`, so that the password is never in the composition".into());
                }
                Ok(url.clone())
            }
        }
    }
}

/// The migrations, in order; each runs once per schema, in a transaction.
/// `{s}` is the quoted schema.
const MIGRATIONS: [(i32, &str, &str); 1] = [(
    1,
    "sessions and events, contiguous seq, notifications",
    r#"
CREATE TABLE {s}.sessions (
    id text PRIMARY KEY,
    header text NOT NULL,
    created_at bigint NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {s}.events (
    session_id text NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
    seq bigint NOT NULL CHECK (seq >= 0),
    time bigint NOT NULL,
    type text NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE FUNCTION {s}.events_contiguous() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    due bigint;
BEGIN
    SELECT COALESCE(max(seq) + 1, 0) INTO due FROM {s}.events WHERE session_id = NEW.session_id;
    IF NEW.seq <> due THEN
        RAISE EXCEPTION 'session %: seq % does not follow the stored events (% is due)', NEW.session_id, NEW.seq, due
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$fn$;
CREATE TRIGGER events_contiguous BEFORE INSERT ON {s}.events
    FOR EACH ROW EXECUTE FUNCTION {s}.events_contiguous();
CREATE FUNCTION {s}.events_notify() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify({channel}, d.session_id) FROM (SELECT DISTINCT session_id FROM new_rows) d;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER events_notify AFTER INSERT ON {s}.events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {s}.events_notify();
"#,
)];

/// A PostgreSQL session store.
pub struct PostgresStore {
    url: String,
    schema: String,
    /// Host, port, database and user, for messages (never the password).
    shown: String,
    /// A shared connection for reading and listing.
    reader: Mutex<Option<Client>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("store", &self.shown).finish_non_exhaustive()
    }
}

fn valid_schema(schema: &str) -> bool {
    let mut chars = schema.chars();
    schema.len() <= 63
        && chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Who this process is, as other writers see it.
fn application_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "?".into());
    format!("cordis@{host} pid {}", std::process::id())
}

impl PostgresStore {
    /// Connects to the database at `url`, creating or upgrading the tables
    /// in `schema` (migrations run once, under a lock, whoever starts first).
    ///
    /// # Errors
    /// [`StoreError::Database`] (the message never holds the password).
    pub fn connect(url: &str, schema: &str) -> Result<PostgresStore, StoreError> {
        let config: postgres::Config =
            url.parse().map_err(|e| StoreError::Database { store: "postgres".into(), detail: format!("bad connection URL: {e}") })?;
        let shown = describe(&config, schema);
        if !valid_schema(schema) {
            return Err(StoreError::Database { store: shown, detail: format!("`{schema}` is not a schema name this store accepts (a-z, 0-9, _)") });
        }
        let store = PostgresStore { url: url.to_string(), schema: schema.to_string(), shown, reader: Mutex::new(None) };
        let mut client = store.client()?;
        store.migrate(&mut client)?;
        *store.reader.lock_or_recover() = Some(client);
        Ok(store)
    }

    fn db(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Database { store: self.shown.clone(), detail: e.to_string() }
    }

    fn pg(&self, e: postgres::Error) -> StoreError {
        let detail = match e.as_db_error() {
            Some(db) => db.message().to_string(),
            None => e.to_string(),
        };
        StoreError::Database { store: self.shown.clone(), detail }
    }

    fn client(&self) -> Result<Client, StoreError> {
        connect(&self.url).map_err(|e| self.pg(e))
    }

    fn quoted(&self) -> String {
        format!("\"{}\"", self.schema)
    }

    fn channel(&self) -> String {
        format!("cordis:{}", self.schema)
    }

    fn migrate(&self, client: &mut Client) -> Result<(), StoreError> {
        let s = self.quoted();
        let mut tx = client.transaction().map_err(|e| self.pg(e))?;
        // One migrator at a time, across hosts.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext('cordis-migrate'), hashtext($1))", &[&self.schema]).map_err(|e| self.pg(e))?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {s}; CREATE TABLE IF NOT EXISTS {s}.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());"
        ))
        .map_err(|e| self.pg(e))?;
        let done: Vec<i32> =
            tx.query(&format!("SELECT version FROM {s}.schema_migrations"), &[]).map_err(|e| self.pg(e))?.iter().map(|r| r.get(0)).collect();
        if let Some(newer) = done.iter().find(|v| **v > MIGRATIONS.len() as i32) {
            return Err(self.db(format!("the schema is at migration {newer}, newer than this host knows ({}); upgrade cordis", MIGRATIONS.len())));
        }
        for (version, name, sql) in MIGRATIONS {
            if done.contains(&version) {
                continue;
            }
            let channel = format!("'{}'", self.channel());
            tx.batch_execute(&sql.replace("{s}", &s).replace("{channel}", &channel)).map_err(|e| self.pg(e))?;
            tx.execute(&format!("INSERT INTO {s}.schema_migrations (version, name) VALUES ($1, $2)"), &[&version, &name]).map_err(|e| self.pg(e))?;
        }
        tx.commit().map_err(|e| self.pg(e))
    }

    /// Runs `f` on the shared reading connection, reconnecting once when
    /// the connection was lost.
    fn with_reader<T>(&self, f: impl Fn(&mut Client) -> Result<T, postgres::Error>) -> Result<T, StoreError> {
        let mut guard = self.reader.lock_or_recover();
        if guard.as_ref().is_none_or(Client::is_closed) {
            *guard = Some(self.client()?);
        }
        let Some(client) = guard.as_mut() else { return Err(self.db("no connection")) };
        match f(client) {
            Ok(v) => Ok(v),
            Err(e) if client.is_closed() => {
                let mut fresh = self.client().map_err(|_| self.pg(e))?;
                let v = f(&mut fresh).map_err(|e| self.pg(e));
                *guard = Some(fresh);
                v
            }
            Err(e) => Err(self.pg(e)),
        }
    }

    /// Takes session `id`'s writer lock on `client`, or names who holds it.
    fn lock(&self, client: &mut Client, id: &str) -> Result<(), StoreError> {
        if try_lock(client, &self.schema, id).map_err(|e| self.pg(e))? {
            return Ok(());
        }
        let holder = client
            .query_opt(
                "SELECT a.application_name, COALESCE(host(a.client_addr), 'local socket') FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
                 WHERE l.locktype = 'advisory' AND l.granted AND l.classid::int = hashtext($1) AND l.objid::int = hashtext($2) LIMIT 1",
                &[&self.schema, &id],
            )
            .map_err(|e| self.pg(e))?
            .map(|r| format!("{} (connected from {})", r.get::<_, String>(0), r.get::<_, String>(1)))
            .unwrap_or_else(|| "another connection".into());
        Err(StoreError::Held { id: id.to_string(), holder })
    }

    fn read_with(&self, client: &mut Client, id: &str) -> Result<ReadLog, StoreError> {
        let s = self.quoted();
        let header: Option<String> =
            client.query_opt(&format!("SELECT header FROM {s}.sessions WHERE id = $1"), &[&id]).map_err(|e| self.pg(e))?.map(|r| r.get(0));
        let Some(header) = header else { return Err(StoreError::NotFound { id: id.to_string(), dir: self.location() }) };
        let mut text = header.into_bytes();
        text.push(b'\n');
        for row in client.query(&format!("SELECT line FROM {s}.events WHERE session_id = $1 ORDER BY seq"), &[&id]).map_err(|e| self.pg(e))? {
            text.extend_from_slice(row.get::<_, &str>(0).as_bytes());
            text.push(b'\n');
        }
        parse_log(&text, Path::new(&format!("{}/{id}", self.location())))
    }

    fn writer(&self, mut client: Client, id: &str, durability: Durability) -> Result<PostgresWriter, StoreError> {
        let insert = prepare_writer(&mut client, &self.schema, durability).map_err(|e| self.pg(e))?;
        Ok(PostgresWriter {
            client,
            insert,
            url: self.url.clone(),
            schema: self.schema.clone(),
            id: id.to_string(),
            shown: self.shown.clone(),
            label: std::path::PathBuf::from(format!("{}/{id}", self.location())),
            durability,
            in_transaction: false,
        })
    }
}

/// A connection to `url`, named with this process's [`application_name`].
fn connect(url: &str) -> Result<Client, postgres::Error> {
    let mut config: postgres::Config = url.parse()?;
    config.application_name(&application_name());
    config.connect_timeout(std::time::Duration::from_secs(10));
    config.connect(NoTls)
}

/// Tries to take session `id`'s writer lock (a session advisory lock) on
/// `client`; `false` when another connection holds it.
fn try_lock(client: &mut Client, schema: &str, id: &str) -> Result<bool, postgres::Error> {
    Ok(client.query_one("SELECT pg_try_advisory_lock(hashtext($1), hashtext($2))", &[&schema, &id])?.get(0))
}

/// Readies a writer's connection: `synchronous_commit = off` under
/// [`Durability::None`], and the event insert prepared.
fn prepare_writer(client: &mut Client, schema: &str, durability: Durability) -> Result<postgres::Statement, postgres::Error> {
    if durability == Durability::None {
        client.batch_execute("SET synchronous_commit = off")?;
    }
    client.prepare(&format!("INSERT INTO \"{schema}\".events (session_id, seq, time, type, line) VALUES ($1, $2, $3, $4, $5)"))
}

fn describe(config: &postgres::Config, schema: &str) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().or(config.get_user()).unwrap_or("postgres");
    format!("postgres {host}:{port}/{db} schema {schema}")
}

impl SessionStore for PostgresStore {
    fn location(&self) -> String {
        self.shown.clone()
    }

    fn check_id(&self, id: &str) -> Result<(), StoreError> {
        super::check_id(id)
    }

    fn create(&self, header: &Header, durability: Durability) -> Result<Box<dyn LogWriter>, StoreError> {
        self.check_id(&header.id)?;
        let mut client = self.client()?;
        self.lock(&mut client, &header.id)?;
        let line = serde_json::to_string(header).map_err(|e| self.db(e))?;
        let inserted = client
            .execute(
                &format!("INSERT INTO {}.sessions (id, header, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING", self.quoted()),
                &[&header.id, &line, &(header.created_at as i64)],
            )
            .map_err(|e| self.pg(e))?;
        if inserted == 0 {
            return Err(StoreError::Exists(header.id.clone()));
        }
        Ok(Box::new(self.writer(client, &header.id, durability)?))
    }

    fn open_for_append(&self, id: &str, durability: Durability) -> Result<(Box<dyn LogWriter>, ReadLog), StoreError> {
        self.check_id(id)?;
        let mut client = self.client()?;
        self.lock(&mut client, id)?;
        let log = self.read_with(&mut client, id)?;
        Ok((Box::new(self.writer(client, id, durability)?), log))
    }

    fn read(&self, id: &str) -> Result<ReadLog, StoreError> {
        self.check_id(id)?;
        let mut guard = self.reader.lock_or_recover();
        if guard.as_ref().is_none_or(Client::is_closed) {
            *guard = Some(self.client()?);
        }
        let Some(client) = guard.as_mut() else { return Err(self.db("no connection")) };
        self.read_with(client, id)
    }

    fn write_whole(&self, header: &Header, events: &[Event]) -> Result<String, StoreError> {
        use postgres::binary_copy::BinaryCopyInWriter;
        use postgres::types::Type;
        self.check_id(&header.id)?;
        let s = self.quoted();
        let mut client = self.client()?;
        self.lock(&mut client, &header.id)?;
        let line = serde_json::to_string(header).map_err(|e| self.db(e))?;
        let mut tx = client.transaction().map_err(|e| self.pg(e))?;
        let inserted = tx
            .execute(
                &format!("INSERT INTO {s}.sessions (id, header, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"),
                &[&header.id, &line, &(header.created_at as i64)],
            )
            .map_err(|e| self.pg(e))?;
        if inserted == 0 {
            return Err(StoreError::Exists(header.id.clone()));
        }
        let sink = tx.copy_in(&format!("COPY {s}.events (session_id, seq, time, type, line) FROM STDIN (FORMAT binary)")).map_err(|e| self.pg(e))?;
        let mut writer = BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::INT8, Type::INT8, Type::TEXT, Type::TEXT]);
        for event in events {
            let line = event.to_line();
            let line = line.trim_end_matches('\n');
            writer.write(&[&header.id, &(event.seq as i64), &event.time, &event.kind, &line]).map_err(|e| self.pg(e))?;
        }
        writer.finish().map_err(|e| self.pg(e))?;
        tx.commit().map_err(|e| self.pg(e))?;
        Ok(format!("{}/{}", self.location(), header.id))
    }

    fn ids(&self) -> Result<Vec<String>, StoreError> {
        let sql = format!("SELECT id FROM {}.sessions ORDER BY id", self.quoted());
        self.with_reader(|c| Ok(c.query(&sql, &[])?.iter().map(|r| r.get(0)).collect()))
    }

    fn contains(&self, _: &Path) -> bool {
        false
    }

    fn follow(&self, id: &str) -> Result<Box<dyn Follower>, StoreError> {
        let mut client = self.client()?;
        let exists = client.query_opt(&format!("SELECT 1 FROM {}.sessions WHERE id = $1", self.quoted()), &[&id]).map_err(|e| self.pg(e))?.is_some();
        if !exists {
            return Err(StoreError::NotFound { id: id.to_string(), dir: self.location() });
        }
        client.batch_execute(&format!("LISTEN \"{}\"", self.channel())).map_err(|e| self.pg(e))?;
        Ok(Box::new(PostgresFollower { client, id: id.to_string(), shown: self.shown.clone(), first: true }))
    }
}

/// Follows a session through `LISTEN`.
struct PostgresFollower {
    client: Client,
    id: String,
    shown: String,
    first: bool,
}

impl Follower for PostgresFollower {
    fn wait(&mut self, timeout: std::time::Duration) -> Result<bool, StoreError> {
        use postgres::fallible_iterator::FallibleIterator;
        if std::mem::take(&mut self.first) {
            return Ok(true);
        }
        let deadline = std::time::Instant::now() + timeout;
        let mut notifications = self.client.notifications();
        let mut iter = notifications.timeout_iter(timeout);
        loop {
            match iter.next() {
                Ok(Some(n)) if n.payload() == self.id => return Ok(true),
                Ok(Some(_)) if std::time::Instant::now() < deadline => continue,
                Ok(_) => return Ok(false),
                Err(e) => return Err(StoreError::Database { store: self.shown.clone(), detail: e.to_string() }),
            }
        }
    }
}

/// The appending end of one session in the database; its connection holds
/// the session's writer lock.
pub struct PostgresWriter {
    client: Client,
    insert: postgres::Statement,
    /// For reconnecting after the server went away.
    url: String,
    schema: String,
    id: String,
    shown: String,
    label: std::path::PathBuf,
    durability: Durability,
    in_transaction: bool,
}

impl std::fmt::Debug for PostgresWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresWriter").field("session", &self.id).finish_non_exhaustive()
    }
}

impl PostgresWriter {
    fn err(&self, e: postgres::Error) -> StoreError {
        let detail = match e.as_db_error() {
            Some(db) => db.message().to_string(),
            None => e.to_string(),
        };
        StoreError::Database { store: self.shown.clone(), detail }
    }

    fn reconnect(&mut self) -> Result<(), String> {
        let mut client = connect(&self.url).map_err(|e| e.to_string())?;
        if !try_lock(&mut client, &self.schema, &self.id).map_err(|e| e.to_string())? {
            return Err(format!("another writer took session `{}` while the connection was down", self.id));
        }
        self.insert = prepare_writer(&mut client, &self.schema, self.durability).map_err(|e| e.to_string())?;
        self.client = client;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if std::mem::take(&mut self.in_transaction) {
            self.client.batch_execute("COMMIT").map_err(|e| self.err(e))?;
        }
        Ok(())
    }
}

impl LogWriter for PostgresWriter {
    fn append(&mut self, event: &Event) -> Result<(), StoreError> {
        if self.durability != Durability::Event && !self.in_transaction {
            self.client.batch_execute("BEGIN").map_err(|e| self.err(e))?;
            self.in_transaction = true;
        }
        let line = event.to_line();
        let line = line.trim_end_matches('\n');
        let insert = self.insert.clone();
        let result = self.client.execute(&insert, &[&self.id, &(event.seq as i64), &event.time, &event.kind, &line]);
        if let Err(e) = result {
            if std::mem::take(&mut self.in_transaction) {
                let _ = self.client.batch_execute("ROLLBACK");
                return Err(self.err(e));
            }
            if !self.client.is_closed() {
                return Err(self.err(e));
            }
            // The server went away (a restart, a lost connection): connect
            // again, take the session's lock again (another writer may
            // have it by now), and write the event unless the lost commit
            // went through.
            self.reconnect().map_err(|again| StoreError::Database {
                store: self.shown.clone(),
                detail: format!("{}; connecting again failed: {again}", self.err(e)),
            })?;
            let due: i64 = self
                .client
                .query_one(&format!("SELECT COALESCE(max(seq) + 1, 0) FROM \"{}\".events WHERE session_id = $1", self.schema), &[&self.id])
                .map_err(|e| self.err(e))?
                .get(0);
            if due == event.seq as i64 + 1 {
                return Ok(());
            }
            let insert = self.insert.clone();
            self.client.execute(&insert, &[&self.id, &(event.seq as i64), &event.time, &event.kind, &line]).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    fn end_turn(&mut self) -> Result<(), StoreError> {
        self.commit()
    }

    fn path(&self) -> &Path {
        &self.label
    }
}

impl Drop for PostgresWriter {
    fn drop(&mut self) {
        if let Err(e) = self.commit() {
            tracing::warn!("{e}");
        }
    }
}
