//! Batch runs over large trees and monorepos: which files a run covers (`--changed-since`,
//! `--staged`, `--shard`), the result cache (`.retrysafe-cache`), the progress line, the
//! per-package summary, and the git checks of `fix --write`.

use crate::project::{self, Project};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A bound on the import closure followed per file, so a generated barrel cannot stall a run.
const MAX_REACHED_FILES: usize = 5_000;

/// The project files `path` reaches through imports, re-exports and requires (transitively),
/// by path: resolved from the text alone, nothing is parsed.
pub fn reached_files(project: &Project, path: &Path, text: &str) -> HashSet<PathBuf> {
    let specifier = crate::regex!(r#"(?:\bfrom|\bimport|\brequire)\s*\(?\s*["']([^"'\n]+)["']"#);
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut queue: Vec<(PathBuf, String)> = vec![(path.to_path_buf(), text.to_string())];
    while let Some((from, text)) = queue.pop() {
        for c in specifier.captures_iter(&text) {
            let Some(target) = project.resolve(&from, &c[1]).map(|p| project::normalize(&p)) else { continue };
            if target == path || seen.contains(&target) || seen.len() >= MAX_REACHED_FILES {
                continue;
            }
            seen.insert(target.clone());
            if let Ok(t) = project.current_text(&target) {
                queue.push((target, t));
            }
        }
    }
    seen
}

fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("git {}: {}", args.join(" "), err.lines().next().unwrap_or("failed")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn git_root(dir: &Path) -> Result<PathBuf, String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])
        .map_err(|_| format!("{}: not inside a git repository", dir.display()))?;
    Ok(PathBuf::from(top.trim()))
}

/// What changed: against a ref (committed, staged, unstaged and untracked changes), or what is
/// staged. Absolute, normalized paths.
pub enum ChangedSet {
    Since(String),
    Staged,
}

pub fn changed_files(dir: &Path, which: &ChangedSet) -> Result<HashSet<PathBuf>, String> {
    let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let root = git_root(&dir)?;
    let mut names = match which {
        ChangedSet::Since(reference) => {
            git(&root, &["rev-parse", "--verify", "--quiet", &format!("{reference}^{{commit}}")])
                .map_err(|_| format!("--changed-since: `{reference}` is not a commit in {}", root.display()))?;
            let mut n = git(&root, &["diff", "--name-only", "--no-renames", "-z", reference, "--"])?;
            n.push_str(&git(&root, &["ls-files", "--others", "--exclude-standard", "-z"])?);
            n
        }
        ChangedSet::Staged => git(&root, &["diff", "--name-only", "--no-renames", "--cached", "-z", "--"])?,
    };
    names.retain(|c| c != '\n');
    Ok(names.split('\0').filter(|n| !n.is_empty()).map(|n| project::normalize(&root.join(n))).collect())
}

/// The files among `files` that changed, plus those that reach a changed file through their
/// imports (a handler whose callee changed).
pub fn changed_with_importers(project: &Project, files: &[PathBuf], changed: &HashSet<PathBuf>) -> HashSet<PathBuf> {
    use rayon::prelude::*;
    files
        .par_iter()
        .filter(|path| {
            let key = project::normalize(&std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
            if changed.contains(&key) {
                return true;
            }
            let Ok(text) = project.current_text(&key) else { return false };
            crate::workspace::may_be_relevant(text.as_bytes())
                && reached_files(project, &key, &text).iter().any(|r| changed.contains(r))
        })
        .cloned()
        .collect()
}

/// `--shard I/N`: 1-based shard I of N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}` is not of the form I/N with 1 <= I <= N (e.g. 2/4)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// Whether this shard owns `path`. By a hash of the path relative to the git root (or the
    /// working directory), so every machine of a CI matrix agrees, and a file keeps its shard
    /// when others are added.
    pub fn owns(&self, path: &Path, base: &Path) -> bool {
        // Canonical, as git reports its root: a checkout reached through a symlink shards alike.
        let absolute =
            std::fs::canonicalize(path).or_else(|_| std::path::absolute(path)).unwrap_or_else(|_| path.to_path_buf());
        let relative = absolute.strip_prefix(base).unwrap_or(&absolute);
        fnv1a(relative.to_string_lossy().replace('\\', "/").as_bytes()) % self.count == self.index - 1
    }
}

/// The directory shard paths are relative to: the git root, else the working directory.
pub fn shard_base() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    git_root(&cwd).unwrap_or(cwd)
}

