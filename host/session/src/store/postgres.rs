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
//!   one + 1 keep every session's `seq` contiguous, whoever writes. Every
//!   insert is followed by a `NOTIFY` on channel `cordis:<schema>` with the
//!   session id (what `cordis session watch` listens to): a writer of this
//!   store sends it from a connection of its own once the append has
//!   committed (the store's notifier thread), and a statement trigger
//!   sends it for every other insert (an import, another client). A `NOTIFY` inside the
//!   appending transaction would hold PostgreSQL's notification lock until
//!   that transaction's WAL flush, so concurrent writers could no longer
//!   share a flush (measured: 8 writers on 8 sessions committed no faster
//!   than 1).
//!
//! - `writers(session_id, token, holder, backend_pid, backend_start,
//!   expires_at)`: the writer lease of each session being written (see
//!   below); `events.writer` is the token of the writer that appended the
//!   row.
//!
//! Guarantees, in database terms:
//!
//! - an event is acknowledged when its transaction has committed. Every
//!   event is committed before its append returns, under every
//!   [`Durability`]: under `event` (the default) the commit waits for the
//!   WAL flush; under `turn` it does not (`synchronous_commit = off` for
//!   that transaction), and the end of each turn is a commit that waits, so
//!   a crash of the process loses nothing and a crash of the server may lose
//!   the current turn; under `none` nothing waits. The default assumes the
//!   server's `synchronous_commit` is `on` (or `remote_*` on a replicated
//!   server), PostgreSQL's default;
//! - an append whose commit is uncertain (the connection was lost while it
//!   ran) is settled by the event's identity, never by counting rows: after
//!   reconnecting, the row at the event's `seq` either carries this writer's
//!   token (it was written), carries another's (it was not, and the caller
//!   is told), or is absent (it is written now, if this writer still holds
//!   the session);
//! - one live writer per session across hosts, also through a connection
//!   pooler in transaction mode: a writer holds a lease row with a random
//!   token, checked (and row-locked) inside every append's transaction, and
//!   renewed every third of `leaseSeconds` from a heartbeat. Another writer
//!   may take the session only when the lease has run out or, for a writer
//!   connected straight to the server, when the server process that took
//!   the lease is gone (so a killed writer's session is free at once). A
//!   writer that loses its lease writes nothing more and says so. Nothing
//!   session-scoped is kept on a connection: no advisory locks, no named
//!   prepared statements (every statement is sent unnamed), no `SET`;
//! - reading a session gives the same lines a file would, and the host
//!   replays them exactly as it replays a file (owned events validated by
//!   their owners, structure rules checked).
//!
//! Followers ([`SessionStore::follow`], [`SessionStore::follow_all`]) listen
//! for the notifications on a direct connection and also poll, so that a
//! notification lost with a connection, or a pooler that does not pass
//! them on, only delays what they show.
//!
//! The connection URL comes from an environment variable named in the
//! config (`urlEnv`), or from `url` when it carries no password; it is never
//! printed with its password.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::types::Type;
use postgres::{Client, GenericClient, NoTls};
use serde::Deserialize;
use serde_json::Value;

use crate::event::{Event, Header};

use super::jsonl::{parse_appended, parse_whole, LineState};
use super::{Appended, Durability, Follower, LogWriter, Mark, Position, ReadLog, SessionStore, Since, StoreError, StoreFollower};
use cordis_sync::LockExt;

/// The builtin name of this store (`cordis:session-postgres` also works).
pub const BUILTIN: &str = "session-postgres";

fn default_schema() -> String {
    "cordis".into()
}

/// The config of the PostgreSQL store: `{url | urlEnv, schema, leaseSeconds}`.
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
    /// How long a writer's lease lasts without renewal, in seconds (default
    /// 15, 2 to 3600): how soon another host may take a session whose
    /// writer vanished without the server noticing (a writer behind a
    /// connection pooler, a machine that went away).
    #[serde(default = "default_lease_seconds")]
    pub lease_seconds: u64,
}

