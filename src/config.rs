//! `retrysafe.json`: the nearest one above each file applies, so each package of a monorepo
//! can differ. The schema ships as `retrysafe.schema.json`.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const CONFIG_FILE: &str = "retrysafe.json";

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    #[serde(rename = "$schema", default)]
    pub schema: Option<String>,
    /// Rule ids to run (all when empty).
    #[serde(default)]
    pub select: Vec<String>,
    /// Rule ids never to run.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Per-rule severity: "error", "warning" or "off".
    #[serde(default)]
    pub severity: BTreeMap<String, Severity>,
    /// Per-provider overrides of the event key.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Retry window per provider, in seconds; `dedupe-ttl-short` compares TTLs with it.
    #[serde(default)]
    pub retry_windows: BTreeMap<String, u64>,
    /// The TTL `dedupe-ttl-short` fixes raise short TTLs to, in seconds (default 7 days).
    #[serde(default)]
    pub dedupe_ttl_seconds: Option<u64>,
    /// The guard the fixes call, `MODULE#EXPORT`.
    #[serde(default)]
    pub guard: Option<String>,
    /// Extra project or package functions that perform external effects.
    #[serde(default)]
    pub effect_wrappers: Vec<String>,
    /// Calls that are deliberately best-effort (failures may be swallowed).
    #[serde(default)]
    pub best_effort: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Off,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderConfig {
    /// The delivery header that holds the event key (e.g. `x-shopify-event-id`).
    #[serde(default)]
    pub key_header: Option<String>,
    /// A body field path that holds the event key (e.g. `event_id`).
    #[serde(default)]
    pub key_field: Option<String>,
}

#[derive(Debug)]
pub struct ConfigError {
    pub path: PathBuf,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: invalid config: {}", self.path.display(), self.message)
    }
}

impl Config {
    /// Reads and validates `path`; `known_rule` says which rule ids exist (the registry is
    /// the engine's, not the config's).
    pub fn load(path: &Path, known_rule: fn(&str) -> bool) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError { path: path.to_path_buf(), message: e.to_string() })?;
        let config: Config = serde_json::from_str(&text)
            .map_err(|e| ConfigError { path: path.to_path_buf(), message: e.to_string() })?;
        config.validate(known_rule).map_err(|message| ConfigError { path: path.to_path_buf(), message })?;
        Ok(config)
    }

    fn validate(&self, known_rule: fn(&str) -> bool) -> Result<(), String> {
        for id in self.select.iter().chain(&self.ignore).chain(self.severity.keys()) {
            if !known_rule(id) {
                return Err(format!("unknown rule `{id}` (see `retrysafe rules`)"));
            }
        }
        if let Some(guard) = &self.guard
            && GuardSpec::parse(guard).is_none()
        {
            return Err(format!("field `guard`: `{guard}` is not of the form MODULE#EXPORT"));
        }
        Ok(())
    }

    pub fn rule_enabled(&self, id: &str) -> bool {
        if self.severity.get(id) == Some(&Severity::Off) || self.ignore.iter().any(|r| r == id) {
            return false;
        }
        self.select.is_empty() || self.select.iter().any(|r| r == id)
    }

    pub fn severity(&self, id: &str) -> Severity {
        self.severity.get(id).copied().unwrap_or(Severity::Error)
    }

    pub fn retry_window_seconds(&self, provider: &str) -> Option<u64> {
        self.retry_windows.get(provider).copied()
    }
}

/// `--guard "MODULE#EXPORT"`: the module and export the fixes import the guard from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardSpec {
    pub module: String,
    /// The exported name, or `default`.
    pub export: String,
}

impl GuardSpec {
    pub fn parse(spec: &str) -> Option<GuardSpec> {
        let (module, export) = spec.rsplit_once('#')?;
        let valid_ident = |s: &str| {
            !s.is_empty()
                && s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                && s.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        };
        if module.is_empty() || !valid_ident(export) {
            return None;
        }
        Some(GuardSpec { module: module.to_string(), export: export.to_string() })
    }

    /// The local name the fixes call: the export, or `guard` for a default export.
    pub fn local_name(&self) -> &str {
        if self.export == "default" { "guard" } else { &self.export }
    }
}

/// Finds and caches the nearest config for each directory.
pub struct ConfigResolver {
    explicit: Option<Arc<Config>>,
    known_rule: fn(&str) -> bool,
    cache: Mutex<BTreeMap<PathBuf, Arc<Config>>>,
}

impl ConfigResolver {
    pub fn new(explicit: Option<Config>, known_rule: fn(&str) -> bool) -> ConfigResolver {
        ConfigResolver { explicit: explicit.map(Arc::new), known_rule, cache: Mutex::default() }
    }

    pub fn for_file(&self, file: &Path) -> Result<Arc<Config>, ConfigError> {
        if let Some(c) = &self.explicit {
            return Ok(c.clone());
        }
        let dir = file.parent().unwrap_or(Path::new("."));
        if let Some(c) = self.cache.lock().unwrap().get(dir) {
            return Ok(c.clone());
        }
        let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let config = match absolute.ancestors().map(|d| d.join(CONFIG_FILE)).find(|p| p.is_file()) {
            Some(path) => Arc::new(Config::load(&path, self.known_rule)?),
            None => Arc::new(Config::default()),
        };
        self.cache.lock().unwrap().insert(dir.to_path_buf(), config.clone());
        Ok(config)
    }
}
