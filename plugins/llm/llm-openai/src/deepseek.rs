//! `llm-deepseek`: the same provider under the TypeScript harness's
//! DeepSeek package, `@deepseek-ai/dsh-llm-deepseek`, taking that package's
//! config as published (its keys and defaults; unknown keys refused).
//!
//! What each key does here:
//!
//! - `apiKeyEnv` (default `DEEPSEEK_API_KEY`): the variable holding the key.
//!   As in the harness, an unset variable does not fail the entry; each
//!   request reads it again and fails, naming the variable, while it is
//!   unset.
//! - `baseURL`: the API's base URL; else `$DEEPSEEK_BASE_URL`, else
//!   `https://api.deepseek.com`. Requests go to `{baseURL}/chat/completions`.
//! - `models` (default `deepseek-v4-flash` and `deepseek-v4-pro`): the first
//!   one is the model every request names (this host has no per-agent model
//!   choice); its `maxTokens`, else the entry's `maxTokens` (default
//!   256000), is sent as `max_tokens`; its `contextWindow`, else
//!   `defaultContextWindow` (default 1000000), is the window `describe`
//!   reports. A `max_tokens` that would take the whole window (at least
//!   the window) is lowered to half the window, so that a request has room
//!   for its input. `name`, `description` and `inputModalities` are accepted and
//!   not used (cordis sends text only).
//! - `thinking` and `reasoningEffort`, as DeepSeek's API takes them:
//!   `off` sends `thinking: {type: disabled}`; `low`, `high` or `max` send
//!   `thinking: {type: enabled}` and `reasoning_effort`; without an effort,
//!   `thinking` alone is sent when set. `thinking: disabled` with an effort
//!   other than `off` fails the entry.
//! - `streamIdleTimeoutMs` (default 300000): how long to wait to connect,
//!   for the answer to start and for each further piece of it.
//! - `retryPolicy` (default: normal mode, 5 retries): `maxRetries` of a
//!   normal policy is the number of times a request refused with HTTP 429
//!   or 5xx, or whose connection failed, is sent again (`always` retries
//!   10 times); the waits are llm-openai's (the server's `Retry-After`, or
//!   0.5 s doubling with jitter), so `backoff` and `retryableCodes` are
//!   checked and not otherwise used.
//! - `maxRequestImageBytes`: checked and not used (no images are sent).
//!
//! The provider label recorded with each answer is `deepseek-official`,
//! the route the harness registers.

use std::time::Duration;

use cordis_abi::prelude::*;

use crate::service::{ModelService, Settings, SERVICE_NAME};
use crate::{stream, wire};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "llm-deepseek";

/// The harness's package name.
pub const PACKAGE: &str = "@deepseek-ai/dsh-llm-deepseek";

/// The provider label the session log records.
pub const PROVIDER: &str = "deepseek-official";

/// DeepSeek's public API.
pub const PUBLIC_BASE_URL: &str = "https://api.deepseek.com";

/// The variable that names another endpoint when `baseURL` is left out.
pub const BASE_URL_ENV: &str = "DEEPSEEK_BASE_URL";

const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// One model of the catalog.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogModel {
    /// The model id sent as `model` (`deepseek-v4-flash`).
    #[schemars(length(min = 1))]
    pub id: String,
    /// A display name (not used by cordis).
    #[serde(default)]
    pub name: Option<String>,
    /// A description (not used by cordis).
    #[serde(default)]
    pub description: Option<String>,
    /// The model's context window in tokens; `defaultContextWindow` when left out.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub context_window: Option<u64>,
    /// The `max_tokens` sent for this model; the entry's `maxTokens` when left out.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// What the model takes as input (`text`, `image`); cordis sends text only.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub input_modalities: Option<Vec<Modality>>,
}

/// An input modality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    /// Text.
    Text,
    /// Images.
    Image,
}

/// `thinking`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    /// Thinking on.
    Enabled,
    /// Thinking off (then only `reasoningEffort: off` is allowed).
    Disabled,
}