fn default_lease_seconds() -> u64 {
    15
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
                "schema": {"type": "string", "pattern": "^[a-z_][a-z0-9_]{0,62}$", "default": "cordis"},
                "leaseSeconds": {"type": "integer", "minimum": 2, "maximum": 3600, "default": 15, "description": "how long a writer's lease lasts without renewal"}
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
/// `{s}` is the quoted schema, `{channel}` the notification channel as a
/// string literal.
const MIGRATIONS: [(i32, &str, &str); 3] = [
    (
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
    ),
    (
        2,
        "writer leases, the writer of each event, a notification channel that fits",
        r#"
ALTER TABLE {s}.events ADD COLUMN writer text;
CREATE TABLE {s}.writers (
    session_id text PRIMARY KEY REFERENCES {s}.sessions (id) ON DELETE CASCADE,
    token text NOT NULL,
    holder text NOT NULL,
    backend_pid integer,
    backend_start timestamptz,
    expires_at timestamptz NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION {s}.events_notify() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify({channel}, d.session_id) FROM (SELECT DISTINCT session_id FROM new_rows) d;
    RETURN NULL;
END
$fn$;
CREATE FUNCTION {s}.take_writer(p_session text, p_token text, p_holder text, p_lease_ms bigint, p_direct boolean)
RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
    w record;
    v_pid integer := CASE WHEN p_direct THEN pg_backend_pid() END;
    v_started timestamptz := CASE WHEN p_direct THEN (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()) END;
BEGIN
    LOOP
        SELECT * INTO w FROM {s}.writers WHERE session_id = p_session FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO {s}.writers (session_id, token, holder, backend_pid, backend_start, expires_at)
            VALUES (p_session, p_token, p_holder, v_pid, v_started, clock_timestamp() + p_lease_ms * interval '1 millisecond')
            ON CONFLICT (session_id) DO NOTHING;
            IF FOUND THEN
                RETURN NULL;
            END IF;
        ELSE
            IF w.token <> p_token AND w.expires_at > clock_timestamp() AND (w.backend_pid IS NULL OR EXISTS (
                SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.backend_pid AND a.backend_start = w.backend_start)) THEN
                RETURN w.holder;
            END IF;
            UPDATE {s}.writers SET token = p_token, holder = p_holder, backend_pid = v_pid, backend_start = v_started,
                expires_at = clock_timestamp() + p_lease_ms * interval '1 millisecond', taken_at = now()
            WHERE session_id = p_session;
            RETURN NULL;
        END IF;
    END LOOP;
END
$fn$;
CREATE FUNCTION {s}.renew_writer(p_session text, p_token text, p_lease_ms bigint, p_direct boolean, p_sync boolean)
RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
    IF NOT p_sync THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    UPDATE {s}.writers SET expires_at = clock_timestamp() + p_lease_ms * interval '1 millisecond',
        backend_pid = CASE WHEN p_direct THEN pg_backend_pid() END,
        backend_start = CASE WHEN p_direct THEN (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()) END
    WHERE session_id = p_session AND token = p_token;
    RETURN FOUND;
END
$fn$;
CREATE FUNCTION {s}.append_event(p_session text, p_seq bigint, p_time bigint, p_type text, p_line text, p_token text, p_sync boolean)
RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
    IF NOT p_sync THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    PERFORM 1 FROM {s}.writers WHERE session_id = p_session AND token = p_token FOR SHARE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO {s}.events (session_id, seq, time, type, line, writer) VALUES (p_session, p_seq, p_time, p_type, p_line, p_token);
    RETURN true;
END
$fn$;
"#,
    ),
    (
        3,
        "writers notify after their commit",
        r#"
CREATE OR REPLACE FUNCTION {s}.events_notify() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF current_setting('cordis.writer_notifies', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify({channel}, d.session_id) FROM (SELECT DISTINCT session_id FROM new_rows) d;
    RETURN NULL;
END
$fn$;
CREATE FUNCTION {s}.append_event(p_session text, p_seq bigint, p_time bigint, p_type text, p_line text, p_token text, p_sync boolean, p_notify_after boolean)
RETURNS boolean LANGUAGE plpgsql AS $fn$
BEGIN
    IF p_notify_after THEN
        PERFORM set_config('cordis.writer_notifies', 'on', true);
    END IF;
    RETURN {s}.append_event(p_session, p_seq, p_time, p_type, p_line, p_token, p_sync);
END
$fn$;
CREATE FUNCTION {s}.notify_sessions(p_ids text[]) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM pg_notify({channel}, id) FROM unnest(p_ids) id;
END
$fn$;
"#,
    ),
];

/// A PostgreSQL session store.
pub struct PostgresStore {
    url: String,
    schema: String,
    /// Host, port, database and user, for messages (never the password).
    shown: String,
    /// How long a writer's lease lasts without renewal.
    lease: Duration,
    /// Whether connections reach the server itself rather than a pooler or
    /// proxy: then a writer's lease also ends with its server process, and
    /// followers listen for notifications.
    direct: bool,
    /// A shared connection for reading and listing.
    reader: Mutex<Option<Client>>,
    /// Where writers send the sessions they appended to, started with the
    /// first writer.
    notifier: Mutex<Option<std::sync::mpsc::Sender<String>>>,
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

/// The notification channel of `schema`: `cordis:<schema>` when that fits
/// PostgreSQL's 63-byte identifier limit, else the schema's first 38
/// characters and a hash of the whole name (`cordis:<prefix>~<16 hex>`), so
/// every host derives the same channel.
pub fn channel_of(schema: &str) -> String {
    let plain = format!("cordis:{schema}");
    if plain.len() <= 63 {
        return plain;
    }
    // FNV-1a, 64 bits: stable across hosts and builds.
    let hash = schema.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("cordis:{}~{hash:016x}", &schema[..38])
}

/// One event's row, as [`append_event`] writes it.
#[derive(Debug, Clone, Copy)]
pub struct AppendRow<'a> {
    /// The session's id.
    pub session: &'a str,
    /// The event's `seq`.
    pub seq: i64,
    /// The event's time, milliseconds since the Unix epoch.
    pub time: i64,
    /// The event's type (`todo/write`).
    pub kind: &'a str,
    /// The event's JSON line.
    pub line: &'a str,
}

/// Appends `row` the way a writer of this store does: one call of the
/// schema's `append_event` function, sent unnamed (so it also works
/// through a transaction pooler), which checks and locks the writer lease
/// `token` and inserts the row; the commit waits for its flush when
/// `sync`, and the writer notifies followers after it. `schema` is the
/// schema as SQL names it (`"cordis"`).
///
/// # Errors
/// The database's error. `Ok(false)` when `token` does not hold the
/// session's writer lease.
pub fn append_event(client: &mut Client, schema: &str, token: &str, row: &AppendRow<'_>, sync: bool) -> Result<bool, postgres::Error> {
    let reply = client.query_typed_one(
        &format!("SELECT {schema}.append_event($1, $2, $3, $4, $5, $6, $7, true)"),
        &[
            (&row.session, Type::TEXT),
            (&row.seq, Type::INT8),
            (&row.time, Type::INT8),
            (&row.kind, Type::TEXT),
            (&row.line, Type::TEXT),
            (&token, Type::TEXT),
            (&sync, Type::BOOL),
        ],
    )?;
    Ok(reply.get(0))
}

/// Who this process is, as other writers see it.
fn application_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "?".into());
    format!("cordis@{host} pid {}", std::process::id())
}

/// The message of a PostgreSQL error: the server's own words for a database
/// error, else the client's.
fn message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}

