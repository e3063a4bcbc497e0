//! The config of compaction: the keys of the harness's
//! `@deepseek-ai/dsh-compaction-basic` package (`BasicCompactionConfig`),
//! with the same defaults and the same load-time rules. The composition
//! entry that carries it is read by [`crate::loader::compaction`].

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Value};

/// The policy fields a default and a per-model override share.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    /// Compact when the next request would pass this fraction of the
    /// model's context window, in (0, 1].
    pub threshold_ratio: Option<f64>,
    /// The most recent history kept verbatim, as a fraction of the context
    /// window; excludes `retainTokens`.
    pub retain_ratio: Option<f64>,
    /// The most recent history kept verbatim, in tokens; excludes
    /// `retainRatio`.
    pub retain_tokens: Option<u64>,
    /// With `summarizationModel`: a provider to summarize with; both empty
    /// (the default) means the conversation's own model.
    pub summarization_provider: Option<String>,
    /// With `summarizationProvider`: a model to summarize with.
    pub summarization_model: Option<String>,
    /// The cap on the summary's tokens (default 8192).
    pub max_tokens: Option<u64>,
    /// Further tries after a summary fails (default 1).
    pub compaction_retries: Option<u64>,
    /// Tries after the provider refuses a request as too long for its
    /// context (default 1; 0 turns that recovery off).
    pub max_overflow_retries: Option<u64>,
    /// A Hugging Face `tokenizer.json` to count tokens with (relative to
    /// the composition file's folder; [`CompactionConfig::resolve_paths`]
    /// makes it absolute); without one, tokens are estimated (see
    /// [`super::tokens`]).
    pub tokenizer: Option<String>,
}

/// A policy for one provider/model pair, over the defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ModelPolicy {
    /// The provider the policy applies to (exact match).
    pub provider: String,
    /// The model the policy applies to (exact match).
    pub model: String,
    /// The fields it overrides.
    #[serde(flatten)]
    pub policy: Policy,
}

/// The config of the compaction entry, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CompactionConfig {
    /// The defaults for every model.
    #[serde(flatten)]
    pub policy: Policy,
    /// Overrides for exact provider/model pairs.
    #[serde(default)]
    pub model_policies: Vec<ModelPolicy>,
    /// Whether the agent loop compacts by itself before a step (default
    /// true); `false` leaves only `cordis session compact` and the dev
    /// console's `compact`.
    pub auto: Option<bool>,
}

/// How much of the history to keep verbatim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Retain {
    /// A fraction of the context window.
    Ratio(f64),
    /// A number of tokens.
    Tokens(u64),
}

/// The policy in force for one model, every field resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Fraction of the context window that triggers a compaction.
    pub threshold_ratio: f64,
    /// The verbatim tail.
    pub retain: Retain,
    /// A provider/model pair to summarize with, when not the conversation's.
    pub summarizer: Option<(String, String)>,
    /// The cap on the summary's tokens.
    pub max_tokens: u32,
    /// Further tries after a failed summary.
    pub compaction_retries: u32,
    /// Tries after a context overflow.
    pub max_overflow_retries: u32,
    /// The tokenizer file to count with; `None`: the estimate.
    pub tokenizer: Option<PathBuf>,
}

const DEFAULT_THRESHOLD_RATIO: f64 = 0.8;
const DEFAULT_RETAIN_RATIO: f64 = 0.16;