/// `reasoningEffort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// No thinking.
    Off,
    /// Low effort.
    Low,
    /// High effort.
    High,
    /// The most effort.
    Max,
}

impl Effort {
    fn wire(self) -> &'static str {
        match self {
            Effort::Off => "off",
            Effort::Low => "low",
            Effort::High => "high",
            Effort::Max => "max",
        }
    }
}

/// The waits between retries.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Backoff {
    /// The first wait in milliseconds (default 500).
    #[serde(default)]
    #[schemars(range(max = 2_147_483_647))]
    pub initial_delay_ms: Option<f64>,
    /// The longest wait in milliseconds (default 10000).
    #[serde(default)]
    #[schemars(range(max = 2_147_483_647))]
    pub max_delay_ms: Option<f64>,
    /// The share of each wait drawn at random (default 0.1).
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub jitter_ratio: Option<f64>,
}

/// `retryPolicy.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RetryMode {
    /// Retry up to `maxRetries` times.
    Normal,
    /// Keep retrying.
    Always,
}

/// `retryPolicy`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryPolicy {
    /// `normal` or `always`.
    pub mode: RetryMode,
    /// normal: how many times a failed request is sent again (default 5).
    #[serde(default)]
    #[schemars(range(max = 9_007_199_254_740_991u64))]
    pub max_retries: Option<u64>,
    /// normal: the failure codes that are retried (not empty).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub retryable_codes: Option<Vec<String>>,
    /// The waits between retries.
    #[serde(default)]
    pub backoff: Option<Backoff>,
}

/// The config of an `llm-deepseek` entry: the published package's keys.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The name of the environment variable holding the API key (default `DEEPSEEK_API_KEY`). The key itself never goes in this file.
    #[serde(default = "default_key_env")]
    #[schemars(length(min = 1))]
    pub api_key_env: String,
    /// The API's base URL (default: `$DEEPSEEK_BASE_URL`, else `https://api.deepseek.com`).
    #[serde(default, rename = "baseURL")]
    #[schemars(length(min = 1))]
    pub base_url: Option<String>,
    /// `enabled` or `disabled`; sent as `thinking: {type}` (the API's default when left out).
    #[serde(default)]
    pub thinking: Option<Thinking>,
    /// `off`, `low`, `high` or `max`; `off` turns thinking off, the others turn it on with that `reasoning_effort`.
    #[serde(default)]
    pub reasoning_effort: Option<Effort>,
    /// The `max_tokens` of every request, unless the model's entry has its own (default 256000).
    #[serde(default = "default_max_tokens")]
    #[schemars(range(min = 1, max = 9_007_199_254_740_991u64))]
    pub max_tokens: u64,
    /// The context window of a model without its own `contextWindow` (default 1000000).
    #[serde(default = "default_context_window")]
    #[schemars(range(min = 1))]
    pub default_context_window: u64,
    /// The model catalog; the first model is the one requests name (default: deepseek-v4-flash, deepseek-v4-pro).
    #[serde(default = "default_models")]
    pub models: Vec<CatalogModel>,
    /// How long to wait, in milliseconds, to connect, for the answer to start and for each further piece of it (default 300000).
    #[serde(default = "default_idle")]
    #[schemars(range(min = 1, max = 2_147_483_647))]
    pub stream_idle_timeout_ms: u64,
    /// The most base64 image bytes one request may carry (default 20 MiB; cordis sends no images).
    #[serde(default = "default_image_bytes")]
    #[schemars(range(min = 1))]
    pub max_request_image_bytes: u64,
    /// When a failed request is sent again (default: normal mode, 5 retries).
    #[serde(default)]
    pub retry_policy: Option<RetryPolicy>,
}

fn default_key_env() -> String {
    "DEEPSEEK_API_KEY".into()
}
fn default_max_tokens() -> u64 {
    256_000
}
fn default_context_window() -> u64 {
    1_000_000
}
fn default_idle() -> u64 {
    300_000
}
fn default_image_bytes() -> u64 {
    20 * 1024 * 1024
}
fn default_models() -> Vec<CatalogModel> {
    ["deepseek-v4-flash", "deepseek-v4-pro"]
        .into_iter()
        .map(|id| CatalogModel { id: id.into(), name: None, description: None, context_window: None, max_tokens: None, input_modalities: None })
        .collect()
}