/// Whether `e` means the connection is gone (so the outcome of what was
/// sent is unknown), rather than the server refusing the statement: the
/// client's own I/O errors, and the SQLSTATEs of a lost or shut-down
/// server (class 08, and 57P01-57P03, which a pooler also sends when its
/// server connection dies).
fn lost_connection(client: &Client, e: &postgres::Error) -> bool {
    match e.as_db_error() {
        None => true,
        Some(db) => {
            let code = db.code().code();
            e.is_closed() || client.is_closed() || code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
    }
}

impl PostgresStore {
    /// Connects to the database at `url`, creating or upgrading the tables
    /// in `schema` (migrations run once, under a lock, whoever starts
    /// first). Writers' leases last `lease` without renewal.
    ///
    /// # Errors
    /// [`StoreError::Database`] (the message never holds the password).
    pub fn connect(url: &str, schema: &str, lease: Duration) -> Result<PostgresStore, StoreError> {
        let config: postgres::Config =
            url.parse().map_err(|e| StoreError::Database { store: "postgres".into(), detail: format!("bad connection URL: {e}") })?;
        let shown = describe(&config, schema);
        if !valid_schema(schema) {
            return Err(StoreError::Database { store: shown, detail: format!("`{schema}` is not a schema name this store accepts (a-z, 0-9, _)") });
        }
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let mut store = PostgresStore {
            url: url.to_string(),
            schema: schema.to_string(),
            shown,
            lease,
            direct: false,
            reader: Mutex::new(None),
            notifier: Mutex::new(None),
        };
        let mut client = store.client()?;
        store.migrate(&mut client)?;
        // The port the server itself serves this connection on: another
        // port than the one dialled means something stands in between.
        let served: i32 =
            client.query_typed_one("SELECT COALESCE(inet_server_port(), current_setting('port')::int)", &[]).map_err(|e| store.pg(e))?.get(0);
        store.direct = i32::from(port) == served;
        *store.reader.lock_or_recover() = Some(client);
        Ok(store)
    }

    fn db(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Database { store: self.shown.clone(), detail: e.to_string() }
    }

    fn pg(&self, e: postgres::Error) -> StoreError {
        StoreError::Database { store: self.shown.clone(), detail: message(&e) }
    }

    fn client(&self) -> Result<Client, StoreError> {
        connect(&self.url).map_err(|e| self.pg(e))
    }

    fn quoted(&self) -> String {
        format!("\"{}\"", self.schema)
    }

    fn channel(&self) -> String {
        channel_of(&self.schema)
    }

    fn migrate(&self, client: &mut Client) -> Result<(), StoreError> {
        let s = self.quoted();
        let mut tx = client.transaction().map_err(|e| self.pg(e))?;
        // One migrator at a time, across hosts.
        tx.query_typed("SELECT pg_advisory_xact_lock(hashtext('cordis-migrate'), hashtext($1))", &[(&self.schema, Type::TEXT)])
            .map_err(|e| self.pg(e))?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {s}; CREATE TABLE IF NOT EXISTS {s}.schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());"
        ))
        .map_err(|e| self.pg(e))?;
        let done: Vec<i32> =
            tx.query_typed(&format!("SELECT version FROM {s}.schema_migrations"), &[]).map_err(|e| self.pg(e))?.iter().map(|r| r.get(0)).collect();
        if let Some(newer) = done.iter().find(|v| **v > MIGRATIONS.len() as i32) {
            return Err(self.db(format!("the schema is at migration {newer}, newer than this host knows ({}); upgrade cordis", MIGRATIONS.len())));
        }
        for (version, name, sql) in MIGRATIONS {
            if done.contains(&version) {
                continue;
            }
            let channel = format!("'{}'", self.channel());
            tx.batch_execute(&sql.replace("{s}", &s).replace("{channel}", &channel)).map_err(|e| self.pg(e))?;
            tx.query_typed(
                &format!("INSERT INTO {s}.schema_migrations (version, name) VALUES ($1, $2)"),
                &[(&version, Type::INT4), (&name, Type::TEXT)],
            )
            .map_err(|e| self.pg(e))?;
        }
        tx.commit().map_err(|e| self.pg(e))
    }

    /// Runs `f` on the shared reading connection; when the database fails
    /// it (a server restart, a killed backend), runs it once more on a new
    /// connection, which then replaces the old one.
    fn with_reader<T>(&self, f: impl Fn(&mut Client) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut guard = self.reader.lock_or_recover();
        if guard.as_ref().is_none_or(Client::is_closed) {
            *guard = Some(self.client()?);
        }
        let Some(client) = guard.as_mut() else { return Err(self.db("no connection")) };
        match f(client) {
            Ok(v) => Ok(v),
            // Reads change nothing: one more try on a new connection is
            // safe whatever failed (a pooler reports its lost server
            // connection as a server error on a client connection that
            // stays open).
            Err(e @ StoreError::Database { .. }) => {
                let mut fresh = self.client().map_err(|_| e)?;
                let v = f(&mut fresh);
                *guard = Some(fresh);
                v
            }
            Err(e) => Err(e),
        }
    }

    /// Takes session `id`'s writer lease for `token` on `client`, or names
    /// who holds it.
    fn take(&self, client: &mut Client, id: &str, token: &str) -> Result<(), StoreError> {
        match take_writer(client, &self.quoted(), id, token, self.lease_ms(), self.direct).map_err(|e| self.pg(e))? {
            None => Ok(()),
            Some(holder) => Err(StoreError::Held { id: id.to_string(), holder }),
        }
    }

    fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }

    fn read_with(&self, client: &mut Client, id: &str) -> Result<ReadLog, StoreError> {
        self.read_whole_with(client, id).map(|(log, _)| log)
    }

    /// Reads session `id` whole: the log, and the position after it.
    fn read_whole_with(&self, client: &mut Client, id: &str) -> Result<(ReadLog, Position), StoreError> {
        let s = self.quoted();
        let header: Option<(String, String)> = client
            .query_typed_opt(&format!("SELECT header, stored_at::text FROM {s}.sessions WHERE id = $1"), &[(&id, Type::TEXT)])
            .map_err(|e| self.pg(e))?
            .map(|r| (r.get(0), r.get(1)));
        let Some((header, stored)) = header else { return Err(StoreError::NotFound { id: id.to_string(), dir: self.location() }) };
        let mut text = header.into_bytes();
        text.push(b'\n');
        let mut last_row = -1i64;
        for row in client
            .query_typed(&format!("SELECT seq, line FROM {s}.events WHERE session_id = $1 ORDER BY seq"), &[(&id, Type::TEXT)])
            .map_err(|e| self.pg(e))?
        {
            last_row = row.get(0);
            text.extend_from_slice(row.get::<_, &str>(1).as_bytes());
            text.push(b'\n');
        }
        let (log, lines) = parse_whole(&text, Path::new(&format!("{}/{id}", self.location())))?;
        let position = Position::of_whole(&log, Mark::Rows { row: last_row, line: lines.line, stored });
        Ok((log, position))
    }

    /// Reads the rows of session `id` after `after` (see
    /// [`SessionStore::read_since`]): the rows with a greater `seq` than
    /// the last row read (whether or not its line could be read), in one
    /// statement that also checks that the session's row is the one read
    /// before. Rows are never changed or removed once committed (only with
    /// their session), so the rows after a `seq` are exactly what was
    /// appended since it was read.
    fn read_since_with(&self, client: &mut Client, id: &str, after: &Position) -> Result<(Since, Position), StoreError> {
        let Mark::Rows { row: last, line, stored } = after.mark() else {
            let (log, position) = self.read_whole_with(client, id)?;
            return Ok((Since::Whole(log), position));
        };
        let s = self.quoted();
        let rows = client
            .query_typed(
                &format!(
                    "SELECT s.stored_at::text, e.seq, e.line FROM {s}.sessions s LEFT JOIN {s}.events e ON e.session_id = s.id AND e.seq > $2 \
                     WHERE s.id = $1 ORDER BY e.seq"
                ),
                &[(&id, Type::TEXT), (last, Type::INT8)],
            )
            .map_err(|e| self.pg(e))?;
        let Some(first) = rows.first() else { return Err(StoreError::NotFound { id: id.to_string(), dir: self.location() }) };
        if first.get::<_, &str>(0) != stored {
            let (log, position) = self.read_whole_with(client, id)?;
            return Ok((Since::Whole(log), position));
        }
        let mut text = Vec::new();
        let mut last_row = *last;
        for row in &rows {
            if let (Some(seq), Some(line)) = (row.get::<_, Option<i64>>(1), row.get::<_, Option<&str>>(2)) {
                last_row = seq;
                text.extend_from_slice(line.as_bytes());
                text.push(b'\n');
            }
        }
        let mut state = LineState::after(*line, after.events(), after.last_seq());
        // Every row is a whole line: nothing can be left open or torn.
        let read = parse_appended(&text, &mut state).unwrap_or_default();
        let appended = Appended { events: read.events, lines: read.lines, problems: read.problems, torn: read.torn };
        let position = after.advanced(&appended, Mark::Rows { row: last_row, line: state.line, stored: stored.clone() });
        Ok((Since::Appended(appended), position))
    }

    fn writer(&self, client: Client, id: &str, token: String, durability: Durability) -> PostgresWriter {
        let client = Arc::new(Mutex::new(client));
        let lost = Arc::new(Mutex::new(None));
        let heartbeat = Heartbeat::start(self, client.clone(), id, &token, lost.clone());
        PostgresWriter {
            client,
            url: self.url.clone(),
            schema: self.quoted(),
            id: id.to_string(),
            token,
            shown: self.shown.clone(),
            label: std::path::PathBuf::from(format!("{}/{id}", self.location())),
            durability,
            lease_ms: self.lease_ms(),
            direct: self.direct,
            lost,
            heartbeat: Some(heartbeat),
            notify: self.notifier(),
        }
    }

    /// The sender of the process's [`Notifier`] for this store, started
    /// now if it is not running.
    fn notifier(&self) -> std::sync::mpsc::Sender<String> {
        let mut notifier = self.notifier.lock_or_recover();
        if let Some(sender) = notifier.as_ref() {
            return sender.clone();
        }
        let sender = Notifier::start(self.url.clone(), self.quoted(), self.shown.clone());
        *notifier = Some(sender.clone());
        sender
    }
}

