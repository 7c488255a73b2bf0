//! `retrysafe.json`: the nearest one above each file applies, so each package of a monorepo
//! can differ. Comments and trailing commas are allowed (JSONC). A config may `extend` others
//! (paths relative to it, or `"//"` for the workspace root: the nearest `"root": true` config
//! above it); fields it sets win, lists add up, maps merge per key. The schema ships as
//! `retrysafe.schema.json`.

use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const CONFIG_FILE: &str = "retrysafe.json";

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    #[serde(rename = "$schema", default)]
    pub schema: Option<String>,
    /// Marks the workspace root: `"extends": "//"` in a package's config inherits it.
    #[serde(default)]
    pub root: bool,
    /// Configs merged beneath this one: paths relative to it, or `"//"` for the root.
    #[serde(default)]
    pub extends: Extends,
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
    /// Run the preview rules too.
    #[serde(default)]
    pub preview: bool,
    /// `retrysafe verify` targets; validated by the verify command itself.
    #[serde(default)]
    pub verify: Option<serde_json::Value>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(untagged)]
pub enum Extends {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl Extends {
    fn paths(&self) -> Vec<&str> {
        match self {
            Extends::None => Vec::new(),
            Extends::One(p) => vec![p.as_str()],
            Extends::Many(ps) => ps.iter().map(String::as_str).collect(),
        }
    }
}

/// The `extends` name of the workspace root config.
pub const ROOT_CONFIG: &str = "//";

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

/// Accepts a rule id, or says why not (unknown, with the closest known id).
pub type CheckRule = fn(&str) -> Result<(), String>;

impl Config {
    /// Reads one config file and everything it extends.
    /// `check_rule` accepts a rule id or says why not: the registry is the engine's, not the
    /// config's.
    pub fn load(path: &Path, check_rule: CheckRule) -> Result<Config, ConfigError> {
        Config::load_chain(path, check_rule, &mut Vec::new())
    }

    fn load_chain(path: &Path, check_rule: CheckRule, seen: &mut Vec<PathBuf>) -> Result<Config, ConfigError> {
        let err = |message: String| ConfigError { path: path.to_path_buf(), message };
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if seen.contains(&canonical) {
            return Err(err("`extends` forms a cycle".into()));
        }
        seen.push(canonical);
        if path.is_dir() {
            return Err(err(format!("is a directory; the config is a file named {CONFIG_FILE}")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let value: serde_json::Value =
            serde_json::from_str(&crate::source::jsonc_to_json(&text)).map_err(|e| err(e.to_string()))?;
        if !value.is_object() {
            let kind = match value {
                serde_json::Value::Array(_) => "an array",
                serde_json::Value::String(_) => "a string",
                serde_json::Value::Number(_) => "a number",
                serde_json::Value::Bool(_) => "a boolean",
                _ => "null",
            };
            return Err(err(format!("must be a JSON object ({{ ... }}), not {kind}")));
        }
        let mut config: Config = serde_json::from_value(value).map_err(|e| err(e.to_string()))?;
        config.validate(check_rule).map_err(err)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut merged = Config::default();
        for base in config.extends.paths() {
            let base_path = if base == ROOT_CONFIG {
                root_config_above(dir).ok_or_else(|| {
                    err(format!("`extends: \"//\"`: no {CONFIG_FILE} with `\"root\": true` in a directory above"))
                })?
            } else {
                dir.join(base)
            };
            if !base_path.is_file() {
                return Err(err(format!("`extends`: {} does not exist", base_path.display())));
            }
            merged = merged.overlaid_by(Config::load_chain(&base_path, check_rule, seen)?);
        }
        config = merged.overlaid_by(config);
        Ok(config)
    }

    /// `self` with `over`'s settings on top: fields `over` sets win, lists add up, maps merge.
    fn overlaid_by(mut self, over: Config) -> Config {
        self.schema = over.schema.or(self.schema);
        self.root = over.root;
        self.extends = Extends::None;
        if !over.select.is_empty() {
            self.select = over.select;
        }
        self.ignore.extend(over.ignore);
        self.severity.extend(over.severity);
        self.providers.extend(over.providers);
        self.retry_windows.extend(over.retry_windows);
        self.dedupe_ttl_seconds = over.dedupe_ttl_seconds.or(self.dedupe_ttl_seconds);
        self.guard = over.guard.or(self.guard);
        self.effect_wrappers.extend(over.effect_wrappers);
        self.best_effort.extend(over.best_effort);
        self.preview |= over.preview;
        self.verify = over.verify.or(self.verify);
        self
    }

    fn validate(&self, check_rule: CheckRule) -> Result<(), String> {
        for id in self.select.iter().chain(&self.ignore).chain(self.severity.keys()) {
            check_rule(id)?;
        }
        if let Some(guard) = &self.guard
            && GuardSpec::parse(guard).is_none()
        {
            return Err(format!("field `guard`: `{guard}` is not of the form MODULE#EXPORT"));
        }
        Ok(())
    }

    /// Whether the config lets rule `id` run; `preview_rule` says whether it is a preview
    /// rule, which runs only when preview is on (`preview` is the `--preview` flag) or when
    /// this config or the command line (`selected_by_id`) names it.
    pub fn rule_enabled(&self, id: &str, preview_rule: bool, preview: bool, selected_by_id: bool) -> bool {
        if self.severity.get(id) == Some(&Severity::Off) || self.ignore.iter().any(|r| r == id) {
            return false;
        }
        let named = self.select.iter().any(|r| r == id);
        if preview_rule && !(preview || self.preview || named || selected_by_id) {
            return false;
        }
        self.select.is_empty() || named
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

/// Finds and caches the nearest config for each directory (hashed: ordered path keys compare
/// component by component, and every file asks twice).
pub struct ConfigResolver {
    explicit: Option<Arc<Config>>,
    check_rule: CheckRule,
    cache: Mutex<HashMap<PathBuf, Arc<Config>>>,
}

impl ConfigResolver {
    pub fn new(explicit: Option<Config>, check_rule: CheckRule) -> ConfigResolver {
        ConfigResolver { explicit: explicit.map(Arc::new), check_rule, cache: Mutex::default() }
    }

    pub fn for_file(&self, file: &Path) -> Result<Arc<Config>, ConfigError> {
        if let Some(c) = &self.explicit {
            return Ok(c.clone());
        }
        let dir = file.parent().unwrap_or(Path::new("."));
        if let Some(c) = self.cache.lock().unwrap().get(dir) {
            return Ok(c.clone());
        }
        let config = match nearest_config(dir) {
            Some(path) => Arc::new(Config::load(&path, self.check_rule)?),
            None => Arc::new(Config::default()),
        };
        self.cache.lock().unwrap().insert(dir.to_path_buf(), config.clone());
        Ok(config)
    }

    /// The nearest config file above `file` (None: the defaults apply).
    pub fn source_for(&self, file: &Path) -> Option<PathBuf> {
        nearest_config(file.parent().unwrap_or(Path::new(".")))
    }
}

/// The first `retrysafe.json` in `dir` or above it. A directory of that name counts too, so
/// that loading it reports the mistake instead of skipping it silently.
fn nearest_config(dir: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    absolute.ancestors().map(|d| d.join(CONFIG_FILE)).find(|p| p.exists())
}

/// The nearest config strictly above `dir` that says `"root": true`.
fn root_config_above(dir: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    absolute.ancestors().skip(1).map(|d| d.join(CONFIG_FILE)).filter(|p| p.is_file()).find(|p| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&crate::source::jsonc_to_json(&t)).ok())
            .is_some_and(|v| v["root"] == true)
    })
}
