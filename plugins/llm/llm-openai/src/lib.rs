//! `llm-openai`: a model provider for cordis. It provides the `model`
//! service (see [`service`] for its requests) over any API that speaks
//! OpenAI's Chat Completions with streaming: DeepSeek's, OpenAI's, and
//! local servers (llama.cpp's `llama-server`, vLLM, Ollama, LM Studio).
//! `cordis run` without `--script` takes its model from this service.
//!
//! Config (`{baseUrl, model, apiKeyEnv}` plus optional settings, see
//! [`Config`]): requests go to `{baseUrl}/chat/completions`; the API key is
//! read once, when the entry starts, from the environment variable
//! `apiKeyEnv` names (never from the composition) and is sent only in the
//! `Authorization` header of those requests; it is never written to the
//! session log, the terminal or a log line.
//!
//! The library also exports [`deepseek::LlmDeepSeek`], the same provider
//! under the TypeScript harness's `@deepseek-ai/dsh-llm-deepseek` package
//! name and config.
//!
//! Modules: [`wire`] (the request body, the streamed chunks), [`stream`]
//! (one request's worker: HTTP, retries, Server-Sent Events), [`service`]
//! (the `model` service's start / next / cancel protocol).

pub mod deepseek;
pub mod service;
pub mod stream;
pub mod wire;

use std::time::Duration;

use cordis_abi::prelude::*;

pub use service::{ModelService, Settings, SERVICE_NAME};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "llm-openai";

/// The default `requestTimeoutMs`: two minutes.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;

/// The default `maxRetries`.
pub const DEFAULT_MAX_RETRIES: u32 = 2;

/// The config of an `llm-openai` entry.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The API's base URL, without `/chat/completions`: `https://api.deepseek.com`, `https://api.openai.com/v1`, `http://127.0.0.1:8080/v1`. http or https.
    #[schemars(length(min = 1))]
    pub base_url: String,
    /// The model name sent with every request (`deepseek-chat`, `gpt-4.1`, the name a local server gives its model).
    #[schemars(length(min = 1))]
    pub model: String,
    /// The name of the environment variable holding the API key (`DEEPSEEK_API_KEY`). Leave it out for a server that needs no key. The key itself never goes in this file.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub api_key_env: Option<String>,
    /// Sampling temperature; the server's default when left out.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f64>,
    /// The most tokens one answer may have (`max_tokens`); the server's default when left out.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// How long to wait, in milliseconds, to connect, for the answer to start, and for each further piece of a streamed answer (default 120000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 3_600_000))]
    pub request_timeout_ms: Option<u64>,
    /// How many times a request refused with HTTP 429 or 5xx, or whose connection failed, is sent again (default 2), waiting what the server's Retry-After asks (seconds or an HTTP date; at most 60 s) or 0.5 s doubling per retry, with jitter.
    #[serde(default)]
    #[schemars(range(max = 10))]
    pub max_retries: Option<u32>,
    /// The provider label the session log records with each answer (default `openai-compatible`).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub provider: Option<String>,
    /// A system prompt sent first in every request.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The model's context window, in tokens: what a compaction's
    /// threshold is a fraction of (no automatic compaction without it).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub context_window: Option<u64>,
}

/// The `llm-openai` plugin: provides `model`.
pub struct LlmOpenAi;

impl Plugin for LlmOpenAi {
    const NAME: &'static str = PLUGIN_NAME;
    const PROVIDES: &'static [&'static str] = &[SERVICE_NAME];
    type Config = Config;

    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) || base.len() <= "https://".len() {
            return Err(PluginError::new(format!("llm-openai: baseUrl must be an http:// or https:// URL, found {:?}", config.base_url)));
        }
        let url = format!("{base}/chat/completions");
        let api_key = match &config.api_key_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.trim().is_empty() => Some(key.trim().to_string()),
                Ok(_) => return Err(PluginError::new(format!("llm-openai: the environment variable {var} (apiKeyEnv) is empty"))),
                Err(std::env::VarError::NotPresent) => {
                    return Err(PluginError::new(format!(
                        "llm-openai: the environment variable {var} (apiKeyEnv) is not set; export the API key in it"
                    )))
                }
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(PluginError::new(format!("llm-openai: the environment variable {var} (apiKeyEnv) is not valid text")))
                }
            },
        };
        let timeout = Duration::from_millis(config.request_timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
        let endpoint = stream::Endpoint::new(url, api_key, config.api_key_env.clone(), timeout, config.max_retries.unwrap_or(DEFAULT_MAX_RETRIES));
        let settings = Settings {
            model: config.model,
            provider: config.provider.unwrap_or_else(|| "openai-compatible".into()),
            system: config.system_prompt,
            sampling: wire::Sampling {
                temperature: config.temperature,
                max_tokens: config.max_tokens.map(u64::from),
                thinking: wire::Thinking::default(),
            },
            context_window: config.context_window,
            no_thinking: wire::Thinking::default(),
        };
        ctx.provide(SERVICE_NAME, ModelService::new(endpoint, settings))
    }
}

cordis_abi::export_plugin!(LlmOpenAi);
cordis_abi::export_plugin!(deepseek::LlmDeepSeek);
cordis_abi::export_library!();