/// FNV-1a: a hash that is the same on every platform and every build.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `fix --write` in a git work tree with uncommitted changes: the paths `git status` lists.
pub fn dirty_files(paths: &[PathBuf]) -> Vec<String> {
    let dir =
        paths.first().map(|p| if p.is_dir() { p.clone() } else { p.parent().unwrap_or(Path::new(".")).to_path_buf() });
    let dir = dir.filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| PathBuf::from("."));
    let Ok(root) = git_root(&dir) else { return Vec::new() };
    let Ok(status) = git(&root, &["status", "--porcelain", "--untracked-files=normal"]) else { return Vec::new() };
    status.lines().filter(|l| l.len() > 3).map(|l| l[3..].to_string()).collect()
}

/// The package a file belongs to: the nearest directory above it with a package.json, by its
/// `name` (or the directory when it has none).
pub struct Packages {
    cache: HashMap<PathBuf, Option<(PathBuf, String)>>,
}

impl Default for Packages {
    fn default() -> Packages {
        Packages::new()
    }
}

impl Packages {
    pub fn new() -> Packages {
        Packages { cache: HashMap::new() }
    }

    pub fn of(&mut self, file: &Path) -> Option<(PathBuf, String)> {
        let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
        let dir = absolute.parent()?.to_path_buf();
        if let Some(found) = self.cache.get(&dir) {
            return found.clone();
        }
        let found = dir.ancestors().find(|d| d.join("package.json").is_file()).map(|d| {
            let name = std::fs::read_to_string(d.join("package.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&project::jsonc_to_json(&t)).ok())
                .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(String::from))
                .unwrap_or_else(|| crate::report::display_path(d));
            (d.to_path_buf(), name)
        });
        self.cache.insert(dir, found.clone());
        found
    }
}

#[derive(Default, Clone, Copy)]
pub struct PackageCounts {
    pub handlers: usize,
    pub findings: usize,
    pub fixes: usize,
}

/// The per-package table printed at the end of a monorepo run (more than one package).
pub fn package_summary(rows: &BTreeMap<String, PackageCounts>) -> Option<String> {
    if rows.len() < 2 {
        return None;
    }
    let width = rows.keys().map(|k| k.len()).max().unwrap_or(7).max(7);
    let mut out = format!("{:<width$}  {:>8}  {:>8}  {:>6}\n", "package", "handlers", "findings", "fixes");
    for (name, c) in rows {
        out.push_str(&format!("{name:<width$}  {:>8}  {:>8}  {:>6}\n", c.handlers, c.findings, c.fixes));
    }
    Some(out)
}

/// Whether a progress line may be drawn: stderr is a terminal and this is not CI.
pub fn progress_allowed() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("CI").is_none()
}

/// `.retrysafe-cache`: the files whose last analysis found nothing, each with the key it was
/// found under (the file's text, the texts of the project files it imports, the configs above
/// it, every schema file of the run, the options and the version). A file whose key is
/// unchanged is not parsed or analysed again. Files with findings, or with a suppression
/// comment (whose use is judged across the run), are always analysed.
pub struct ResultCache {
    file: PathBuf,
    salt: u64,
    stored: HashMap<String, CacheEntry>,
    keys: HashMap<PathBuf, u64>,
    clean: std::sync::Mutex<Vec<PathBuf>>,
    config_hashes: std::sync::Mutex<HashMap<PathBuf, u64>>,
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct CacheEntry {
    key: String,
    handlers: usize,
}

/// A file's name in the cache: absolute, so runs from other directories share entries.
fn cache_id(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    project::normalize(&absolute).to_string_lossy().into_owned()
}

/// Which build is running: two builds of one version may judge a file differently (a rule
/// fixed between releases, a development build), so a clean result of one is no answer for the
/// other. The executable's size and modification time tell builds apart without reading it.
fn build_identity() -> u64 {
    static IDENTITY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *IDENTITY.get_or_init(|| {
        let meta = std::env::current_exe().and_then(std::fs::metadata);
        let (len, modified) = match meta {
            Ok(m) => (
                m.len(),
                m.modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos()),
            ),
            Err(_) => (0, 0),
        };
        fnv1a(format!("{len}:{modified}").as_bytes())
    })
}

pub const CACHE_DIR: &str = ".retrysafe-cache";
const CACHE_FILE: &str = "results-v1.json";

impl ResultCache {
    /// Opens the cache under `dir` (an unreadable or foreign cache is an empty one) and keys
    /// every file of the run that may be relevant.
    pub fn open(dir: &Path, project: &Project, files: &[PathBuf], options_signature: &str) -> ResultCache {
        use rayon::prelude::*;
        let file = dir.join(CACHE_DIR).join(CACHE_FILE);
        let stored: HashMap<String, CacheEntry> = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .filter(|v| v["version"] == env!("CARGO_PKG_VERSION"))
            .and_then(|v| serde_json::from_value(v["clean"].clone()).ok())
            .unwrap_or_default();
        let mut salt = fnv1a(env!("CARGO_PKG_VERSION").as_bytes())
            ^ fnv1a(options_signature.as_bytes()).rotate_left(1)
            ^ build_identity().rotate_left(2);
        for schema in files.iter().filter(|f| crate::workspace::is_schema_file(f)) {
            let text = project.current_text(schema).unwrap_or_default();
            salt = salt.rotate_left(5) ^ fnv1a(schema.to_string_lossy().as_bytes()) ^ fnv1a(text.as_bytes());
        }
        let mut cache = ResultCache {
            file,
            salt,
            stored,
            keys: HashMap::new(),
            clean: Default::default(),
            config_hashes: Default::default(),
        };
        let keys: HashMap<PathBuf, u64> =
            files.par_iter().filter_map(|f| cache.key(project, f).map(|k| (f.clone(), k))).collect();
        cache.keys = keys;
        cache
    }