impl CompactionConfig {
    /// The JSON Schema of the config (types and ranges; the rules between
    /// keys are [`CompactionConfig::check`]'s).
    pub fn schema() -> Value {
        let policy = |with_target: bool| {
            let mut properties = json!({
                "thresholdRatio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": DEFAULT_THRESHOLD_RATIO},
                "retainRatio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": DEFAULT_RETAIN_RATIO},
                "retainTokens": {"type": "integer", "minimum": 0},
                "summarizationProvider": {"type": "string", "default": ""},
                "summarizationModel": {"type": "string", "default": ""},
                "maxTokens": {"type": "integer", "minimum": 1, "default": 8192},
                "compactionRetries": {"type": "integer", "minimum": 0, "default": 1},
                "maxOverflowRetries": {"type": "integer", "minimum": 0, "default": 1},
                "tokenizer": {"type": "string", "minLength": 1}
            });
            let mut required = Vec::<Value>::new();
            if with_target {
                properties["provider"] = json!({"type": "string", "minLength": 1});
                properties["model"] = json!({"type": "string", "minLength": 1});
                required = vec![json!("provider"), json!("model")];
            }
            (properties, required)
        };
        let (mut top, _) = policy(false);
        let (entry, required) = policy(true);
        top["modelPolicies"] = json!({"type": "array", "default": [], "items": {"type": "object", "additionalProperties": false, "properties": entry, "required": required}});
        top["auto"] = json!({"type": "boolean", "default": true});
        json!({"type": "object", "additionalProperties": false, "properties": top})
    }

    /// The rules between keys the published package applies at load:
    /// `retainRatio` and `retainTokens` exclude each other; the
    /// summarization provider and model are set together (both empty or
    /// both not); a ratio retention below its threshold ratio, for the
    /// defaults and for each override merged over them; no two overrides
    /// for one pair.
    ///
    /// # Errors
    /// The first broken rule, naming the key (`modelPolicies[1].retainRatio`).
    pub fn check(&self) -> Result<(), String> {
        check_policy(&self.policy, "")?;
        let defaults = self.resolve_policy(None)?;
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for (i, p) in self.model_policies.iter().enumerate() {
            let at = format!("modelPolicies[{i}].");
            check_policy(&p.policy, &at)?;
            if seen.contains(&(p.provider.as_str(), p.model.as_str())) {
                return Err(format!("modelPolicies[{i}]: a second policy for {}/{}", p.provider, p.model));
            }
            seen.push((&p.provider, &p.model));
            let merged = merge(&defaults, &p.policy);
            if let Retain::Ratio(r) = merged.retain {
                if r >= merged.threshold_ratio {
                    return Err(format!("{at}retainRatio ({r}) must be below the thresholdRatio in force ({})", merged.threshold_ratio));
                }
            }
        }
        Ok(())
    }

    /// Makes each `tokenizer` absolute (joined to `dir`, the composition
    /// file's folder, when relative; `.` components dropped) and checks
    /// that it names a file.
    ///
    /// # Errors
    /// The first that does not, naming the key (`modelPolicies[0].tokenizer`),
    /// the path as written and as resolved.
    pub fn resolve_paths(&mut self, dir: &Path) -> Result<(), String> {
        let policies = std::iter::once((String::new(), &mut self.policy))
            .chain(self.model_policies.iter_mut().enumerate().map(|(i, m)| (format!("modelPolicies[{i}]."), &mut m.policy)));
        for (at, policy) in policies {
            let Some(written) = policy.tokenizer.clone() else { continue };
            // Absolute, so that the path shown and read does not depend on
            // the working folder; `.` components dropped.
            let joined = dir.join(&written);
            let path = std::path::absolute(&joined).unwrap_or(joined);
            if !path.is_file() {
                let why = if path.exists() { "it is not a file" } else { "no file is there" };
                return Err(format!(
                    "{at}tokenizer: `{written}` resolves to {} ({why}); expected a Hugging Face tokenizer.json (the model's, for its own count)",
                    path.display()
                ));
            }
            policy.tokenizer = Some(path.display().to_string());
        }
        Ok(())
    }

    /// Every tokenizer file the config names, the defaults' first.
    pub fn tokenizers(&self) -> Vec<PathBuf> {
        std::iter::once(&self.policy)
            .chain(self.model_policies.iter().map(|m| &m.policy))
            .filter_map(|p| p.tokenizer.as_ref().map(PathBuf::from))
            .collect()
    }

    /// Whether the agent loop compacts by itself.
    pub fn auto(&self) -> bool {
        self.auto.unwrap_or(true)
    }

    /// The policy in force for `target` (provider, model): the defaults,
    /// with the exact pair's override merged over them.
    ///
    /// # Errors
    /// When the defaults break a rule ([`CompactionConfig::check`]).
    pub fn resolve_policy(&self, target: Option<(&str, &str)>) -> Result<Resolved, String> {
        let p = &self.policy;
        let retain = match (p.retain_ratio, p.retain_tokens) {
            (Some(_), Some(_)) => return Err("retainRatio and retainTokens exclude each other".into()),
            (Some(r), None) => Retain::Ratio(r),
            (None, Some(t)) => Retain::Tokens(t),
            (None, None) => Retain::Ratio(DEFAULT_RETAIN_RATIO),
        };
        let threshold_ratio = p.threshold_ratio.unwrap_or(DEFAULT_THRESHOLD_RATIO);
        if let Retain::Ratio(r) = retain {
            if r >= threshold_ratio {
                return Err(format!("retainRatio ({r}) must be below thresholdRatio ({threshold_ratio})"));
            }
        }
        let defaults = Resolved {
            threshold_ratio,
            retain,
            summarizer: pair(p),
            max_tokens: clamp_u32(p.max_tokens.unwrap_or(8192)),
            compaction_retries: clamp_u32(p.compaction_retries.unwrap_or(1)),
            max_overflow_retries: clamp_u32(p.max_overflow_retries.unwrap_or(1)),
            tokenizer: p.tokenizer.as_ref().map(PathBuf::from),
        };
        let Some((provider, model)) = target else { return Ok(defaults) };
        Ok(match self.model_policies.iter().find(|m| m.provider == provider && m.model == model) {
            Some(m) => merge(&defaults, &m.policy),
            None => defaults,
        })
    }
}

fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn pair(p: &Policy) -> Option<(String, String)> {
    match (&p.summarization_provider, &p.summarization_model) {
        (Some(provider), Some(model)) if !provider.is_empty() => Some((provider.clone(), model.clone())),
        _ => None,
    }
}

fn merge(defaults: &Resolved, over: &Policy) -> Resolved {
    let retain = match (over.retain_ratio, over.retain_tokens) {
        (Some(r), _) => Retain::Ratio(r),
        (None, Some(t)) => Retain::Tokens(t),
        (None, None) => defaults.retain,
    };
    let summarizer = if over.summarization_provider.is_some() { pair(over) } else { defaults.summarizer.clone() };
    Resolved {
        threshold_ratio: over.threshold_ratio.unwrap_or(defaults.threshold_ratio),
        retain,
        summarizer,
        max_tokens: over.max_tokens.map_or(defaults.max_tokens, clamp_u32),
        compaction_retries: over.compaction_retries.map_or(defaults.compaction_retries, clamp_u32),
        max_overflow_retries: over.max_overflow_retries.map_or(defaults.max_overflow_retries, clamp_u32),
        tokenizer: over.tokenizer.as_ref().map(PathBuf::from).or_else(|| defaults.tokenizer.clone()),
    }
}

fn check_policy(p: &Policy, at: &str) -> Result<(), String> {
    if p.retain_ratio.is_some() && p.retain_tokens.is_some() {
        return Err(format!("{at}retainRatio and {at}retainTokens exclude each other: give one"));
    }
    match (&p.summarization_provider, &p.summarization_model) {
        (None, None) => {}
        (Some(a), Some(b)) if a.is_empty() == b.is_empty() => {}
        _ => {
            return Err(format!(
                "{at}summarizationProvider and {at}summarizationModel go together: give both (or both empty, for the conversation's own model)"
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordis_abi::schema::Checker;

    fn parse(v: Value) -> Result<CompactionConfig, String> {
        let c: CompactionConfig = serde_json::from_value(v).map_err(|e| e.to_string())?;
        c.check().map(|()| c)
    }

    #[test]
    fn defaults_are_the_published_ones() {
        let c = parse(json!({})).unwrap();
        let p = c.resolve_policy(None).unwrap();
        assert_eq!(p.threshold_ratio, 0.8);
        assert_eq!(p.retain, Retain::Ratio(0.16));
        assert_eq!((p.max_tokens, p.compaction_retries, p.max_overflow_retries), (8192, 1, 1));
        assert!(c.auto());
    }

    #[test]
    fn the_published_rules_are_kept() {
        assert!(parse(json!({"retainRatio": 0.2, "retainTokens": 10})).unwrap_err().contains("exclude each other"));
        assert!(parse(json!({"retainRatio": 0.8})).unwrap_err().contains("below"));
        assert!(parse(json!({"summarizationProvider": "x"})).unwrap_err().contains("go together"));
        assert!(parse(json!({"summarizationProvider": "x", "summarizationModel": ""})).unwrap_err().contains("go together"));
        assert!(parse(json!({"modelPolicies": [{"provider": "a", "model": "b"}, {"provider": "a", "model": "b"}]})).unwrap_err().contains("second"));
        assert!(parse(json!({"thresholdRatio": 0.5, "modelPolicies": [{"provider": "a", "model": "b", "retainRatio": 0.6}]}))
            .unwrap_err()
            .contains("modelPolicies[0].retainRatio"));
        assert!(parse(json!({"bogus": 1})).is_err());
    }

    #[test]
    fn a_model_policy_merges_over_the_defaults() {
        let c = parse(json!({"thresholdRatio": 0.9, "retainTokens": 100, "modelPolicies": [{"provider": "p", "model": "m", "thresholdRatio": 0.7, "retainRatio": 0.1}]})).unwrap();
        let p = c.resolve_policy(Some(("p", "m"))).unwrap();
        assert_eq!((p.threshold_ratio, p.retain), (0.7, Retain::Ratio(0.1)));
        let other = c.resolve_policy(Some(("p", "x"))).unwrap();
        assert_eq!((other.threshold_ratio, other.retain), (0.9, Retain::Tokens(100)));
    }

    #[test]
    fn the_schema_refuses_unknown_keys_and_bad_ranges() {
        let checker = Checker::new(CompactionConfig::schema()).unwrap();
        assert!(checker.violations(&json!({"thresholdRatio": 0.8, "retainRatio": 0.16, "maxTokens": 8192, "compactionRetries": 1})).is_empty());
        assert!(!checker.violations(&json!({"thresholdRatio": 0})).is_empty());
        assert!(!checker.violations(&json!({"maxTokens": 0})).is_empty());
        assert!(!checker.violations(&json!({"modelPolicies": [{"model": "m"}]})).is_empty());
    }

    #[test]
    fn tokenizers_resolve_against_the_composition_folder_and_must_be_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ds.json"), "{}").unwrap();
        let mut c = parse(json!({"tokenizer": "ds.json", "modelPolicies": [{"provider": "a", "model": "b", "tokenizer": "./other.json"}]})).unwrap();
        let e = c.resolve_paths(dir.path()).unwrap_err();
        assert!(e.starts_with("modelPolicies[0].tokenizer: `./other.json` resolves to ") && e.contains("(no file is there)"), "{e}");
        std::fs::create_dir(dir.path().join("other.json")).unwrap();
        let e = c.resolve_paths(dir.path()).unwrap_err();
        assert!(e.contains("(it is not a file)"), "{e}");
        std::fs::remove_dir(dir.path().join("other.json")).unwrap();
        std::fs::write(dir.path().join("other.json"), "{}").unwrap();
        c.resolve_paths(dir.path()).unwrap();
        assert_eq!(c.tokenizers(), vec![dir.path().join("ds.json"), dir.path().join("other.json")]);
        assert_eq!(c.resolve_policy(None).unwrap().tokenizer, Some(dir.path().join("ds.json")));
        assert_eq!(c.resolve_policy(Some(("a", "b"))).unwrap().tokenizer, Some(dir.path().join("other.json")));
        assert_eq!(c.resolve_policy(Some(("a", "c"))).unwrap().tokenizer, Some(dir.path().join("ds.json")));
        assert!(parse(json!({"tokenizer": 3})).is_err());
    }
}