/// Sends the `NOTIFY` for each session a writer of this store appended to,
/// after the append has committed, from a connection of its own: one
/// statement for all the sessions changed since its last one, in a
/// transaction that does not wait for the WAL flush (a notification is not
/// data, and followers also poll). A change after a quiet spell is sent at
/// once; changes that follow within [`NOTIFY_EVERY`] of a send wait out
/// the rest of that time and go together, so a writer appending
/// back-to-back costs the server one notification per interval, not one
/// per event. A notification that cannot be sent (the
/// server is away) is dropped with one warning until sending works again;
/// followers see the change at their next poll. The thread ends when the
/// store and all its writers are gone.
struct Notifier;

/// The shortest time between two notifications sent by one [`Notifier`].
const NOTIFY_EVERY: Duration = Duration::from_millis(5);

impl Notifier {
    fn start(url: String, schema: String, shown: String) -> std::sync::mpsc::Sender<String> {
        let (sender, changed) = std::sync::mpsc::channel::<String>();
        let spawned = std::thread::Builder::new().name("cordis-pg-notify".into()).spawn(move || {
            let mut client: Option<Client> = None;
            let mut failing = false;
            let sql = format!("SELECT {schema}.notify_sessions($1)");
            let mut last: Option<Instant> = None;
            while let Ok(first) = changed.recv() {
                if let Some(rest) = last.and_then(|sent| NOTIFY_EVERY.checked_sub(sent.elapsed())) {
                    std::thread::sleep(rest);
                }
                let mut ids = std::collections::BTreeSet::from([first]);
                ids.extend(changed.try_iter());
                last = Some(Instant::now());
                let ids: Vec<String> = ids.into_iter().collect();
                let sent = match client.take().filter(|c| !c.is_closed()).map_or_else(|| connect(&url), Ok) {
                    Ok(mut c) => {
                        let sent = c.query_typed(&sql, &[(&ids, Type::TEXT_ARRAY)]).map(drop);
                        client = Some(c);
                        sent
                    }
                    Err(e) => Err(e),
                };
                match sent {
                    Ok(()) => failing = false,
                    Err(e) => {
                        if !failing {
                            tracing::warn!("{shown}: cannot notify followers of a change ({}); they see it at their next poll", message(&e));
                        }
                        failing = true;
                        client = None;
                    }
                }
            }
        });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the thread that notifies followers ({e}); they see changes at their next poll");
        }
        sender
    }
}

