//! `cordis plugins`: what the libraries on the plugin path declare, read
//! without running any `apply`.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::library::{load_library, unwrap_export};
use super::resolve::PluginPath;

/// One library file found on the plugin path.
#[derive(Debug, Clone, Serialize)]
pub struct LibraryInfo {
    /// The file.
    pub file: PathBuf,
    /// Which part of the plugin path it was found through.
    pub found_through: String,
    /// The cordis-abi version it was built against (`1.0`); absent when it
    /// could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abi: Option<String>,
    /// Its plugins (empty when it could not be read).
    pub plugins: Vec<PluginInfo>,
    /// Why it could not be read as a plugin library.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One plugin a library exports.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    /// The plugin's name.
    pub name: String,
    /// The services it injects.
    pub inject: Vec<String>,
    /// The services it provides.
    pub provides: Vec<String>,
    /// The package names that select it.
    pub packages: Vec<String>,
    /// Host capabilities it requires, as `name@version (cordis-abi X.Y)`.
    pub requires: Vec<String>,
    /// Host capabilities it uses when the host has them, as `name@version`.
    pub uses: Vec<String>,
    /// Its config: `required` keys and each property's type.
    pub config: ConfigSummary,
    /// Why the declaration is unusable, if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What is wrong with the declaration without making it unusable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// What is wrong with a plugin's declared names and services.
fn problems_of(plugin: &PluginInfo) -> Vec<String> {
    let mut out = Vec::new();
    let bad_name = |s: &str| s.trim().is_empty() || s.chars().any(|c| c == '/' || c.is_whitespace() || c.is_control());
    if bad_name(&plugin.name) {
        out.push(format!("the plugin name {:?} cannot be named from a composition (no `/`, spaces or empty names)", plugin.name));
    }
    let mut seen = Vec::new();
    for service in plugin.provides.iter().chain(plugin.inject.iter()) {
        if service.trim().is_empty() {
            out.push("a service name is empty".into());
        }
    }
    for service in &plugin.provides {
        if crate::context::SERVICE_NAMES.contains(&service.as_str()) {
            out.push(format!("provides `{service}`, which is a host service: providing it always fails"));
        }
        if seen.contains(&service) {
            out.push(format!("lists `{service}` twice among the services it provides"));
        }
        seen.push(service);
        if plugin.inject.contains(service) {
            out.push(format!("injects `{service}`, which it provides itself: an entry of it would wait for itself"));
        }
    }
    out
}

/// A short summary of a config schema.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConfigSummary {
    /// Keys that must be given.
    pub required: Vec<String>,
    /// Every property with its JSON Schema type (`boolean`, `string`,
    /// `array`, ...; `any` when the schema does not say).
    pub properties: Vec<(String, String)>,
}

impl ConfigSummary {
    fn of(schema: &Value) -> ConfigSummary {
        let required = schema["required"].as_array().map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default();
        let properties = schema["properties"]
            .as_object()
            .map(|p| {
                p.iter()
                    .map(|(k, v)| {
                        let ty = match &v["type"] {
                            Value::String(t) => t.clone(),
                            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | "),
                            _ => "any".into(),
                        };
                        (k.clone(), ty)
                    })
                    .collect()
            })
            .unwrap_or_default();
        ConfigSummary { required, properties }
    }
}

/// Every `lib*.so` on `plugin_path`, in search order, each file once.
pub fn catalog(plugin_path: &PluginPath) -> Vec<LibraryInfo> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (dir, from) in &plugin_path.dirs {
        let files = super::resolve::library_files(dir);
        for file in files {
            if !seen.insert(file.canonicalize().unwrap_or_else(|_| file.clone())) {
                continue;
            }
            let mut info = LibraryInfo { file: file.clone(), found_through: (*from).to_string(), abi: None, plugins: Vec::new(), error: None };
            match load_library(&file) {
                Err(e) => info.error = Some(e.to_string()),
                Ok(lib) => {
                    info.abi = Some(lib.abi.to_string());
                    for decl in &lib.plugins {
                        let name = decl.name.to_string();
                        let mut plugin = PluginInfo {
                            name: name.clone(),
                            inject: decl.inject.iter().map(|s| s.to_string()).collect(),
                            provides: lib.provides.iter().filter(|(p, _)| *p == name).map(|(_, s)| s.clone()).collect(),
                            packages: lib.packages.iter().filter(|(_, p)| *p == name).map(|(pkg, _)| pkg.clone()).collect(),
                            requires: decl
                                .requires
                                .iter()
                                .map(|r| format!("{}@{} (cordis-abi {})", r.capability.name, r.capability.version, r.since))
                                .collect(),
                            uses: decl.uses.iter().map(|c| format!("{}@{}", c.name, c.version)).collect(),
                            config: ConfigSummary::default(),
                            error: None,
                            problems: Vec::new(),
                        };
                        plugin.problems = problems_of(&plugin);
                        let mut errors = Vec::new();
                        match unwrap_export(&lib, Some(&name)) {
                            Ok(picked) => plugin.config = ConfigSummary::of(&picked.config_schema),
                            Err(e) => errors.push(e.to_string()),
                        }
                        if let Err(missing) = crate::capabilities::check_requirements(&name, decl.requires.as_slice()) {
                            errors.extend(missing);
                        }
                        plugin.error = (!errors.is_empty()).then(|| errors.join("; "));
                        info.plugins.push(plugin);
                    }
                }
            }
            out.push(info);
        }
    }
    out
}