/// What a config resolves to.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// `{baseURL}/chat/completions`.
    pub url: String,
    /// The model requests name.
    pub model: String,
    /// `max_tokens`.
    pub max_tokens: u64,
    /// The model's context window.
    pub context_window: u64,
    /// `thinking` and `reasoning_effort` as sent.
    pub thinking: wire::Thinking,
    /// Retries after 429, 5xx or a failed connection.
    pub max_retries: u32,
    /// The stream idle timeout.
    pub timeout: Duration,
}

impl Config {
    /// Resolves the config, with `base_url_env` as `$DEEPSEEK_BASE_URL`.
    ///
    /// # Errors
    /// A message naming the key: a thinking / effort pair DeepSeek refuses,
    /// duplicate model ids, an empty retry code list, delays out of order.
    pub fn resolve(&self, base_url_env: Option<String>) -> Result<Resolved, String> {
        let effort = self.reasoning_effort;
        if self.thinking == Some(Thinking::Disabled) && effort.is_some_and(|e| e != Effort::Off) {
            return Err("llm-deepseek: with thinking: disabled, reasoningEffort can only be off".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for model in &self.models {
            if !seen.insert(model.id.as_str()) {
                return Err(format!("llm-deepseek: models lists {:?} twice", model.id));
            }
        }
        if let Some(policy) = &self.retry_policy {
            if let Some(codes) = &policy.retryable_codes {
                let unique: std::collections::BTreeSet<&String> = codes.iter().collect();
                if unique.len() != codes.len() || codes.iter().any(String::is_empty) {
                    return Err("llm-deepseek: retryPolicy.retryableCodes must be distinct, non-empty codes".into());
                }
            }
            if let Some(b) = &policy.backoff {
                let (first, most) = (b.initial_delay_ms.unwrap_or(500.0), b.max_delay_ms.unwrap_or(10_000.0));
                if first <= 0.0 || most <= 0.0 || first > most {
                    return Err("llm-deepseek: retryPolicy.backoff delays must be positive, initialDelayMs at most maxDelayMs".into());
                }
            }
        }
        let base = self.base_url.clone().or(base_url_env).unwrap_or_else(|| PUBLIC_BASE_URL.into());
        let base = base.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) || base.len() <= "https://".len() {
            return Err(format!("llm-deepseek: baseURL must be an http:// or https:// URL, found {base:?}"));
        }
        let first = self.models.first();
        let thinking = match effort {
            Some(Effort::Off) => wire::Thinking { thinking: Some("disabled"), effort: None },
            Some(e) => wire::Thinking { thinking: Some("enabled"), effort: Some(e.wire()) },
            None => wire::Thinking {
                thinking: self.thinking.map(|t| match t {
                    Thinking::Enabled => "enabled",
                    Thinking::Disabled => "disabled",
                }),
                effort: None,
            },
        };
        let max_retries = match &self.retry_policy {
            None => 5,
            Some(RetryPolicy { mode: RetryMode::Always, .. }) => 10,
            Some(p) => u32::try_from(p.max_retries.unwrap_or(5).min(MAX_SAFE_INTEGER)).unwrap_or(u32::MAX),
        };
        let context_window = first.and_then(|m| m.context_window).unwrap_or(self.default_context_window);
        let max_tokens = first.and_then(|m| m.max_tokens).unwrap_or(self.max_tokens);
        let max_tokens = if max_tokens >= context_window { (context_window / 2).max(1) } else { max_tokens };
        Ok(Resolved {
            url: format!("{base}/chat/completions"),
            model: first.map(|m| m.id.clone()).unwrap_or_else(|| "deepseek-v4-flash".into()),
            max_tokens,
            context_window,
            thinking,
            max_retries,
            timeout: Duration::from_millis(self.stream_idle_timeout_ms),
        })
    }
}

/// The `llm-deepseek` plugin: provides `model`.
pub struct LlmDeepSeek;

impl Plugin for LlmDeepSeek {
    const NAME: &'static str = PLUGIN_NAME;
    const PROVIDES: &'static [&'static str] = &[SERVICE_NAME];
    const PACKAGES: &'static [&'static str] = &[PACKAGE];
    type Config = Config;

    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        let resolved = config.resolve(std::env::var(BASE_URL_ENV).ok().filter(|v| !v.trim().is_empty())).map_err(PluginError::new)?;
        // Read at start when set; an unset variable is read again per request.
        let key = std::env::var(&config.api_key_env).ok().map(|k| k.trim().to_string()).filter(|k| !k.is_empty());
        let endpoint =
            stream::Endpoint::new(resolved.url, key, Some(config.api_key_env.clone()), resolved.timeout, resolved.max_retries).key_required();
        let settings = Settings {
            model: resolved.model,
            provider: PROVIDER.into(),
            system: None,
            sampling: wire::Sampling { temperature: None, max_tokens: Some(resolved.max_tokens), thinking: resolved.thinking },
            context_window: Some(resolved.context_window),
            no_thinking: wire::Thinking { thinking: Some("disabled"), effort: None },
        };
        ctx.provide(SERVICE_NAME, ModelService::new(endpoint, settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: serde_json::Value) -> Config {
        serde_json::from_value(yaml).unwrap()
    }

    #[test]
    fn the_harness_defaults_resolve_to_its_requests() {
        let r = config(json!({})).resolve(None).unwrap();
        assert_eq!(r.url, "https://api.deepseek.com/chat/completions");
        assert_eq!((r.model.as_str(), r.max_tokens, r.context_window, r.max_retries), ("deepseek-v4-flash", 256_000, 1_000_000, 5));
        assert_eq!(r.thinking, wire::Thinking { thinking: None, effort: None });
        assert_eq!(r.timeout, Duration::from_millis(300_000));
        let env = config(json!({})).resolve(Some("http://127.0.0.1:9/v1/".into())).unwrap();
        assert_eq!(env.url, "http://127.0.0.1:9/v1/chat/completions");
    }

    #[test]
    fn thinking_and_effort_map_as_deepseek_takes_them() {
        let of = |v: serde_json::Value| config(v).resolve(None).map(|r| r.thinking);
        assert_eq!(
            of(json!({"thinking": "enabled", "reasoningEffort": "max"})).unwrap(),
            wire::Thinking { thinking: Some("enabled"), effort: Some("max") }
        );
        assert_eq!(of(json!({"reasoningEffort": "off"})).unwrap(), wire::Thinking { thinking: Some("disabled"), effort: None });
        assert_eq!(of(json!({"thinking": "disabled"})).unwrap(), wire::Thinking { thinking: Some("disabled"), effort: None });
        assert!(of(json!({"thinking": "disabled", "reasoningEffort": "high"})).unwrap_err().contains("can only be off"));
    }

    #[test]
    fn the_first_model_and_its_limits_are_used() {
        let r = config(json!({"models": [{"id": "deepseek-v4-pro", "contextWindow": 128000, "maxTokens": 8000}, {"id": "deepseek-v4-flash"}]}))
            .resolve(None)
            .unwrap();
        assert_eq!((r.model.as_str(), r.max_tokens, r.context_window), ("deepseek-v4-pro", 8000, 128_000));
        // The default max_tokens (256000) does not fit a window of 128000:
        // half the window is sent.
        let r = config(json!({"models": [{"id": "deepseek-v4-pro", "contextWindow": 128000}]})).resolve(None).unwrap();
        assert_eq!((r.max_tokens, r.context_window), (64_000, 128_000));
        assert!(config(json!({"models": [{"id": "a"}, {"id": "a"}]})).resolve(None).unwrap_err().contains("twice"));
        assert!(serde_json::from_value::<Config>(json!({"model": "x"})).is_err(), "unknown keys are refused");
    }
}