/// A connection to `url`, named with this process's [`application_name`].
fn connect(url: &str) -> Result<Client, postgres::Error> {
    let mut config: postgres::Config = url.parse()?;
    config.application_name(&application_name());
    config.connect_timeout(Duration::from_secs(10));
    config.connect(NoTls)
}

/// Takes session `id`'s writer lease for `token` (the `take_writer`
/// function, in `quoted_schema`): `None` when it is now `token`'s, else
/// who holds it.
fn take_writer(
    client: &mut impl GenericClient,
    quoted_schema: &str,
    id: &str,
    token: &str,
    lease_ms: i64,
    direct: bool,
) -> Result<Option<String>, postgres::Error> {
    Ok(client
        .query_typed_one(
            &format!("SELECT {quoted_schema}.take_writer($1, $2, $3, $4, $5)"),
            &[(&id, Type::TEXT), (&token, Type::TEXT), (&application_name(), Type::TEXT), (&lease_ms, Type::INT8), (&direct, Type::BOOL)],
        )?
        .get(0))
}

/// Renews `token`'s lease of session `id` for `lease_ms` (the
/// `renew_writer` function, in `quoted_schema`); `sync`: its commit waits
/// for the WAL flush. Whether the lease is still `token`'s.
fn renew_writer(
    client: &mut impl GenericClient,
    quoted_schema: &str,
    id: &str,
    token: &str,
    lease_ms: i64,
    direct: bool,
    sync: bool,
) -> Result<bool, postgres::Error> {
    Ok(client
        .query_typed_one(
            &format!("SELECT {quoted_schema}.renew_writer($1, $2, $3, $4, $5)"),
            &[(&id, Type::TEXT), (&token, Type::TEXT), (&lease_ms, Type::INT8), (&direct, Type::BOOL), (&sync, Type::BOOL)],
        )?
        .get(0))
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

/// A new writer token: 128 random bits, in hex.
fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
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
        let token = new_token();
        let line = serde_json::to_string(header).map_err(|e| self.db(e))?;
        let created_at = header.created_at as i64;
        let mut tx = client.transaction().map_err(|e| self.pg(e))?;
        let inserted = tx
            .execute_typed(
                &format!("INSERT INTO {}.sessions (id, header, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING", self.quoted()),
                &[(&header.id, Type::TEXT), (&line, Type::TEXT), (&created_at, Type::INT8)],
            )
            .map_err(|e| self.pg(e))?;
        if inserted == 0 {
            return Err(StoreError::Exists(header.id.clone()));
        }
        if let Some(holder) = take_writer(&mut tx, &self.quoted(), &header.id, &token, self.lease_ms(), self.direct).map_err(|e| self.pg(e))? {
            return Err(StoreError::Held { id: header.id.clone(), holder });
        }
        tx.commit().map_err(|e| self.pg(e))?;
        Ok(Box::new(self.writer(client, &header.id, token, durability)))
    }

    fn open_for_append(&self, id: &str, durability: Durability) -> Result<(Box<dyn LogWriter>, ReadLog), StoreError> {
        self.check_id(id)?;
        let mut client = self.client()?;
        let exists = client
            .query_typed_opt(&format!("SELECT 1 FROM {}.sessions WHERE id = $1", self.quoted()), &[(&id, Type::TEXT)])
            .map_err(|e| self.pg(e))?
            .is_some();
        if !exists {
            return Err(StoreError::NotFound { id: id.to_string(), dir: self.location() });
        }
        let token = new_token();
        self.take(&mut client, id, &token)?;
        let log = self.read_with(&mut client, id)?;
        Ok((Box::new(self.writer(client, id, token, durability)), log))
    }

    fn read(&self, id: &str) -> Result<ReadLog, StoreError> {
        self.check_id(id)?;
        self.with_reader(|client| self.read_with(client, id))
    }

    fn read_since(&self, id: &str, after: &Position) -> Result<(Since, Position), StoreError> {
        self.check_id(id)?;
        self.with_reader(|client| self.read_since_with(client, id, after))
    }

    fn write_whole(&self, header: &Header, events: &[Event]) -> Result<String, StoreError> {
        self.check_id(&header.id)?;
        let s = self.quoted();
        let mut client = self.client()?;
        let line = serde_json::to_string(header).map_err(|e| self.db(e))?;
        let created_at = header.created_at as i64;
        let mut tx = client.transaction().map_err(|e| self.pg(e))?;
        let inserted = tx
            .execute_typed(
                &format!("INSERT INTO {s}.sessions (id, header, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"),
                &[(&header.id, Type::TEXT), (&line, Type::TEXT), (&created_at, Type::INT8)],
            )
            .map_err(|e| self.pg(e))?;
        if inserted == 0 {
            return Err(StoreError::Exists(header.id.clone()));
        }
        // Rows go in as arrays, some thousands per statement: unnamed
        // statements only, so that a transaction pooler can carry them.
        let insert = format!(
            "INSERT INTO {s}.events (session_id, seq, time, type, line) \
             SELECT $1, u.seq, u.time, u.type, u.line FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[]) AS u(seq, time, type, line) \
             ORDER BY u.seq"
        );
        for chunk in events.chunks(2000) {
            let seqs: Vec<i64> = chunk.iter().map(|e| e.seq as i64).collect();
            let times: Vec<i64> = chunk.iter().map(|e| e.time).collect();
            let kinds: Vec<&str> = chunk.iter().map(|e| e.kind.as_str()).collect();
            let lines: Vec<String> = chunk.iter().map(|e| e.to_line().trim_end_matches('\n').to_string()).collect();
            tx.execute_typed(
                &insert,
                &[
                    (&header.id, Type::TEXT),
                    (&seqs, Type::INT8_ARRAY),
                    (&times, Type::INT8_ARRAY),
                    (&kinds, Type::TEXT_ARRAY),
                    (&lines, Type::TEXT_ARRAY),
                ],
            )
            .map_err(|e| self.pg(e))?;
        }
        tx.commit().map_err(|e| self.pg(e))?;
        Ok(format!("{}/{}", self.location(), header.id))
    }

    fn ids(&self) -> Result<Vec<String>, StoreError> {
        let sql = format!("SELECT id FROM {}.sessions ORDER BY id", self.quoted());
        self.with_reader(|c| Ok(c.query_typed(&sql, &[]).map_err(|e| self.pg(e))?.iter().map(|r| r.get(0)).collect()))
    }

    fn contains(&self, _: &Path) -> bool {
        false
    }

    fn follow(&self, id: &str) -> Result<Box<dyn Follower>, StoreError> {
        let mut follower = PostgresFollower::start(self, Some(id.to_string()))?;
        if follower.last_seqs()?.is_empty() {
            return Err(StoreError::NotFound { id: id.to_string(), dir: self.location() });
        }
        Ok(Box::new(follower))
    }

    fn follow_all(&self) -> Result<Option<Box<dyn StoreFollower>>, StoreError> {
        Ok(Some(Box::new(PostgresFollower::start(self, None)?)))
    }
}

