//! Composition entries that choose where sessions are stored.
//!
//! A persistence entry is builtin:
//! - `cordis:session-persistence-jsonl`, `session-persistence-jsonl`, or the
//!   harness's package name `@deepseek-ai/dsh-session-persistence-jsonl` (so
//!   a harness composition's row selects it unchanged), config
//!   `{root, compression, packChunks}` ([`HarnessConfig`]);
//! - `cordis:session-postgres` or `session-postgres`, config
//!   `{url | urlEnv, schema}` ([`PostgresConfig`]).
//!
//! Its config is checked like any plugin's. The host picks its
//! store at boot, before any plugin loads: the one enabled persistence
//! entry, else the flat store in the state directory. Two enabled
//! persistence entries are an error (sessions would go to one of them
//! silently).

use cordis_abi::schema::Checker;
use serde_json::Map;

#[cfg(feature = "postgres")]
use cordis_composition::positions::Step;
use cordis_composition::{expr, Entry};
#[cfg(feature = "postgres")]
use cordis_session::postgres::PostgresConfig;
use cordis_session::store::harness::{self, HarnessConfig};

use super::config_violations;

/// What a persistence entry configures.
#[derive(Debug, Clone)]
pub enum Persistence {
    /// The harness store (`session-persistence-jsonl`); `root` is resolved
    /// against the folder of the file the row is written in.
    Harness(HarnessConfig),
    /// The PostgreSQL store (`session-postgres`).
    #[cfg(feature = "postgres")]
    Postgres(PostgresConfig),
}

/// The builtin names of the harness store.
pub const HARNESS_NAMES: [&str; 3] = ["cordis:session-persistence-jsonl", harness::BUILTIN, harness::PACKAGE];

/// The builtin names of the PostgreSQL store.
pub const POSTGRES_NAMES: [&str; 2] = ["cordis:session-postgres", "session-postgres"];

/// Whether an entry named `name` is a persistence entry.
pub fn is_persistence(name: &str) -> bool {
    HARNESS_NAMES.contains(&name) || POSTGRES_NAMES.contains(&name)
}

/// The store `entry` configures, its config evaluated (`!!js` without
/// services) and checked against the store's schema.
///
/// # Errors
/// One message per problem, naming file, line and entry.
pub fn configure(entry: &Entry) -> Result<Persistence, Vec<String>> {
    let none = Map::new();
    let config = entry.config_json(&mut |source| expr::evaluate(source, &none).map_err(|e| e.to_string())).map_err(|m| vec![m])?;
    let postgres = POSTGRES_NAMES.contains(&entry.name.as_str());
    #[cfg(not(feature = "postgres"))]
    if postgres {
        return Err(vec![format!(
            "{}: entry {}: this cordis was built without PostgreSQL (cargo feature `postgres`); rebuild with the default features, or choose another store",
            entry.locate(),
            entry.id
        )]);
    }
    #[cfg(feature = "postgres")]
    let schema = if postgres { PostgresConfig::schema() } else { HarnessConfig::schema() };
    #[cfg(not(feature = "postgres"))]
    let schema = HarnessConfig::schema();
    let checker = Checker::new(schema).map_err(|e| vec![format!("the store's schema does not compile: {e}")])?;
    let problems = config_violations(entry, &checker, &config);
    if !problems.is_empty() {
        return Err(problems);
    }
    #[cfg(feature = "postgres")]
    if postgres {
        let parsed: PostgresConfig =
            serde_json::from_value(config).map_err(|e| vec![format!("{}: entry {}: {e}", entry.locate_key("config"), entry.id)])?;
        if let Err(e) = parsed.check() {
            let key = if parsed.url.is_some() { "url" } else { "urlEnv" };
            return Err(vec![format!("{}: entry {}: {e}", entry.locate_config(&[Step::Key(key.into())]), entry.id)]);
        }
        return Ok(Persistence::Postgres(parsed));
    }
    let mut parsed: HarnessConfig =
        serde_json::from_value(config).map_err(|e| vec![format!("{}: entry {}: {e}", entry.locate_key("config"), entry.id)])?;
    parsed.root = entry.base_dir.join(&parsed.root);
    Ok(Persistence::Harness(parsed))
}

/// The enabled persistence entry among `entries` (groups and includes
/// searched, disabled ones skipped), configured; `None` when there is none.
///
/// # Errors
/// Its config's problems, a `disabled` expression that fails, or two
/// enabled persistence entries.
pub fn select(entries: &[Entry]) -> Result<Option<(String, Persistence)>, Vec<String>> {
    super::one_builtin(entries, is_persistence, "session store")?.map(|one| configure(one).map(|p| (one.id.clone(), p))).transpose()
}

impl Persistence {
    /// One line for reports: `harness store ./.sessions (zstd)`.
    pub fn describe(&self) -> String {
        match self {
            Persistence::Harness(c) => format!(
                "session store: harness layout at {} ({})",
                c.root.display(),
                match c.compression {
                    harness::Compression::Zstd => "zstd",
                    harness::Compression::None => "none",
                }
            ),
            #[cfg(feature = "postgres")]
            Persistence::Postgres(c) => format!(
                "session store: PostgreSQL, schema {}, URL from {}",
                c.schema,
                c.url_env.as_deref().map_or_else(|| "`url`".to_string(), |v| format!("${v}"))
            ),
        }
    }
}
