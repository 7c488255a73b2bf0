//! The module graph: import resolution (relative paths, index files, tsconfig/jsconfig
//! `paths`, the packages of an npm/yarn/pnpm workspace) and a lazily filled cache of parsed
//! project files shared by all threads.

use crate::source::{Dialect, SourceFile, Span, TextChange};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use crate::syntax::ast::{self, text};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use tree_sitter::Node;

pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
const EXTENSIONS: &[&str] = &["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];

/// Why a file could not be analysed. Each renders as one line naming the file.
#[derive(Debug, Clone)]
pub enum LoadError {
    Io(PathBuf, String),
    TooLarge(PathBuf, u64),
    Binary(PathBuf),
    NotUtf8(PathBuf),
    Unsupported(PathBuf),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Io(p, e) => write!(f, "{}: cannot read: {e}", p.display()),
            LoadError::TooLarge(p, n) => {
                write!(f, "{}: skipped: {n} bytes is over the {MAX_FILE_BYTES}-byte limit", p.display())
            }
            LoadError::Binary(p) => write!(f, "{}: skipped: binary file", p.display()),
            LoadError::NotUtf8(p) => write!(f, "{}: skipped: not valid UTF-8", p.display()),
            LoadError::Unsupported(p) => write!(f, "{}: skipped: not a JavaScript or TypeScript file", p.display()),
        }
    }
}

/// Reads a file as text, refusing binary, non-UTF-8 and oversized files.
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    decode(path, read_bytes(path)?)
}

/// Reads a file's bytes, refusing oversized files before reading them.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| LoadError::Io(path.to_path_buf(), e.to_string()))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge(path.to_path_buf(), meta.len()));
    }
    std::fs::read(path).map_err(|e| LoadError::Io(path.to_path_buf(), e.to_string()))
}

pub fn decode(path: &Path, bytes: Vec<u8>) -> Result<String, LoadError> {
    if memchr::memchr(0, &bytes[..bytes.len().min(8192)]).is_some() {
        return Err(LoadError::Binary(path.to_path_buf()));
    }
    String::from_utf8(bytes).map_err(|_| LoadError::NotUtf8(path.to_path_buf()))
}

pub use crate::source::Import;

/// A function definition found in a file.
#[derive(Clone, Debug)]
pub struct FunctionDef {
    pub file: Arc<SourceFile>,
    pub span: Span,
    pub name: String,
}

impl FunctionDef {
    pub fn node(&self) -> Option<Node<'_>> {
        self.file.node_at(self.span)
    }
}

/// tsconfig `paths`: pattern → absolute targets, longest pattern first.
type PathAliases = Vec<(String, Vec<PathBuf>)>;

/// The packages of a monorepo workspace: package name → its directory and package.json.
/// A parse of a file and the changes made to its text since.
type ParseAndChanges = (Arc<SourceFile>, Vec<TextChange>);

type WorkspacePackages = HashMap<String, (PathBuf, serde_json::Value)>;

type FileList = Arc<Vec<PathBuf>>;

#[derive(Default)]
pub struct Project {
    files: Mutex<HashMap<PathBuf, Option<Arc<SourceFile>>>>,
    path_aliases: Mutex<HashMap<PathBuf, Arc<PathAliases>>>,
    /// Per directory: the packages of the workspace it belongs to (empty outside one).
    workspaces: Mutex<HashMap<PathBuf, Arc<WorkspacePackages>>>,
    /// Directory listings (`files_in`).
    listings: Mutex<HashMap<PathBuf, Arc<Vec<PathBuf>>>>,
    /// Per importing directory and module specifier: the file it resolves to (`resolve`).
    /// Every handler of a directory imports the same modules, and each resolution asks the
    /// file system about a dozen candidate paths. Dropped whenever a file may have appeared
    /// or gone (`set_overlay`, `evict`, `add_virtual_file`).
    resolutions: Mutex<HashMap<PathBuf, HashMap<String, Option<PathBuf>>>>,
    /// Per package root and word: its script files whose text holds the word (`files_containing`).
    containing: Mutex<HashMap<(PathBuf, String), FileList>>,
    /// Source given on stdin, standing in for this path.
    pub stdin_override: Option<(PathBuf, String)>,
    /// Files a fix would create (a new migration), visible to later fix passes.
    virtual_files: Mutex<HashMap<PathBuf, String>>,
    /// Unsaved editor buffers: they stand in for the file on disk (the LSP's open documents).
    overlays: Mutex<HashMap<PathBuf, Arc<str>>>,
    /// The last parse of an edited overlay and the edits made since, in order: the next load
    /// parses incrementally from it.
    edited: Mutex<HashMap<PathBuf, ParseAndChanges>>,
}