/// How often a follower reads the last `seq`s when no notification came
/// (always on a connection through a pooler, where none come).
const POLL_DIRECT: Duration = Duration::from_secs(1);
const POLL_POOLED: Duration = Duration::from_millis(250);

/// Follows one session, or every session, of the store: listens for the
/// notifications on a direct connection, and reads the last `seq` of each
/// followed session whenever none came for a while. A lost connection is
/// an error; following again starts with a new connection that listens
/// before it reads.
struct PostgresFollower {
    client: Client,
    schema: String,
    shown: String,
    /// One session, or all of them.
    only: Option<String>,
    listening: bool,
    /// The last `seq` seen of each followed session (-1: none yet).
    seen: Option<BTreeMap<String, i64>>,
}

impl PostgresFollower {
    fn start(store: &PostgresStore, only: Option<String>) -> Result<PostgresFollower, StoreError> {
        let mut client = store.client()?;
        // Listen first: whatever is committed after this is notified or
        // read by the first poll.
        if store.direct {
            client.batch_execute(&format!("LISTEN \"{}\"", store.channel())).map_err(|e| store.pg(e))?;
        }
        Ok(PostgresFollower { client, schema: store.quoted(), shown: store.shown.clone(), only, listening: store.direct, seen: None })
    }

    fn err(&self, e: postgres::Error) -> StoreError {
        StoreError::Database { store: self.shown.clone(), detail: message(&e) }
    }