    fn key(&self, project: &Project, path: &Path) -> Option<u64> {
        let absolute = project::normalize(&std::path::absolute(path).ok()?);
        let text = project.current_text(&absolute).ok()?;
        if text.contains("retrysafe-ignore") || !crate::workspace::may_be_relevant(text.as_bytes()) {
            return None;
        }
        let mut reached: Vec<PathBuf> = reached_files(project, &absolute, &text).into_iter().collect();
        reached.sort();
        let mut h = self.salt ^ fnv1a(text.as_bytes()) ^ self.configs_above(&absolute).rotate_left(7);
        for r in reached {
            let t = project.current_text(&r).unwrap_or_default();
            h = h.rotate_left(3) ^ fnv1a(r.to_string_lossy().as_bytes()) ^ fnv1a(t.as_bytes()).rotate_left(11);
        }
        Some(h)
    }

    /// A hash of every retrysafe.json, tsconfig.json and jsconfig.json above a file.
    fn configs_above(&self, path: &Path) -> u64 {
        let Some(dir) = path.parent() else { return 0 };
        if let Some(h) = self.config_hashes.lock().unwrap().get(dir) {
            return *h;
        }
        let mut h = self.configs_above(dir);
        for name in [crate::config::CONFIG_FILE, "tsconfig.json", "jsconfig.json"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
                h = h.rotate_left(13) ^ fnv1a(name.as_bytes()) ^ fnv1a(text.as_bytes());
            }
        }
        self.config_hashes.lock().unwrap().insert(dir.to_path_buf(), h);
        h
    }

    fn stored_key(&self, path: &Path) -> Option<&CacheEntry> {
        self.stored.get(&cache_id(path))
    }

    /// Whether the file's last analysis under the same key found nothing.
    pub fn is_clean(&self, path: &Path) -> bool {
        match (self.keys.get(path), self.stored_key(path)) {
            (Some(k), Some(entry)) => entry.key == format!("{k:016x}"),
            _ => false,
        }
    }

    /// Handlers the cached file held, for the per-package summary.
    pub fn cached_handlers(&self, path: &Path) -> usize {
        self.stored_key(path).map_or(0, |e| e.handlers)
    }

    /// Called for each analysed file: remembers those that found nothing.
    pub fn record(&self, path: &Path, findings: usize) {
        if findings == 0 && self.keys.contains_key(path) {
            self.clean.lock().unwrap().push(path.to_path_buf());
        }
    }

    /// Writes the cache: this run's clean files join those still stored; files analysed
    /// with findings leave it. A failure to write is a note, never an error of the run.
    pub fn save(&self, analysed: &[PathBuf], handlers: &BTreeMap<PathBuf, usize>) -> Result<(), String> {
        let mut stored = self.stored.clone();
        for path in analysed {
            stored.remove(&cache_id(path));
        }
        for path in self.clean.lock().unwrap().iter() {
            let key = format!("{:016x}", self.keys[path]);
            let handlers = handlers.get(path).or_else(|| handlers.get(&project::normalize(path))).copied().unwrap_or(0);
            stored.insert(cache_id(path), CacheEntry { key, handlers });
        }
        let dir = self.file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        // The cache is never part of the project: git ignores it, and `fix --write`'s
        // dirty-tree check does not see it.
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            let _ = std::fs::write(&ignore, "# written by retrysafe\n*\n");
        }
        let body = serde_json::json!({ "version": env!("CARGO_PKG_VERSION"), "clean": stored });
        crate::fix::write::write_atomic(&self.file, &body.to_string())
            .map_err(|e| format!("{}: cannot write: {e}", self.file.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_partition_every_path_once() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert!("0/3".parse::<Shard>().is_err());
        assert!("4/3".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
        let base = Path::new("/repo");
        let shards: Vec<Shard> = (1..=3).map(|i| Shard { index: i, count: 3 }).collect();
        for n in 0..200 {
            let path = PathBuf::from(format!("/repo/packages/p{}/src/f{n}.ts", n % 7));
            assert_eq!(shards.iter().filter(|s| s.owns(&path, base)).count(), 1);
        }
    }
}
