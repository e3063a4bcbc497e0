//! The composition entry that configures `cordis acp` (the agent served to
//! editors over the Agent Client Protocol).
//!
//! The entry is builtin, chosen by the name `cordis:acp`, or by one of the
//! harness's package names `@deepseek-ai/dsh-acp` and
//! `@deepseek-ai/dsh-acp-demo`, so a harness composition's row configures
//! `cordis acp` unchanged. A composition without one serves ACP with the
//! defaults. Its config ([`AcpConfig`]) is checked like any plugin's:
//! unknown keys are refused with the allowed ones listed.

use std::path::PathBuf;

use cordis_abi::schema::Checker;
use cordis_composition::{expr, Entry};
use cordis_session::store::harness::{Compression, HarnessConfig};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::config_violations;

/// The builtin names of the ACP entry.
pub const NAMES: [&str; 3] = ["cordis:acp", "@deepseek-ai/dsh-acp", "@deepseek-ai/dsh-acp-demo"];

/// Whether an entry named `name` is the ACP entry.
pub fn is_acp(name: &str) -> bool {
    NAMES.contains(&name)
}

/// What the ACP entry configures.
///
/// ```yaml
/// - id: acp
///   name: cordis:acp
///   config:
///     approve: [todo_write]        # tools whose calls the editor approves
///     persona: "You work in {{cwd}} with {{model}}."
///     persistenceRoot: ./.sessions # sessions in the harness's store here
///     persistenceCompression: zstd # or none
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcpConfig {
    /// Tool names whose calls wait for the editor's permission
    /// (`session/request_permission`); `"*"` names every tool.
    #[serde(default)]
    pub approve: Vec<String>,
    /// The system prompt of every ACP session; `{{model}}` is replaced by
    /// the model's name and `{{cwd}}` by the session's folder. Unset: the
    /// model service's own system prompt.
    #[serde(default)]
    pub persona: Option<String>,
    /// The harness's row: the provider to use. Checked against the model
    /// the composition provides (a mismatch is a note, not an error).
    #[serde(default)]
    pub provider: Option<String>,
    /// The harness's row: the model to use; as `provider`.
    #[serde(default)]
    pub model: Option<String>,
    /// The harness's store root for ACP sessions when no persistence entry
    /// chooses a store (relative to the composition's folder).
    #[serde(default)]
    pub persistence_root: Option<PathBuf>,
    /// `zstd` (default) or `none`: the harness store's encoding under
    /// `persistenceRoot`.
    #[serde(default)]
    pub persistence_compression: Option<String>,
    /// Accepted from harness compositions; `cordis acp` reads no
    /// workspace files into the prompt (see the ACP guide).
    #[serde(default)]
    pub workspace_context: Option<Value>,
    /// Accepted from harness compositions; the tools served are the
    /// composition's (see the ACP guide).
    #[serde(default)]
    pub tools: Option<Value>,
}

impl AcpConfig {
    /// The JSON Schema of the config.
    pub fn schema() -> Value {
        json!({"type": "object", "additionalProperties": false, "properties": {
            "approve": {"type": "array", "items": {"type": "string", "minLength": 1}, "default": []},
            "persona": {"type": "string"},
            "provider": {"type": "string", "minLength": 1},
            "model": {"type": "string", "minLength": 1},
            "persistenceRoot": {"type": "string", "minLength": 1},
            "persistenceCompression": {"enum": ["zstd", "none"]},
            "workspaceContext": {"type": "object"},
            "tools": {"type": "object"}
        }})
    }

    /// Whether calls of `tool` wait for the editor's permission.
    pub fn needs_approval(&self, tool: &str) -> bool {
        self.approve.iter().any(|t| t == tool || t == "*")
    }

    /// The persona for a session in `cwd` with `model`, its placeholders
    /// filled; `None` when no persona is set.
    pub fn persona_for(&self, model: &str, cwd: &str) -> Option<String> {
        self.persona.as_ref().map(|p| p.replace("{{model}}", model).replace("{{cwd}}", cwd))
    }

    /// The harness store `persistenceRoot` names, resolved against `dir`.
    pub fn store(&self, dir: &std::path::Path) -> Option<HarnessConfig> {
        let root = self.persistence_root.as_ref()?;
        let compression = match self.persistence_compression.as_deref() {
            Some("none") => Compression::None,
            _ => Compression::Zstd,
        };
        Some(HarnessConfig {
            root: dir.join(root),
            compression,
            pack_chunks: true,
            prepared_session_cache_size: None,
            write_batch_max_delay_ms: None,
        })
    }
}

/// The ACP config of `entry`, its config evaluated (`!!js` without
/// services) and checked against [`AcpConfig::schema`].
///
/// # Errors
/// One message per problem, naming file, line and entry.
pub fn configure(entry: &Entry) -> Result<AcpConfig, Vec<String>> {
    let none = Map::new();
    let config = entry.config_json(&mut |source| expr::evaluate(source, &none).map_err(|e| e.to_string())).map_err(|m| vec![m])?;
    let checker = Checker::new(AcpConfig::schema()).map_err(|e| vec![format!("the ACP schema does not compile: {e}")])?;
    let problems = config_violations(entry, &checker, &config);
    if !problems.is_empty() {
        return Err(problems);
    }
    serde_json::from_value(if config.is_null() { json!({}) } else { config })
        .map_err(|e| vec![format!("{}: entry {}: {e}", entry.locate_key("config"), entry.id)])
}

/// The enabled ACP entry among `entries` (groups and includes searched,
/// disabled ones skipped), configured; `None` when there is none.
///
/// # Errors
/// Its config's problems, a `disabled` expression that fails, or two
/// enabled ACP entries.
pub fn select(entries: &[Entry]) -> Result<Option<AcpConfig>, Vec<String>> {
    super::one_builtin(entries, is_acp, "ACP entry")?.map(configure).transpose()
}

/// One line for `cordis check` about a configured ACP entry.
pub fn describe(config: &AcpConfig) -> String {
    let mut parts = vec!["acp: served by `cordis acp`".to_string()];
    if !config.approve.is_empty() {
        parts.push(format!("calls of {} wait for the editor's permission", config.approve.join(", ")));
    }
    if config.persona.is_some() {
        parts.push("a persona replaces the model's system prompt".into());
    }
    if let Some(root) = &config.persistence_root {
        parts.push(format!("sessions in {} unless a persistence entry chooses a store", root.display()));
    }
    let ignored: Vec<&str> = [("workspaceContext", config.workspace_context.is_some()), ("tools", config.tools.is_some())]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(k, _)| *k)
        .collect();
    if !ignored.is_empty() {
        parts.push(format!("{} accepted and not used (see the ACP guide)", ignored.join(", ")));
    }
    parts.join("; ")
}