thread_local! {
    static READS: std::cell::RefCell<Option<std::collections::HashSet<PathBuf>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` and returns, with its result, every project file whose text it read on this
/// thread (loads, texts, directory contents). The fix loop re-analyses a file only when one of
/// those changed, so whatever reads a file's text must go through `note_read`.
pub fn recording_reads<R>(f: impl FnOnce() -> R) -> (R, std::collections::HashSet<PathBuf>) {
    let outer = READS.with(|r| r.borrow_mut().replace(Default::default()));
    let out = f();
    let reads = READS.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer)).unwrap_or_default();
    // A recording inside another: the outer one read these too.
    READS.with(|r| {
        if let Some(outer) = r.borrow_mut().as_mut() {
            outer.extend(reads.iter().cloned());
        }
    });
    (out, reads)
}

fn note_read(path: &Path) {
    READS.with(|r| {
        if let Some(reads) = r.borrow_mut().as_mut()
            && !reads.contains(path)
        {
            reads.insert(path.to_path_buf());
        }
    });
}

impl Project {
    pub fn new() -> Project {
        Project::default()
    }

    /// Parses (once) and returns a project file.
    pub fn load(&self, path: &Path) -> Result<Arc<SourceFile>, LoadError> {
        let key = normalize(path);
        note_read(&key);
        if let Some(Some(file)) = self.files.lock().unwrap().get(&key) {
            return Ok(file.clone());
        }
        let dialect = match Dialect::for_path(&key) {
            Some(d) => d,
            None if crate::workspace::is_schema_file(&key) => Dialect::Text,
            None => return Err(LoadError::Unsupported(key.clone())),
        };
        let overlay = self.overlays.lock().unwrap().get(&key).map(|t| t.to_string());
        let previous = match overlay {
            Some(_) => self.edited.lock().unwrap().remove(&key),
            None => None,
        };
        let text = match (&self.stdin_override, overlay) {
            (_, Some(t)) => t,
            (Some((p, t)), _) if normalize(p) == key => t.clone(),
            _ => read_text(&key)?,
        };
        let parsed = match previous {
            Some((old, changes)) if old.dialect == dialect => old.reparsed(text, &changes),
            _ => SourceFile::new(key.clone(), text, dialect),
        };
        let file = Arc::new(parsed.ok_or_else(|| LoadError::Io(key.clone(), "the parser gave up".into()))?);
        self.files.lock().unwrap().insert(key, Some(file.clone()));
        Ok(file)
    }

    /// Drops a parsed file from the cache.
    pub fn evict(&self, path: &Path) {
        self.files.lock().unwrap().remove(&normalize(path));
        self.resolutions.lock().unwrap().clear();
    }

    /// Makes `text` stand in for the file at `path` (None: the file on disk again) and drops
    /// its parse, so the next `load` sees the new text.
    pub fn set_overlay(&self, path: &Path, text: Option<Arc<str>>) {
        let key = normalize(path);
        match text {
            Some(t) => self.overlays.lock().unwrap().insert(key.clone(), t),
            None => self.overlays.lock().unwrap().remove(&key),
        };
        self.files.lock().unwrap().remove(&key);
        self.edited.lock().unwrap().remove(&key);
        self.resolutions.lock().unwrap().clear();
    }

    /// `set_overlay` for an editor buffer changed by `changes` (in order, each in the terms of
    /// the text before it) from the overlay it held: the next load reuses the last parse.
    pub fn edit_overlay(&self, path: &Path, text: Arc<str>, changes: &[TextChange]) {
        let key = normalize(path);
        let before = self.overlays.lock().unwrap().insert(key.clone(), text);
        let parsed = self.files.lock().unwrap().remove(&key).flatten();
        let mut edited = self.edited.lock().unwrap();
        match (edited.get_mut(&key), parsed) {
            // Edited again before a load: the parse is older still.
            (Some((_, pending)), _) => pending.extend_from_slice(changes),
            // Only a parse of the text the changes were made to can be reused.
            (None, Some(old)) if before.as_deref() == Some(old.text.as_str()) => {
                edited.insert(key, (old, changes.to_vec()));
            }
            (None, _) => {}
        }
    }

    /// The text of a file as analysis sees it: an overlay if there is one, else the disk.
    pub fn current_text(&self, path: &Path) -> Result<String, LoadError> {
        let key = normalize(path);
        note_read(&key);
        if let Some(t) = self.overlays.lock().unwrap().get(&key) {
            return Ok(t.to_string());
        }
        read_text(&key)
    }

    /// Every file parsed so far.
    pub fn loaded_files(&self) -> Vec<Arc<SourceFile>> {
        self.files.lock().unwrap().values().flatten().cloned().collect()
    }

    /// Replaces the cached text of a file (the fix loop re-checks edited text).
    pub fn insert(&self, file: Arc<SourceFile>) {
        self.files.lock().unwrap().insert(normalize(&file.path), Some(file));
    }

    pub fn add_virtual_file(&self, path: PathBuf, text: String) {
        let path = normalize(&path);
        if let Some(dir) = path.parent() {
            self.listings.lock().unwrap().remove(dir);
        }
        self.resolutions.lock().unwrap().clear();
        self.virtual_files.lock().unwrap().insert(path, text);
    }

    /// The files of a directory, by path only: what is on disk plus files fixes would create.
    /// Listings are cached: rules ask for the same directories once per handler.
    pub fn files_in(&self, dir: &Path) -> Arc<Vec<PathBuf>> {
        let dir = normalize(dir);
        if let Some(found) = self.listings.lock().unwrap().get(&dir) {
            return found.clone();
        }
        let mut out: Vec<PathBuf> = std::fs::read_dir(on_disk(&dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()))
            .map(|e| normalize(&e.path()))
            .collect();
        for p in self.virtual_files.lock().unwrap().keys() {
            if p.parent() == Some(dir.as_path()) && !out.contains(p) {
                out.push(p.clone());
            }
        }
        out.sort();
        let out = Arc::new(out);
        self.listings.lock().unwrap().insert(dir, out.clone());
        out
    }

    /// The script files under `root` (dependencies and build output left out) whose text holds
    /// `word`: where a package configures something its handlers depend on (a queue's retry
    /// options registered in a module file). Searched once per root and word.
    pub fn files_containing(&self, root: &Path, word: &str) -> Arc<Vec<PathBuf>> {
        let key = (normalize(root), word.to_string());
        if let Some(found) = self.containing.lock().unwrap().get(&key).cloned() {
            found.iter().for_each(|p| note_read(p));
            return found;
        }
        let mut out = Vec::new();
        let walk = ignore::WalkBuilder::new(on_disk(&key.0))
            .standard_filters(false)
            .hidden(true)
            .filter_entry(|e| {
                !matches!(
                    e.file_name().to_str(),
                    Some("node_modules" | "dist" | "build" | ".next" | "coverage" | "out" | ".git")
                )
            })
            .build();
        for entry in walk.flatten() {
            let path = normalize(entry.path());
            // Only the files that hold the word are noted as read: the others do not change
            // what the caller finds unless they gain it.
            let overlay = self.overlays.lock().unwrap().get(&path).cloned();
            if entry.file_type().is_some_and(|t| t.is_file())
                && crate::source::Dialect::for_path(&path).is_some()
                && match overlay {
                    Some(text) => text.contains(word),
                    None => read_text(&path).is_ok_and(|t| t.contains(word)),
                }
            {
                note_read(&path);
                out.push(path);
            }
        }
        out.sort();
        let out = Arc::new(out);
        self.containing.lock().unwrap().insert(key, out.clone());
        out
    }

    /// The files of a directory with their text: what is on disk plus files fixes would create.
    pub fn list_dir(&self, dir: &Path) -> Vec<(PathBuf, String)> {
        let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .filter_map(|p| read_text(&p).ok().map(|t| (normalize(&p), t)))
            .collect();
        for (p, _) in &out {
            note_read(p);
        }
        let dir = normalize(dir);
        for (p, t) in self.virtual_files.lock().unwrap().iter() {
            if p.parent() == Some(dir.as_path()) && !out.iter().any(|(q, _)| q == p) {
                out.push((p.clone(), t.clone()));
            }
        }
        out.sort();
        out
    }

    /// The subdirectories of a directory: on disk plus those holding files fixes would create
    /// (a new migration directory).
    pub fn list_subdirs(&self, dir: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .map(|p| normalize(&p))
            .collect();
        let dir = normalize(dir);
        for p in self.virtual_files.lock().unwrap().keys() {
            if let Some(parent) = p.parent()
                && parent.parent() == Some(dir.as_path())
                && !out.iter().any(|q| q == parent)
            {
                out.push(parent.to_path_buf());
            }
        }
        out.sort();
        out
    }

    /// The project module `file` imports `local` from, loaded, with the import that names it
    /// (`imported` is the exported name, `default` or `*`).
    /// What `answer` makes of the value `name` is bound to at `at`: a local binding (innermost
    /// function first, then the module), else the module binding it is imported from.
    pub fn with_binding_init<T>(
        &self,
        file: &Arc<SourceFile>,
        at: Node,
        name: &str,
        answer: impl FnOnce(&Arc<SourceFile>, Node) -> Option<T>,
    ) -> Option<T> {
        let src = &file.text;
        let local = ast::ancestors(at)
            .filter(|a| ast::is_function(*a) || ast::kind(a) == "program")
            .find_map(|scope| ast::find_binding_init(scope, name, src, at.start_byte()));
        match local {
            Some(init) => answer(file, init),
            None => {
                let import = imports(file).iter().find(|i| i.local == name && i.imported != "*")?;
                let target = self.load(&self.resolve(&file.path, &import.source)?).ok()?;
                let init = exported_binding_init(&target, &import.imported)?;
                answer(&target, init)
            }
        }
    }

    pub fn imported_module<'f>(&self, file: &'f SourceFile, local: &str) -> Option<(&'f Import, Arc<SourceFile>)> {
        let import = imports(file).iter().find(|i| i.local == local)?;
        let target = self.resolve(&file.path, &import.source)?;
        Some((import, self.load(&target).ok()?))
    }

    /// Resolves an import specifier from `from` to a project file, if it is project-local.
    pub fn resolve(&self, from: &Path, spec: &str) -> Option<PathBuf> {
        let dir = from.parent()?;
        if let Some(known) = self.resolutions.lock().unwrap().get(dir).and_then(|specs| specs.get(spec)) {
            return known.clone();
        }
        let found = self.resolve_in(dir, spec);
        self.resolutions.lock().unwrap().entry(dir.to_path_buf()).or_default().insert(spec.to_string(), found.clone());
        found
    }

    /// `resolve` from the directory `dir`, asking the file system.
    fn resolve_in(&self, dir: &Path, spec: &str) -> Option<PathBuf> {
        if spec.starts_with("./") || spec.starts_with("../") || spec == "." || spec == ".." {
            return resolve_file(&dir.join(spec));
        }
        for (pattern, targets) in self.aliases_for(dir).iter() {
            let rest = if let Some(prefix) = pattern.strip_suffix('*') {
                match spec.strip_prefix(prefix) {
                    Some(rest) => rest,
                    None => continue,
                }
            } else if pattern == spec {
                ""
            } else {
                continue;
            };
            for target in targets {
                let candidate = PathBuf::from(target.to_string_lossy().replace('*', rest));
                if let Some(found) = resolve_file(&candidate) {
                    return Some(found);
                }
            }
        }
        self.resolve_workspace_package(dir, spec)
    }

    /// The text of a file a fix of this run creates, if `path` is one.
    pub fn virtual_text(&self, path: &Path) -> Option<String> {
        note_read(&normalize(path));
        self.virtual_files.lock().unwrap().get(&normalize(path)).cloned()
    }

    /// Where `spec` imported from `from` would live if it were created: a relative path, or
    /// the first target of the tsconfig/jsconfig `paths` alias that matches it, with the
    /// importing file's extension family. None for a package name or when it already resolves.
    pub fn planned_module_path(&self, from: &Path, spec: &str) -> Option<PathBuf> {
        if self.resolve(from, spec).is_some() {
            return None;
        }
        let dir = from.parent()?;
        let base = if spec.starts_with("./") || spec.starts_with("../") {
            dir.join(spec)
        } else {
            let aliases = self.aliases_for(dir);
            aliases.iter().find_map(|(pattern, targets)| {
                let rest = match pattern.strip_suffix('*') {
                    Some(prefix) => spec.strip_prefix(prefix)?,
                    None if pattern == spec => "",
                    None => return None,
                };
                Some(PathBuf::from(targets.first()?.to_string_lossy().replace('*', rest)))
            })?
        };
        let typed = from.extension().and_then(|e| e.to_str()).is_some_and(|e| e.contains("ts"));
        let ext = if typed { "ts" } else { "js" };
        let base = normalize(&base);
        let stem = match base.extension().and_then(|e| e.to_str()) {
            Some("js" | "mjs" | "cjs" | "ts" | "mts" | "cts") => base.with_extension(""),
            _ => base,
        };
        Some(PathBuf::from(format!("{}.{ext}", stem.display())))
    }

    /// `@acme/billing` or `@acme/billing/webhook/handler` imported from another package of the
    /// same workspace: the package's entry (`exports["."]`, `types`, `main`, `module`, else
    /// `src/index`, `index`) or the subpath under the package (or its `src/`). Entries naming
    /// build output that is not there fall back to the sources.
    fn resolve_workspace_package(&self, dir: &Path, spec: &str) -> Option<PathBuf> {
        let mut parts = spec.splitn(if spec.starts_with('@') { 3 } else { 2 }, '/');
        let name = if spec.starts_with('@') {
            format!("{}/{}", parts.next()?, parts.next()?)
        } else {
            parts.next()?.to_string()
        };
        let subpath = parts.next().unwrap_or("");
        let packages = self.workspace_packages(dir);
        let (root, manifest) = packages.get(&name)?;
        if !subpath.is_empty() {
            return resolve_file(&root.join(subpath)).or_else(|| resolve_file(&root.join("src").join(subpath)));
        }
        let exported = manifest.get("exports").and_then(|e| match e {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Object(map) => {
                let dot = map.get(".").unwrap_or(e);
                match dot {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Object(conditions) => ["types", "import", "require", "default"]
                        .iter()
                        .find_map(|c| conditions.get(*c).and_then(|v| v.as_str()).map(str::to_string)),
                    _ => None,
                }
            }
            _ => None,
        });
        let fields = ["types", "typings", "main", "module"].iter().filter_map(|f| manifest.get(*f)?.as_str());
        exported
            .iter()
            .map(String::as_str)
            .chain(fields)
            .chain(["src/index", "index"])
            .find_map(|entry| resolve_file(&root.join(entry)))
    }

    /// The packages of the workspace `dir` belongs to: the nearest ancestor with
    /// `pnpm-workspace.yaml` or a package.json declaring `workspaces`, and every package.json
    /// below it (node_modules and ignored directories excepted).
    fn workspace_packages(&self, dir: &Path) -> Arc<WorkspacePackages> {
        if let Some(found) = self.workspaces.lock().unwrap().get(dir) {
            return found.clone();
        }
        let root = workspace_root(dir);
        let root = root.as_deref();
        let cached_root = root.and_then(|r| self.workspaces.lock().unwrap().get(r).cloned());
        let packages = match (root, cached_root) {
            (_, Some(found)) => found,
            (None, None) => Arc::default(),
            (Some(root), None) => {
                let mut packages = WorkspacePackages::new();
                let manifests = ignore::WalkBuilder::new(on_disk(root))
                    .max_depth(Some(5))
                    .filter_entry(|e| e.file_name() != "node_modules")
                    .build()
                    .flatten()
                    .filter(|e| e.file_name() == "package.json");
                for entry in manifests {
                    let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
                    let Ok(manifest) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
                    if let (Some(name), Some(package_dir)) =
                        (manifest.get("name").and_then(|n| n.as_str()).map(str::to_string), entry.path().parent())
                    {
                        packages.entry(name).or_insert_with(|| (normalize(package_dir), manifest));
                    }
                }
                let packages = Arc::new(packages);
                self.workspaces.lock().unwrap().insert(root.to_path_buf(), packages.clone());
                packages
            }
        };
        self.workspaces.lock().unwrap().insert(dir.to_path_buf(), packages.clone());
        packages
    }

    /// `paths` of the nearest tsconfig.json / jsconfig.json, made absolute.
    fn aliases_for(&self, dir: &Path) -> Arc<PathAliases> {
        if let Some(found) = self.path_aliases.lock().unwrap().get(dir) {
            return found.clone();
        }
        let aliases = Arc::new(
            dir.ancestors()
                .find_map(|d| {
                    ["tsconfig.json", "jsconfig.json"].iter().find_map(|name| {
                        let text = std::fs::read_to_string(d.join(name)).ok()?;
                        Some(parse_tsconfig_paths(d, &text))
                    })
                })
                .unwrap_or_default(),
        );
        self.path_aliases.lock().unwrap().insert(dir.to_path_buf(), aliases.clone());
        aliases
    }

    /// Finds the definition of `name` exported by `file`, following re-exports.
    pub fn exported_function(&self, file: &Arc<SourceFile>, name: &str, depth: usize) -> Option<FunctionDef> {
        if depth > 4 {
            return None;
        }
        let src = &file.text;
        let root = file.root();
        let mut local_name = name.to_string();
        for stmt in ast::named_children(root) {
            match stmt.kind_name() {
                "export_statement" => {
                    let is_default =
                        (0..stmt.child_count()).filter_map(|i| stmt.child(i)).any(|c| c.kind_name() == "default");
                    if let Some(decl) = stmt.field("declaration") {
                        if (name == "default" && is_default) || declared_name(decl, src).as_deref() == Some(name) {
                            if let Some(def) = function_of_declaration(file, decl, name) {
                                return Some(def);
                            }
                        }
                    } else if is_default && name == "default" {
                        if let Some(value) = stmt.field("value") {
                            let value = ast::unwrap_expr(value);
                            if ast::is_function(value) {
                                return Some(def(file, value, "default"));
                            }
                            if value.kind_name() == "identifier" {
                                local_name = text(value, src).to_string();
                            }
                        }
                    }
                    let source = stmt.field("source").and_then(|s| ast::string_value(s, src));
                    for clause in ast::named_children(stmt).into_iter().filter(|c| c.kind_name() == "export_clause") {
                        for spec in ast::named_children(clause) {
                            let orig = spec.field("name").map(|n| text(n, src).to_string());
                            let alias = spec.field("alias").map(|n| text(n, src).to_string());
                            let exported = alias.clone().or(orig.clone());
                            if exported.as_deref() == Some(name) {
                                let orig = orig.unwrap_or_default();
                                match &source {
                                    Some(module) => {
                                        let target = self.resolve(&file.path, module)?;
                                        let target = self.load(&target).ok()?;
                                        return self.exported_function(&target, &orig, depth + 1);
                                    }
                                    None => local_name = orig,
                                }
                            }
                        }
                    }
                    if let Some(module) = &source
                        && !ast::named_children(stmt).iter().any(|c| c.kind_name() == "export_clause")
                        && let Some(target) = self.resolve(&file.path, module)
                        && let Ok(target) = self.load(&target)
                        && let Some(found) = self.exported_function(&target, name, depth + 1)
                    {
                        return Some(found);
                    }
                }
                "expression_statement" => {
                    // CommonJS: module.exports = fn | { a, b: c }; exports.a = fn
                    if let Some(assign) = stmt.named_child(0).filter(|n| n.kind_name() == "assignment_expression") {
                        let left = assign.field("left").map(|l| ast::member_path(l, src));
                        let right = assign.field("right").map(ast::unwrap_expr);
                        if let (Some(left), Some(right)) = (left, right) {
                            let target = match left.as_slice() {
                                [m, e] if m == "module" && e == "exports" => Some("default"),
                                [e, n] if e == "exports" => Some(n.as_str()),
                                [m, e, n] if m == "module" && e == "exports" => Some(n.as_str()),
                                _ => None,
                            };
                            if target == Some(name) || (target == Some("default") && name == "default") {
                                if ast::is_function(right) {
                                    return Some(def(file, right, name));
                                }
                                if right.kind_name() == "identifier" {
                                    local_name = text(right, src).to_string();
                                }
                            } else if target == Some("default") && right.kind_name() == "object" {
                                if let Some(value) = ast::object_property(right, name, src) {
                                    if ast::is_function(value) {
                                        return Some(def(file, value, name));
                                    }
                                    local_name = text(value, src).to_string();
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        local_function(file, &local_name)
    }
}

/// A class declaration: its file and span.
#[derive(Clone, Debug)]
pub struct ClassDef {
    pub file: Arc<SourceFile>,
    pub span: Span,
    pub name: String,
}

impl ClassDef {
    pub fn node(&self) -> Option<Node<'_>> {
        self.file.node_at(self.span)
    }
}

const CLASS_KINDS: &[&str] = &["class_declaration", "abstract_class_declaration"];

impl Project {
    /// Finds the class `name` (`"default"` for `export default class`) exported by `file`,
    /// following `export { X }`, `export { X } from` and `export * from`.
    pub fn exported_class(&self, file: &Arc<SourceFile>, name: &str, depth: usize) -> Option<ClassDef> {
        if depth > 4 {
            return None;
        }
        let src = &file.text;
        let mut local_name = name.to_string();
        for stmt in ast::named_children(file.root()).into_iter().filter(|s| s.kind_name() == "export_statement") {
            let is_default = (0..stmt.child_count()).filter_map(|i| stmt.child(i)).any(|c| c.kind_name() == "default");
            if let Some(decl) = stmt.field("declaration") {
                if CLASS_KINDS.contains(&decl.kind_name())
                    && ((name == "default" && is_default) || declared_name(decl, src).as_deref() == Some(name))
                {
                    let declared = declared_name(decl, src).unwrap_or_else(|| name.to_string());
                    return Some(ClassDef { file: file.clone(), span: Span::of(decl), name: declared });
                }
            } else if is_default
                && name == "default"
                && let Some(value) = stmt.field("value").map(ast::unwrap_expr)
            {
                if value.kind_name() == "class" {
                    return Some(ClassDef { file: file.clone(), span: Span::of(value), name: "default".into() });
                }
                if value.kind_name() == "identifier" {
                    local_name = text(value, src).to_string();
                }
            }
            let source = stmt.field("source").and_then(|s| ast::string_value(s, src));
            let clauses: Vec<Node> =
                ast::named_children(stmt).into_iter().filter(|c| c.kind_name() == "export_clause").collect();
            for spec in clauses.iter().flat_map(|c| ast::named_children(*c)) {
                let orig = spec.field("name").map(|n| text(n, src).to_string());
                let alias = spec.field("alias").map(|n| text(n, src).to_string());
                if alias.or(orig.clone()).as_deref() != Some(name) {
                    continue;
                }
                let orig = orig.unwrap_or_default();
                match &source {
                    Some(module) => {
                        let target = self.load(&self.resolve(&file.path, module)?).ok()?;
                        return self.exported_class(&target, &orig, depth + 1);
                    }
                    None => local_name = orig,
                }
            }
            if let Some(module) = &source
                && clauses.is_empty()
                && let Some(target) = self.resolve(&file.path, module)
                && let Ok(target) = self.load(&target)
                && let Some(found) = self.exported_class(&target, name, depth + 1)
            {
                return Some(found);
            }
        }
        local_class(file, &local_name)
    }
}

/// A top-level class declaration (exported or not) named `name` in `file`.
pub fn local_class(file: &Arc<SourceFile>, name: &str) -> Option<ClassDef> {
    let src = &file.text;
    ast::named_children(file.root())
        .into_iter()
        .filter_map(|stmt| if stmt.kind_name() == "export_statement" { stmt.field("declaration") } else { Some(stmt) })
        .find(|decl| CLASS_KINDS.contains(&decl.kind_name()) && declared_name(*decl, src).as_deref() == Some(name))
        .map(|decl| ClassDef { file: file.clone(), span: Span::of(decl), name: name.to_string() })
}

fn def(file: &Arc<SourceFile>, node: Node, name: &str) -> FunctionDef {
    FunctionDef { file: file.clone(), span: Span::of(node), name: name.to_string() }
}

fn declared_name(decl: Node, src: &str) -> Option<String> {
    if let Some(n) = decl.field("name") {
        return Some(text(n, src).to_string());
    }
    if matches!(decl.kind_name(), "lexical_declaration" | "variable_declaration") {
        let d = ast::named_children(decl).into_iter().find(|c| c.kind_name() == "variable_declarator")?;
        return d.field("name").map(|n| text(n, src).to_string());
    }
    None
}

fn function_of_declaration(file: &Arc<SourceFile>, decl: Node, name: &str) -> Option<FunctionDef> {
    if ast::is_function(decl) {
        return Some(def(file, decl, name));
    }
    for d in ast::named_children(decl).into_iter().filter(|c| c.kind_name() == "variable_declarator") {
        let value = ast::unwrap_expr(d.field("value")?);
        if ast::is_function(value) {
            return Some(def(file, value, name));
        }
        // export const handler = wrap(async (req) => ...)
        if value.kind_name() == "call_expression"
            && let Some(f) = ast::arguments(value).into_iter().rev().find(|a| ast::is_function(*a))
        {
            return Some(def(file, f, name));
        }
    }
    None
}

/// A top-level function (declaration or `const f = () => ...`) defined in `file`.
/// The initializer of a top-level `export const <name> = ...` (or a `const` the module exports
/// by an export clause).
pub fn exported_binding_init<'t>(file: &'t Arc<SourceFile>, name: &str) -> Option<Node<'t>> {
    let src = &file.text;
    let root = file.root();
    let init = ast::find_binding_init(root, name, src, usize::MAX)?;
    // a binding of a nested function is no module binding
    let declarator = init.parent().filter(|d| ast::kind(d) == "variable_declarator")?;
    let statement = declarator.parent()?;
    let top = match statement.parent() {
        Some(p) if ast::kind(p) == "export_statement" => p,
        _ => statement,
    };
    (top.parent().is_some_and(|p| ast::kind(p) == "program")).then_some(init)
}

pub fn local_function(file: &Arc<SourceFile>, name: &str) -> Option<FunctionDef> {
    let declarations = file.declarations.get_or_init(|| top_level_declarations(file));
    declarations.get(name)?.iter().find_map(|span| function_of_declaration(file, file.node_at(*span)?, name))
}

/// The top-level declarations of `file` (an export's declaration for an export) by the name
/// each declares, in source order.
fn top_level_declarations(file: &SourceFile) -> std::collections::HashMap<String, Vec<Span>> {
    let mut out: std::collections::HashMap<String, Vec<Span>> = std::collections::HashMap::new();
    for stmt in ast::named_children(file.root()) {
        let decl = if stmt.kind_name() == "export_statement" {
            match stmt.field("declaration") {
                Some(d) => d,
                None => continue,
            }
        } else {
            stmt
        };
        if let Some(name) = declared_name(decl, &file.text) {
            out.entry(name).or_default().push(Span::of(decl));
        }
    }
    out
}

/// The imports of a file: ESM imports and CommonJS `require` bindings.
pub fn imports(file: &SourceFile) -> &[Import] {
    file.imports.get_or_init(|| read_imports(file))
}

fn read_imports(file: &SourceFile) -> Vec<Import> {
    let src = &file.text;
    let mut out = Vec::new();
    for stmt in ast::named_children(file.root()) {
        match stmt.kind_name() {
            "import_statement" => {
                let Some(source) = stmt.field("source").and_then(|s| ast::string_value(s, src)) else {
                    continue;
                };
                for clause in ast::named_children(stmt).into_iter().filter(|c| c.kind_name() == "import_clause") {
                    for part in ast::named_children(clause) {
                        match part.kind_name() {
                            "identifier" => out.push(Import {
                                local: text(part, src).into(),
                                source: source.clone(),
                                imported: "default".into(),
                            }),
                            "namespace_import" => {
                                if let Some(id) = part.named_child(0) {
                                    out.push(Import {
                                        local: text(id, src).into(),
                                        source: source.clone(),
                                        imported: "*".into(),
                                    });
                                }
                            }
                            "named_imports" => {
                                for spec in ast::named_children(part) {
                                    let Some(name) = spec.field("name") else {
                                        continue;
                                    };
                                    let alias = spec.field("alias").unwrap_or(name);
                                    out.push(Import {
                                        local: text(alias, src).into(),
                                        source: source.clone(),
                                        imported: text(name, src).into(),
                                    });
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
            "lexical_declaration" | "variable_declaration" => {
                for d in ast::named_children(stmt).into_iter().filter(|c| c.kind_name() == "variable_declarator") {
                    declarator_import(d, src, require_source, &mut out);
                }
            }
            _ => {}
        }
    }
    // Imports inside functions: `const { handleIssueUpdate } = await import("@/lib/state")`
    // (a lazily loaded helper) and a `require` in a function body. Function-scoped, but a
    // name a file binds to a module's export is rarely bound to something else elsewhere.
    if src.contains("import(") || src.contains("require(") {
        let root = file.root();
        ast::walk(root, &mut |n| {
            // top-level declarators were read above
            if n.kind_name() == "variable_declarator" && n.parent().and_then(|p| p.parent()) != Some(root) {
                declarator_import(
                    n,
                    src,
                    |v, src| dynamic_import_source(v, src).or_else(|| require_source(v, src)),
                    &mut out,
                );
            }
            true
        });
    }
    out
}

/// The imports one `const <pattern> = <module>` declarator binds, `source` naming the module.
fn declarator_import(d: Node, src: &str, source: impl Fn(Node, &str) -> Option<String>, out: &mut Vec<Import>) {
    let (Some(name), Some(value)) = (d.field("name"), d.field("value")) else {
        return;
    };
    let Some(source) = source(value, src) else {
        return;
    };
    match name.kind_name() {
        "identifier" => out.push(Import { local: text(name, src).into(), source, imported: "*".into() }),
        "object_pattern" => {
            for prop in ast::named_children(name) {
                let (imported, local) = match prop.kind_name() {
                    "shorthand_property_identifier_pattern" => {
                        (text(prop, src).to_string(), text(prop, src).to_string())
                    }
                    "pair_pattern" => {
                        let (Some(k), Some(v)) = (prop.field("key"), prop.field("value")) else {
                            continue;
                        };
                        (text(k, src).to_string(), text(v, src).to_string())
                    }
                    _ => continue,
                };
                out.push(Import { local, source: source.clone(), imported });
            }
        }
        _ => {}
    }
}

/// `await import("x")` → "x".
fn dynamic_import_source(value: Node, src: &str) -> Option<String> {
    let call = ast::unwrap_expr(value);
    if call.kind_name() != "call_expression" || call.field("function")?.kind_name() != "import" {
        return None;
    }
    ast::string_value(*ast::arguments(call).first()?, src)
}

/// `require("x")` or `require("x").y` → "x".
fn require_source(value: Node, src: &str) -> Option<String> {
    let value = ast::unwrap_expr(value);
    let call = if value.kind_name() == "member_expression" { value.field("object")? } else { value };
    if call.kind_name() != "call_expression" || ast::callee_path(call, src) != ["require"] {
        return None;
    }
    ast::string_value(*ast::arguments(call).first()?, src)
}

fn resolve_file(base: &Path) -> Option<PathBuf> {
    let base = normalize(base);
    if base.is_file() && Dialect::for_path(&base).is_some() {
        return Some(base);
    }
    // ESM TypeScript imports name the emitted `.js` file.
    if let Some(ext) = base.extension().and_then(|e| e.to_str())
        && matches!(ext, "js" | "mjs" | "cjs" | "jsx")
    {
        let stem = base.with_extension("");
        for alt in ["ts", "tsx", "mts", "cts"] {
            let candidate = stem.with_extension(alt);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    for ext in EXTENSIONS {
        let candidate = PathBuf::from(format!("{}.{ext}", base.display()));
        if candidate.is_file() {
            return Some(candidate);
        }
    }
    for ext in EXTENSIONS {
        let candidate = base.join(format!("index.{ext}"));
        if candidate.is_file() {
            return Some(candidate);
        }
    }
    None
}

/// Removes `.` and `..` components without touching the file system.
/// A directory as the file system opens it: a run from the project root (`check .`) names
/// files relatively, and the last ancestor of `src/a.ts`, like `normalize(".")`, is the empty
/// path, which neither `read_dir` nor a walker can open.
pub fn on_disk(dir: &Path) -> &Path {
    if dir.as_os_str().is_empty() { Path::new(".") } else { dir }
}

/// The nearest directory above `path` holding a `package.json`: the package it belongs to.
/// The root of the workspace `dir` belongs to: the nearest ancestor with `pnpm-workspace.yaml`
/// or a package.json declaring `workspaces`.
pub fn workspace_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| {
            d.join("pnpm-workspace.yaml").is_file()
                || std::fs::read_to_string(d.join("package.json")).is_ok_and(|t| t.contains("\"workspaces\""))
        })
        .map(Path::to_path_buf)
}

pub fn package_root(path: &Path) -> Option<PathBuf> {
    path.ancestors().skip(1).find(|d| d.join("package.json").is_file()).map(Path::to_path_buf)
}

pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

pub use crate::source::jsonc_to_json;

fn parse_tsconfig_paths(dir: &Path, text: &str) -> PathAliases {
    let options = effective_compiler_options(dir, text, 0);
    // `paths` targets are relative to `baseUrl` when one is set, else to the config that
    // declares them (TypeScript 4.1 on).
    let base = options.base_url.clone().or_else(|| options.paths.as_ref().map(|(_, d)| d.clone()));
    let mut out: Vec<(String, Vec<PathBuf>)> = match (&options.paths, &base) {
        (Some((paths, _)), Some(base)) => paths
            .iter()
            .map(|(pattern, targets)| {
                let targets = targets
                    .as_array()
                    .map(|a| a.iter().filter_map(|t| t.as_str()).map(|t| base.join(t)).collect())
                    .unwrap_or_default();
                (pattern.clone(), targets)
            })
            .collect(),
        _ => Vec::new(),
    };
    // SvelteKit writes `$lib` into a generated `.svelte-kit/tsconfig.json` that a checkout
    // does not have; its default target is `src/lib`.
    if !out.iter().any(|(p, _)| p == "$lib" || p == "$lib/*")
        && ["svelte.config.js", "svelte.config.ts", "svelte.config.mjs"].iter().any(|c| dir.join(c).is_file())
    {
        out.push(("$lib".into(), vec![dir.join("src/lib")]));
        out.push(("$lib/*".into(), vec![dir.join("src/lib/*")]));
    }
    // Longest prefix first, as TypeScript matches.
    out.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    if let Some(base) = options.base_url {
        out.push(("*".into(), vec![base.join("*")]));
    }
    out
}

/// The `baseUrl` and `paths` a tsconfig ends up with through its `extends` chain: the nearest
/// config that sets each wins, and each is resolved against the directory of the config that
/// set it.
#[derive(Default)]
struct CompilerPaths {
    base_url: Option<PathBuf>,
    paths: Option<(serde_json::Map<String, serde_json::Value>, PathBuf)>,
}

fn effective_compiler_options(dir: &Path, text: &str, depth: usize) -> CompilerPaths {
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&jsonc_to_json(text)) else {
        return CompilerPaths::default();
    };
    let options = &json["compilerOptions"];
    let mut own = CompilerPaths {
        base_url: options["baseUrl"].as_str().map(|b| dir.join(b)),
        paths: options["paths"].as_object().map(|p| (p.clone(), dir.to_path_buf())),
    };
    if depth >= 5 {
        return own;
    }
    // `extends` is a path or (TypeScript 5) a list of them; later entries override earlier ones.
    let parents: Vec<&str> = match &json["extends"] {
        serde_json::Value::String(s) => vec![s.as_str()],
        serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).collect(),
        _ => Vec::new(),
    };
    for spec in parents.into_iter().rev() {
        if own.base_url.is_some() && own.paths.is_some() {
            break;
        }
        let Some(file) = extended_config(dir, spec) else { continue };
        let Ok(parent_text) = std::fs::read_to_string(&file) else { continue };
        let parent = effective_compiler_options(file.parent().unwrap_or(dir), &parent_text, depth + 1);
        own.base_url = own.base_url.or(parent.base_url);
        own.paths = own.paths.or(parent.paths);
    }
    own
}

/// The file an `extends` names: a relative path (the `.json` may be left out) or a package's
/// config under a `node_modules` above the extending config.
fn extended_config(dir: &Path, spec: &str) -> Option<PathBuf> {
    let with_json = |p: PathBuf| {
        if p.is_file() {
            return Some(p);
        }
        let json = PathBuf::from(format!("{}.json", p.display()));
        json.is_file().then_some(json)
    };
    if spec.starts_with("./") || spec.starts_with("../") || Path::new(spec).is_absolute() {
        return with_json(dir.join(spec));
    }
    dir.ancestors().find_map(|d| {
        let base = d.join("node_modules").join(spec);
        with_json(base.clone()).or_else(|| with_json(base.join("tsconfig.json")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_comments_and_trailing_commas() {
        let json = jsonc_to_json("{ // c\n \"a\": \"//x\", /* b */ \"p\": [1,],\n}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["a"], "//x");
    }

    #[test]
    fn normalizes_parent_components() {
        assert_eq!(normalize(Path::new("a/b/../c/./d.ts")), PathBuf::from("a/c/d.ts"));
    }
}