    /// The last `seq` of each followed session that exists (-1: no event).
    fn last_seqs(&mut self) -> Result<BTreeMap<String, i64>, StoreError> {
        let s = &self.schema;
        let rows = match &self.only {
            Some(id) => self.client.query_typed(
                &format!(
                    "SELECT s.id, COALESCE((SELECT max(seq) FROM {s}.events e WHERE e.session_id = s.id), -1) FROM {s}.sessions s WHERE s.id = $1"
                ),
                &[(id, Type::TEXT)],
            ),
            None => self.client.query_typed(
                &format!("SELECT s.id, COALESCE((SELECT max(seq) FROM {s}.events e WHERE e.session_id = s.id), -1) FROM {s}.sessions s"),
                &[],
            ),
        };
        let rows = rows.map_err(|e| self.err(e))?;
        Ok(rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1))).collect())
    }

    /// The followed sessions whose last `seq` changed since the last call.
    fn changes(&mut self) -> Result<Vec<String>, StoreError> {
        let now = self.last_seqs()?;
        let changed = match &self.seen {
            None => now.keys().cloned().collect(),
            Some(seen) => now.iter().filter(|(id, seq)| seen.get(*id) != Some(seq)).map(|(id, _)| id.clone()).collect(),
        };
        self.seen = Some(now);
        Ok(changed)
    }

    /// Waits at most `timeout` for a change; returns the sessions that
    /// changed (every followed session on the first call).
    fn next(&mut self, timeout: Duration) -> Result<Vec<String>, StoreError> {
        use postgres::fallible_iterator::FallibleIterator;
        if self.seen.is_none() {
            return self.changes();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let poll = if self.listening { POLL_DIRECT } else { POLL_POOLED };
            let slice = left.min(poll);
            if self.listening {
                let mut notifications = self.client.notifications();
                if let Err(e) = notifications.timeout_iter(slice).next() {
                    return Err(StoreError::Database { store: self.shown.clone(), detail: message(&e) });
                }
                // Drain what else has arrived, then read: a notification
                // only says where to look.
                while let Ok(Some(_)) = notifications.iter().next() {}
            } else {
                std::thread::sleep(slice);
            }
            let changed = self.changes()?;
            if !changed.is_empty() {
                return Ok(changed);
            }
            if Instant::now() >= deadline {
                return Ok(Vec::new());
            }
        }
    }
}

impl Follower for PostgresFollower {
    fn wait(&mut self, timeout: Duration) -> Result<bool, StoreError> {
        Ok(!self.next(timeout)?.is_empty())
    }
}

impl StoreFollower for PostgresFollower {
    fn wait(&mut self, timeout: Duration) -> Result<Vec<String>, StoreError> {
        self.next(timeout)
    }
}

/// Renews a writer's lease every third of its length until dropped; when
/// the lease turns out to be gone, records why in `lost`.
struct Heartbeat {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(store: &PostgresStore, client: Arc<Mutex<Client>>, id: &str, token: &str, lost: Arc<Mutex<Option<String>>>) -> Heartbeat {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let every = store.lease / 3;
        let schema = store.quoted();
        let (id, token, lease_ms, direct) = (id.to_string(), token.to_string(), store.lease_ms(), store.direct);
        let thread = std::thread::Builder::new().name("cordis-pg-lease".into()).spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let mut client = client.lock_or_recover();
                match renew_writer(&mut *client, &schema, &id, &token, lease_ms, direct, false) {
                    Ok(false) => {
                        *lost.lock_or_recover() = Some("another writer took the session after this writer's lease ran out".into());
                        return;
                    }
                    Ok(true) => {}
                    // A lost connection is the next append's to mend.
                    Err(e) => tracing::debug!("renewing the writer lease of session {id}: {e}"),
                }
            }
        });
        match thread {
            Ok(thread) => Heartbeat { stop: Some(stop), thread: Some(thread) },
            Err(e) => {
                tracing::warn!("no lease heartbeat for session writer: {e}; the lease is renewed by appends only");
                Heartbeat { stop: None, thread: None }
            }
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The appending end of one session in the database; holds the session's
/// writer lease.
pub struct PostgresWriter {
    /// Shared with the lease heartbeat.
    client: Arc<Mutex<Client>>,
    /// For reconnecting after the server went away.
    url: String,
    /// The quoted schema.
    schema: String,
    id: String,
    /// This writer's lease token, also written in each of its events' rows.
    token: String,
    shown: String,
    label: std::path::PathBuf,
    durability: Durability,
    lease_ms: i64,
    direct: bool,
    /// Why this writer no longer holds the session, once it does not.
    lost: Arc<Mutex<Option<String>>>,
    heartbeat: Option<Heartbeat>,
    /// The store's [`Notifier`]: told of each committed append.
    notify: std::sync::mpsc::Sender<String>,
}

impl std::fmt::Debug for PostgresWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresWriter").field("session", &self.id).finish_non_exhaustive()
    }
}

/// How long an append whose connection was lost keeps trying to reach the
/// database again before it reports the failure.
const SETTLE_WITHIN: Duration = Duration::from_secs(20);

/// What became of an append whose connection was lost.
enum Settled {
    /// The row at its `seq` carries this writer's token: it was written.
    Written,
    /// Nothing is at its `seq` yet, and this writer still holds the lease.
    Absent,
}

impl PostgresWriter {
    fn db(&self, detail: impl std::fmt::Display) -> StoreError {
        StoreError::Database { store: self.shown.clone(), detail: detail.to_string() }
    }

