//! The composition entry that configures compaction (see
//! [`crate::agent::compaction`]).
//!
//! Compaction is builtin to the host (it rewrites the history the host
//! derives, through core event types), chosen by an entry named
//! `cordis:compaction-basic`, `compaction-basic`, or the harness's package
//! name `@deepseek-ai/dsh-compaction-basic`, so a harness composition's row
//! selects it unchanged. Its config is checked like any plugin's: unknown
//! keys are refused with the allowed ones listed, and the package's
//! load-time rules apply ([`CompactionConfig::check`]).

use cordis_abi::schema::Checker;
use cordis_composition::{expr, Entry};
use serde_json::{json, Map};

use super::config_violations;
use crate::agent::compaction::{CompactionConfig, Retain};

/// The builtin names of the compaction entry.
pub const NAMES: [&str; 3] = ["cordis:compaction-basic", "compaction-basic", "@deepseek-ai/dsh-compaction-basic"];

/// Whether an entry named `name` is the compaction entry.
pub fn is_compaction(name: &str) -> bool {
    NAMES.contains(&name)
}

/// The compaction config of `entry`, its config evaluated (`!!js` without
/// services) and checked against [`CompactionConfig::schema`] and
/// [`CompactionConfig::check`].
///
/// # Errors
/// One message per problem, naming file, line and entry.
pub fn configure(entry: &Entry) -> Result<CompactionConfig, Vec<String>> {
    let none = Map::new();
    let config = entry.config_json(&mut |source| expr::evaluate(source, &none).map_err(|e| e.to_string())).map_err(|m| vec![m])?;
    let checker = Checker::new(CompactionConfig::schema()).map_err(|e| vec![format!("the compaction schema does not compile: {e}")])?;
    let problems = config_violations(entry, &checker, &config);
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut parsed: CompactionConfig = serde_json::from_value(if config.is_null() { json!({}) } else { config })
        .map_err(|e| vec![format!("{}: entry {}: {e}", entry.locate_key("config"), entry.id)])?;
    parsed.check().map_err(|e| vec![format!("{}: entry {}: {e}", entry.locate_key("config"), entry.id)])?;
    parsed.resolve_paths(&entry.origin.source.dir).map_err(|e| vec![format!("{}: entry {}: {e}", entry.locate_key("config"), entry.id)])?;
    Ok(parsed)
}

/// The enabled compaction entry among `entries` (groups and includes
/// searched, disabled ones skipped), configured; `None` when there is none.
///
/// # Errors
/// Its config's problems, a `disabled` expression that fails, or two
/// enabled compaction entries.
pub fn select(entries: &[Entry]) -> Result<Option<CompactionConfig>, Vec<String>> {
    super::one_builtin(entries, is_compaction, "compaction entry")?.map(configure).transpose()
}

/// One line for `cordis check` about a configured compaction.
pub fn describe(config: &CompactionConfig) -> String {
    match config.resolve_policy(None) {
        Ok(p) => {
            let keep = match p.retain {
                Retain::Ratio(r) => format!("keeps the last {:.0}% of the window verbatim", r * 100.0),
                Retain::Tokens(t) => format!("keeps the last {t} tokens verbatim"),
            };
            let when = if config.auto() { "before a step" } else { "only when asked (auto: false)" };
            let count = match &p.tokenizer {
                Some(path) => format!("tokens counted with the tokenizer in {}", path.display()),
                None => "tokens estimated (calibrated against DeepSeek's tokenizer)".into(),
            };
            let per_model = config.model_policies.iter().filter(|m| m.policy.tokenizer.is_some()).count();
            let per_model = if per_model == 0 { String::new() } else { format!(" ({per_model} model policies name their own)") };
            format!(
                "compaction: at {:.0}% of the model's context window, {when}; {keep}; summaries up to {} tokens; {count}{per_model}",
                p.threshold_ratio * 100.0,
                p.max_tokens
            )
        }
        Err(e) => format!("compaction: {e}"),
    }
}

/// What `cordis check` says a compaction carries over: the plugins whose
/// projections offer the `compaction-context` extension, by name, or that
/// none does (a plan is then only what the summary says of it).
pub fn carried(projections: &cordis_session::projection::Projections) -> String {
    let mut plugins: Vec<String> =
        projections.all().iter().filter(|p| p.offers_compaction_context()).map(|p| format!("{} ({})", p.owner.plugin, p.key)).collect();
    plugins.dedup();
    if plugins.is_empty() {
        "nothing is carried over verbatim: no loaded plugin offers the compaction-context extension, so a plan is only what the summary says of it"
            .into()
    } else {
        format!("carried over verbatim after each compaction: {}", plugins.join(", "))
    }
}