    fn lost(&self, detail: impl Into<String>) -> StoreError {
        let detail = detail.into();
        *self.lost.lock_or_recover() = Some(detail.clone());
        StoreError::Lost { id: self.id.clone(), detail }
    }

    fn insert(&self, client: &mut Client, event: &Event, line: &str, sync: bool) -> Result<bool, postgres::Error> {
        let row = AppendRow { session: &self.id, seq: event.seq as i64, time: event.time, kind: &event.kind, line };
        append_event(client, &self.schema, &self.token, &row, sync)
    }

    /// Connects again and finds out what became of the event at `seq`;
    /// tries again while the connection keeps failing (a server that is
    /// restarting, a pooler whose server connections died), for up to
    /// [`SETTLE_WITHIN`].
    fn settle(&self, seq: u64) -> Result<(Client, Settled), StoreError> {
        let deadline = Instant::now() + SETTLE_WITHIN;
        let mut wait = Duration::from_millis(100);
        loop {
            match self.try_settle(seq) {
                Ok(settled) => return Ok(settled),
                Err(Attempt::Final(e)) => return Err(e),
                Err(Attempt::Again(e)) if Instant::now() + wait > deadline => {
                    return Err(self.db(format!("connecting again failed for {} s: {e}", SETTLE_WITHIN.as_secs())))
                }
                Err(Attempt::Again(_)) => {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    fn try_settle(&self, seq: u64) -> Result<(Client, Settled), Attempt> {
        let mut client = connect(&self.url).map_err(|e| Attempt::Again(message(&e)))?;
        let failed = |client: &Client, e: postgres::Error| {
            if lost_connection(client, &e) {
                Attempt::Again(message(&e))
            } else {
                Attempt::Final(self.db(message(&e)))
            }
        };
        let writer: Option<Option<String>> = client
            .query_typed_opt(
                &format!("SELECT writer FROM {}.events WHERE session_id = $1 AND seq = $2", self.schema),
                &[(&self.id, Type::TEXT), (&(seq as i64), Type::INT8)],
            )
            .map_err(|e| failed(&client, e))?
            .map(|r| r.get(0));
        match writer {
            Some(Some(w)) if w == self.token => return Ok((client, Settled::Written)),
            Some(_) => {
                return Err(Attempt::Final(self.lost(format!("seq {seq} was written by another writer while this one's connection was down"))))
            }
            None => {}
        }
        let renewed =
            renew_writer(&mut client, &self.schema, &self.id, &self.token, self.lease_ms, self.direct, true).map_err(|e| failed(&client, e))?;
        if !renewed {
            return Err(Attempt::Final(self.lost("another writer took the session while this writer's connection was down")));
        }
        Ok((client, Settled::Absent))
    }
}

/// One try at settling an uncertain append.
enum Attempt {
    /// The connection failed again: worth another try.
    Again(String),
    /// The answer, an error.
    Final(StoreError),
}

impl LogWriter for PostgresWriter {
    fn append(&mut self, event: &Event) -> Result<(), StoreError> {
        if let Some(why) = self.lost.lock_or_recover().clone() {
            return Err(StoreError::Lost { id: self.id.clone(), detail: why });
        }
        let line = event.to_line();
        let line = line.trim_end_matches('\n');
        let sync = self.durability == Durability::Event;
        let client = self.client.clone();
        let mut client = client.lock_or_recover();
        let outcome = match self.insert(&mut client, event, line, sync) {
            Ok(written) => written,
            Err(e) if !lost_connection(&client, &e) => return Err(self.db(message(&e))),
            Err(e) => {
                // The commit may or may not have happened: settle it by the
                // row's writer, on a new connection.
                let (fresh, settled) = self.settle(event.seq).map_err(|again| self.db(format!("{}; {again}", message(&e))))?;
                *client = fresh;
                match settled {
                    Settled::Written => true,
                    Settled::Absent => self.insert(&mut client, event, line, sync).map_err(|e| self.db(message(&e)))?,
                }
            }
        };
        drop(client);
        if outcome {
            let _ = self.notify.send(self.id.clone());
            Ok(())
        } else {
            Err(self.lost("another writer took the session after this writer's lease ran out"))
        }
    }

    fn end_turn(&mut self) -> Result<(), StoreError> {
        if self.durability != Durability::Turn {
            return Ok(());
        }
        // A commit that waits for the WAL flush, which covers every commit
        // before it: the turn's events are now as durable as under `event`.
        let mut client = self.client.lock_or_recover();
        let renewed =
            renew_writer(&mut *client, &self.schema, &self.id, &self.token, self.lease_ms, self.direct, true).map_err(|e| self.db(message(&e)))?;
        drop(client);
        if renewed {
            Ok(())
        } else {
            Err(self.lost("another writer took the session after this writer's lease ran out"))
        }
    }

    fn path(&self) -> &Path {
        &self.label
    }
}

impl Drop for PostgresWriter {
    fn drop(&mut self) {
        drop(self.heartbeat.take());
        // Hand the session back at once rather than when the lease runs
        // out; a commit that waits, so a turn's events are flushed too.
        let mut client = self.client.lock_or_recover();
        if !client.is_closed() {
            let sql = format!("DELETE FROM {}.writers WHERE session_id = $1 AND token = $2", self.schema);
            if let Err(e) = client.execute_typed(&sql, &[(&self.id, Type::TEXT), (&self.token, Type::TEXT)]) {
                tracing::warn!("{}: releasing session {}: {}", self.shown, self.id, message(&e));
            }
        }
    }
}
