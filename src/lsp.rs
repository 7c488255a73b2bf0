//! `retrysafe lsp`: the CLI's engine behind the Language Server Protocol (stdio), on the same
//! project graph. Each workspace root keeps one `Engine` whose project holds the open buffers
//! as overlays, the raw findings of every analysed file, and which project files each of them
//! reaches through its imports. An edit re-analyses the edited file and the files that reach
//! it, nothing else; analysis waits until the client has been quiet for the debounce delay
//! (a request that needs fresh results runs it at once).
//!
//! Offered: push and pull diagnostics (severity from the config), a code action per fix the
//! CLI offers (unsafe ones titled "(review)"), "ignore here", `source.fixAll.retrysafe` (the
//! CLI's fixpoint over safe fixes, as one minimal edit), `source.fixAll.unsafe.retrysafe`
//! (safe and review fixes), hover with the rule's docs and the handler chain, and config
//! reload when a `retrysafe.json` (or tsconfig/package.json) changes.

use crate::engine::{Engine, Options};
use crate::fix::{Applicability, GuardSpec};
use crate::project;
use crate::rules::{self, Diagnostic, Fixes};
use crate::source::TextChange;
use crossbeam_channel::RecvTimeoutError;
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{self as notif, Notification as _};
use lsp_types::request::{self as req, Request as _};
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOptions, CodeActionOrCommand, CodeActionParams, CodeActionProviderCapability,
    CreateFile, DiagnosticOptions, DiagnosticServerCapabilities, DiagnosticSeverity, DocumentChangeOperation,
    DocumentChanges, DocumentDiagnosticParams, DocumentDiagnosticReport, DocumentDiagnosticReportResult,
    FileSystemWatcher, FullDocumentDiagnosticReport, GlobPattern, Hover, HoverContents, HoverParams,
    HoverProviderCapability, InitializeParams, MarkupContent, MarkupKind, NumberOrString, OneOf,
    OptionalVersionedTextDocumentIdentifier, Position, PublishDiagnosticsParams, Range, Registration,
    RegistrationParams, RelatedFullDocumentDiagnosticReport, ResourceOp, ServerCapabilities, ServerInfo,
    TextDocumentEdit, TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions, TextEdit, Url,
    WorkspaceEdit, WorkspaceFoldersServerCapabilities, WorkspaceServerCapabilities,
};
use rayon::prelude::*;
use ropey::Rope;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const FIX_ALL: &str = "source.fixAll.retrysafe";
pub const FIX_ALL_UNSAFE: &str = "source.fixAll.unsafe.retrysafe";
/// The default quiet time before an edit is analysed; `initializationOptions.debounceMs`
/// overrides it.
const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(50);
/// Files whose change alters how every file of a root is analysed.
const CONFIG_NAMES: &[&str] = &[crate::config::CONFIG_FILE, "tsconfig.json", "jsconfig.json", "package.json"];

pub fn serve(guard: Option<GuardSpec>) -> std::io::Result<()> {
    let (connection, io_threads) = Connection::stdio();
    let protocol = |e: lsp_server::ProtocolError| std::io::Error::other(e.to_string());
    let (id, params) = connection.initialize_start().map_err(protocol)?;
    let params: InitializeParams = serde_json::from_value(params).map_err(std::io::Error::other)?;
    let result = lsp_types::InitializeResult {
        capabilities: capabilities(),
        server_info: Some(ServerInfo { name: "retrysafe".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
    };
    let result = serde_json::to_value(result).map_err(std::io::Error::other)?;
    connection.initialize_finish(id, result).map_err(protocol)?;
    let mut server = Server::new(&params, guard);
    if params
        .capabilities
        .workspace
        .as_ref()
        .and_then(|w| w.did_change_watched_files.as_ref())
        .and_then(|w| w.dynamic_registration)
        == Some(true)
    {
        server.register_watchers(&connection);
    }
    server.run(&connection)?;
    drop(connection);
    io_threads.join()
}

fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
            open_close: Some(true),
            change: Some(TextDocumentSyncKind::INCREMENTAL),
            save: Some(lsp_types::TextDocumentSyncSaveOptions::Supported(true)),
            ..TextDocumentSyncOptions::default()
        })),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![
                CodeActionKind::QUICKFIX,
                CodeActionKind::from(FIX_ALL),
                CodeActionKind::from(FIX_ALL_UNSAFE),
            ]),
            ..CodeActionOptions::default()
        })),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        diagnostic_provider: Some(DiagnosticServerCapabilities::Options(DiagnosticOptions {
            identifier: Some("retrysafe".into()),
            inter_file_dependencies: true,
            workspace_diagnostics: false,
            ..DiagnosticOptions::default()
        })),
        workspace: Some(WorkspaceServerCapabilities {
            workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                supported: Some(true),
                change_notifications: Some(OneOf::Left(true)),
            }),
            file_operations: None,
        }),
        ..ServerCapabilities::default()
    }
}

struct Document {
    uri: Url,
    rope: Rope,
    /// The changes since the buffer was last handed to the project, when all were ranges
    /// (None after a whole-text replacement or an open): they let the project reparse
    /// incrementally.
    changes: Option<Vec<TextChange>>,
}

/// One workspace root: its engine (project graph, configs, overlays) and the cached results.
struct Root {
    engine: Engine,
    /// Raw findings of each analysed file (its handlers' findings, wherever they point),
    /// without fixes: diagnostics show none, and planning them is a large part of an edit.
    results: HashMap<PathBuf, Vec<Diagnostic>>,
    /// The same findings with their fixes, for the files a code action asked about since
    /// their last analysis (computed on demand by the same analysis, fixes on).
    with_fixes: HashMap<PathBuf, Vec<Diagnostic>>,
    /// The project files each handler-candidate file reaches through its imports.
    reaches: HashMap<PathBuf, HashSet<PathBuf>>,
}

struct Server {
    guard: Option<GuardSpec>,
    folders: Vec<PathBuf>,
    documents: HashMap<PathBuf, Document>,
    roots: HashMap<PathBuf, Root>,
    /// Edited files not analysed yet, by root.
    pending: HashMap<PathBuf, BTreeSet<PathBuf>>,
    deadline: Option<Instant>,
    debounce: Duration,
    next_request: i32,
}

impl Server {
    fn new(params: &InitializeParams, guard: Option<GuardSpec>) -> Server {
        let mut folders: Vec<PathBuf> =
            params.workspace_folders.iter().flatten().filter_map(|f| uri_to_path(&f.uri)).collect();
        #[allow(deprecated)]
        if folders.is_empty()
            && let Some(root) = params.root_uri.as_ref().and_then(uri_to_path)
        {
            folders.push(root);
        }
        let debounce = params
            .initialization_options
            .as_ref()
            .and_then(|o| o.get("debounceMs"))
            .and_then(|v| v.as_u64())
            .map_or(DEFAULT_DEBOUNCE, Duration::from_millis);
        Server {
            guard,
            folders,
            documents: HashMap::new(),
            roots: HashMap::new(),
            pending: HashMap::new(),
            deadline: None,
            debounce,
            next_request: 0,
        }
    }

    fn run(&mut self, connection: &Connection) -> std::io::Result<()> {
        loop {
            let message = match self.deadline {
                None => match connection.receiver.recv() {
                    Ok(m) => m,
                    Err(_) => return Ok(()),
                },
                Some(deadline) => {
                    match connection.receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                        Ok(m) => m,
                        Err(RecvTimeoutError::Timeout) => {
                            self.flush(connection);
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => return Ok(()),
                    }
                }
            };
            match message {
                Message::Request(request) => {
                    if connection.handle_shutdown(&request).map_err(|e| std::io::Error::other(e.to_string()))? {
                        return Ok(());
                    }
                    let response = self.request(connection, request);
                    send(connection, Message::Response(response));
                }
                Message::Notification(n) => self.notification(connection, n),
                Message::Response(_) => {}
            }
        }
    }

    fn register_watchers(&mut self, connection: &Connection) {
        let watchers = [
            "**/retrysafe.json",
            "**/tsconfig.json",
            "**/jsconfig.json",
            "**/package.json",
            "**/*.{ts,tsx,mts,cts,js,jsx,mjs,cjs,prisma,sql}",
        ]
        .iter()
        .map(|g| FileSystemWatcher { glob_pattern: GlobPattern::String(g.to_string()), kind: None })
        .collect();
        let options = lsp_types::DidChangeWatchedFilesRegistrationOptions { watchers };
        let params = RegistrationParams {
            registrations: vec![Registration {
                id: "retrysafe-watch".into(),
                method: notif::DidChangeWatchedFiles::METHOD.into(),
                register_options: serde_json::to_value(options).ok(),
            }],
        };
        self.next_request += 1;
        let request = Request::new(RequestId::from(self.next_request), req::RegisterCapability::METHOD.into(), params);
        send(connection, Message::Request(request));
    }

    fn request(&mut self, connection: &Connection, request: Request) -> Response {
        let id = request.id.clone();
        let result = match request.method.as_str() {
            req::CodeActionRequest::METHOD => parse::<CodeActionParams>(request).map(|p| {
                self.flush(connection);
                serde_json::to_value(self.code_actions(&p))
            }),
            req::HoverRequest::METHOD => parse::<HoverParams>(request).map(|p| {
                self.flush(connection);
                serde_json::to_value(self.hover(&p))
            }),
            req::DocumentDiagnosticRequest::METHOD => parse::<DocumentDiagnosticParams>(request).map(|p| {
                self.flush(connection);
                let items =
                    uri_to_path(&p.text_document.uri).map(|path| self.lsp_diagnostics(&path)).unwrap_or_default();
                serde_json::to_value(DocumentDiagnosticReportResult::Report(DocumentDiagnosticReport::Full(
                    RelatedFullDocumentDiagnosticReport {
                        related_documents: None,
                        full_document_diagnostic_report: FullDocumentDiagnosticReport { result_id: None, items },
                    },
                )))
            }),
            other => {
                return Response::new_err(
                    id,
                    ErrorCode::MethodNotFound as i32,
                    format!("method not supported: {other}"),
                );
            }
        };
        match result {
            Ok(Ok(value)) => Response::new_ok(id, value),
            Ok(Err(e)) => Response::new_err(id, ErrorCode::InternalError as i32, e.to_string()),
            Err(e) => Response::new_err(id, ErrorCode::InvalidParams as i32, e),
        }
    }

    fn notification(&mut self, connection: &Connection, n: Notification) {
        match n.method.as_str() {
            notif::DidOpenTextDocument::METHOD => {
                let Ok(p) = n.extract::<lsp_types::DidOpenTextDocumentParams>(notif::DidOpenTextDocument::METHOD)
                else {
                    return;
                };
                let Some(path) = uri_to_path(&p.text_document.uri) else { return };
                let rope = Rope::from_str(&p.text_document.text);
                self.documents.insert(path.clone(), Document { uri: p.text_document.uri, rope, changes: None });
                self.ensure_root(connection, &path);
                self.edited(&path);
                // The first diagnostics of a file come at once, not after the quiet time.
                self.flush(connection);
            }
            notif::DidChangeTextDocument::METHOD => {
                let Ok(p) = n.extract::<lsp_types::DidChangeTextDocumentParams>(notif::DidChangeTextDocument::METHOD)
                else {
                    return;
                };
                let Some(path) = uri_to_path(&p.text_document.uri) else { return };
                let Some(doc) = self.documents.get_mut(&path) else { return };
                for change in p.content_changes {
                    let applied = apply_change(&mut doc.rope, change.range, &change.text);
                    match (applied, &mut doc.changes) {
                        (Some(c), Some(changes)) => changes.push(c),
                        _ => doc.changes = None,
                    }
                }
                self.edited(&path);
            }
            notif::DidSaveTextDocument::METHOD => {
                let Ok(p) = n.extract::<lsp_types::DidSaveTextDocumentParams>(notif::DidSaveTextDocument::METHOD)
                else {
                    return;
                };
                if let Some(path) = uri_to_path(&p.text_document.uri)
                    && is_config(&path)
                {
                    self.reload_config(connection, &path);
                }
            }
            notif::DidCloseTextDocument::METHOD => {
                let Ok(p) = n.extract::<lsp_types::DidCloseTextDocumentParams>(notif::DidCloseTextDocument::METHOD)
                else {
                    return;
                };
                let Some(path) = uri_to_path(&p.text_document.uri) else { return };
                self.documents.remove(&path);
                // The file on disk is what the rest of the project sees again.
                if let Some(root) = self.root_of(&path) {
                    self.roots[&root].engine.project.set_overlay(&path, None);
                    self.pending.entry(root).or_default().insert(project::normalize(&path));
                    self.deadline.get_or_insert_with(Instant::now);
                }
                publish(connection, p.text_document.uri, Vec::new());
            }
            notif::DidChangeWatchedFiles::METHOD => {
                let Ok(p) = n.extract::<lsp_types::DidChangeWatchedFilesParams>(notif::DidChangeWatchedFiles::METHOD)
                else {
                    return;
                };
                for change in p.changes {
                    let Some(path) = uri_to_path(&change.uri) else { continue };
                    if is_config(&path) {
                        self.reload_config(connection, &path);
                    } else if !self.documents.contains_key(&path)
                        && let Some(root) = self.root_of(&path)
                    {
                        // Changed on disk behind the editor: drop the stale parse, re-analyse.
                        self.roots[&root].engine.project.set_overlay(&path, None);
                        self.pending.entry(root).or_default().insert(project::normalize(&path));
                        self.deadline = Some(Instant::now() + self.debounce);
                    }
                }
            }
            notif::DidChangeWorkspaceFolders::METHOD => {
                let Ok(p) =
                    n.extract::<lsp_types::DidChangeWorkspaceFoldersParams>(notif::DidChangeWorkspaceFolders::METHOD)
                else {
                    return;
                };
                for removed in p.event.removed.iter().filter_map(|f| uri_to_path(&f.uri)) {
                    self.folders.retain(|f| f != &removed);
                    self.roots.remove(&removed);
                }
                self.folders.extend(p.event.added.iter().filter_map(|f| uri_to_path(&f.uri)));
                // Open files may now belong to another root: analyse them afresh there.
                self.roots.clear();
                let open: Vec<PathBuf> = self.documents.keys().cloned().collect();
                for path in open {
                    self.ensure_root(connection, &path);
                }
            }
            _ => {}
        }
    }

    /// The workspace root a file belongs to: the innermost workspace folder holding it, else
    /// the nearest directory above it with a config, a package.json or a git repository.
    fn root_dir_for(&self, path: &Path) -> PathBuf {
        let path = project::normalize(path);
        if let Some(folder) = self.folders.iter().filter(|f| path.starts_with(f)).max_by_key(|f| f.as_os_str().len()) {
            return project::normalize(folder);
        }
        let parent = path.parent().unwrap_or(Path::new("/"));
        parent
            .ancestors()
            .find(|d| {
                d.join(crate::config::CONFIG_FILE).is_file()
                    || d.join("package.json").is_file()
                    || d.join(".git").exists()
            })
            .unwrap_or(parent)
            .to_path_buf()
    }

    fn root_of(&self, path: &Path) -> Option<PathBuf> {
        let dir = self.root_dir_for(path);
        self.roots.contains_key(&dir).then_some(dir)
    }

    /// Builds a root's engine and analyses every file of it once (the project graph and every
    /// other file's findings are then cached).
    fn ensure_root(&mut self, connection: &Connection, path: &Path) {
        let dir = self.root_dir_for(path);
        if self.roots.contains_key(&dir) {
            return;
        }
        let options = Options { paths: vec![dir.clone()], guard: self.guard.clone(), ..Options::default() };
        let engine = match Engine::new(options) {
            Ok(e) => e,
            Err(e) => {
                show_error(connection, &format!("retrysafe: {e}"));
                return;
            }
        };
        for (p, doc) in &self.documents {
            if p.starts_with(&dir) {
                engine.project.set_overlay(p, Some(Arc::from(doc.rope.to_string())));
            }
        }
        let mut files: Vec<PathBuf> = engine.files().to_vec();
        files.extend(self.documents.keys().filter(|p| p.starts_with(&dir)).map(|p| project::normalize(p)));
        files.sort();
        files.dedup();
        let analysed = analyse(&engine, &files);
        let mut root = Root { engine, results: HashMap::new(), with_fixes: HashMap::new(), reaches: HashMap::new() };
        for (path, diags, reaches) in analysed {
            root.store(path, diags, reaches);
        }
        self.roots.insert(dir, root);
    }

    fn edited(&mut self, path: &Path) {
        // Taken even when no root holds the file yet: a root built later starts from the
        // whole text, and changes made before it must not be replayed on its parse.
        let changes = self.documents.get_mut(path).map(|doc| doc.changes.replace(Vec::new()));
        let Some(root) = self.root_of(path) else { return };
        if let (Some(doc), Some(changes)) = (self.documents.get(path), changes) {
            let text: Arc<str> = Arc::from(doc.rope.to_string());
            let project = &self.roots[&root].engine.project;
            match changes {
                Some(changes) => project.edit_overlay(path, text, &changes),
                None => project.set_overlay(path, Some(text)),
            }
        }
        self.pending.entry(root).or_default().insert(project::normalize(path));
        self.deadline = Some(Instant::now() + self.debounce);
    }

    /// Re-analyses the edited files and those that reach them; publishes what changed.
    fn flush(&mut self, connection: &Connection) {
        self.deadline = None;
        let pending = std::mem::take(&mut self.pending);
        let mut touched: BTreeSet<PathBuf> = BTreeSet::new();
        for (dir, changed) in pending {
            let Some(root) = self.roots.get_mut(&dir) else { continue };
            let mut origins: BTreeSet<PathBuf> = changed.clone();
            for (origin, reached) in &root.reaches {
                if changed.iter().any(|c| reached.contains(c)) {
                    origins.insert(origin.clone());
                }
            }
            for origin in &origins {
                if let Some(old) = root.results.get(origin) {
                    touched.extend(old.iter().map(|d| d.file.path.clone()));
                }
            }
            touched.extend(changed);
            let origins: Vec<PathBuf> = origins.into_iter().collect();
            for (path, diags, reaches) in analyse(&root.engine, &origins) {
                touched.extend(diags.iter().map(|d| d.file.path.clone()));
                root.store(path, diags, reaches);
            }
        }
        for path in touched {
            if let Some(doc) = self.documents.get(&path) {
                let uri = doc.uri.clone();
                publish(connection, uri, self.lsp_diagnostics(&path));
            }
        }
    }

    fn reload_config(&mut self, connection: &Connection, changed: &Path) {
        let Some(dir) = changed.parent().map(project::normalize) else { return };
        let stale: Vec<PathBuf> =
            self.roots.keys().filter(|r| r.starts_with(&dir) || dir.starts_with(r)).cloned().collect();
        for root in &stale {
            self.roots.remove(root);
            self.pending.remove(root);
        }
        let open: Vec<PathBuf> = self.documents.keys().cloned().collect();
        for path in &open {
            self.ensure_root(connection, path);
        }
        for path in open {
            if stale.contains(&self.root_dir_for(&path)) {
                let uri = self.documents[&path].uri.clone();
                publish(connection, uri, self.lsp_diagnostics(&path));
            }
        }
    }

    /// What `check` reports for this file, from the cached findings of every analysed file.
    fn findings(&self, path: &Path) -> Vec<Diagnostic> {
        let Some(root) = self.root_of(path).and_then(|r| self.roots.get(&r)) else { return Vec::new() };
        let key = project::normalize(path);
        let raw: Vec<Diagnostic> = root.results.values().flatten().filter(|d| d.file.path == key).cloned().collect();
        root.engine.finish_file(&key, raw)
    }

    /// `findings` with the fixes `fix` would apply: the files whose findings point into this
    /// one are analysed again with fixes on (once per analysis of theirs, then cached).
    fn findings_with_fixes(&mut self, path: &Path) -> Vec<Diagnostic> {
        let Some(root) = self.root_of(path).and_then(|r| self.roots.get_mut(&r)) else { return Vec::new() };
        let key = project::normalize(path);
        let mut raw = Vec::new();
        // In the order of `results`, so that merging duplicates keeps the finding `findings` keeps.
        for (origin, diags) in &root.results {
            if !diags.iter().any(|d| d.file.path == key) {
                continue;
            }
            let fixed = root
                .with_fixes
                .entry(origin.clone())
                .or_insert_with(|| root.engine.analyse_file(origin, Fixes::Build).unwrap_or_default());
            raw.extend(fixed.iter().filter(|d| d.file.path == key).cloned());
        }
        root.engine.finish_file(&key, raw)
    }

    fn lsp_diagnostics(&self, path: &Path) -> Vec<lsp_types::Diagnostic> {
        let findings = self.findings(path);
        let Some(first) = findings.first() else { return Vec::new() };
        let index = LineIndex::new(&first.file.text);
        findings.iter().map(|d| to_lsp(d, &index)).collect()
    }

    fn code_actions(&mut self, params: &CodeActionParams) -> Vec<CodeActionOrCommand> {
        let uri = &params.text_document.uri;
        let Some(path) = uri_to_path(uri) else { return Vec::new() };
        let only = params.context.only.clone().unwrap_or_default();
        let wants = |kind: &str| only.is_empty() || only.iter().any(|o| kind.starts_with(o.as_str()));
        let mut actions = Vec::new();
        if wants(CodeActionKind::QUICKFIX.as_str()) {
            let findings = self.findings_with_fixes(&path);
            if let Some(first) = findings.first() {
                let index = LineIndex::new(&first.file.text);
                for d in &findings {
                    let diagnostic = to_lsp(d, &index);
                    if !ranges_touch(&diagnostic.range, &params.range) {
                        continue;
                    }
                    if let Some(action) = self.fix_action(d, &diagnostic, uri) {
                        actions.push(CodeActionOrCommand::CodeAction(action));
                    }
                    if let Some(action) = ignore_action(d, &diagnostic, uri, &index) {
                        actions.push(CodeActionOrCommand::CodeAction(action));
                    }
                }
            }
        }
        for (kind, unsafe_too, title) in [
            (FIX_ALL, false, "retrysafe: fix all safe issues"),
            (FIX_ALL_UNSAFE, true, "retrysafe: fix all issues, including review fixes"),
        ] {
            // `source.fixAll` asks for every fix-all kind; the unsafe one only when named.
            let named = only.iter().any(|o| o.as_str() == kind);
            if (wants(kind) && (!unsafe_too || named))
                && let Some(edit) = self.fix_all(&path, uri, unsafe_too)
            {
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: title.into(),
                    kind: Some(CodeActionKind::from(kind)),
                    edit: Some(edit),
                    ..CodeAction::default()
                }));
            }
        }
        actions
    }

    /// The finding's own fix, as the CLI would apply it (edits in another file or a new file
    /// included).
    fn fix_action(&self, d: &Diagnostic, diagnostic: &lsp_types::Diagnostic, uri: &Url) -> Option<CodeAction> {
        let fix = d.fix.as_ref()?;
        if fix.applicability == Applicability::DisplayOnly || (fix.edits.is_empty() && fix.new_files.is_empty()) {
            return None;
        }
        let root = self.roots.get(&self.root_of(&d.file.path)?)?;
        let (target_uri, target_text) = match &fix.target {
            None => (uri.clone(), d.file.text.clone()),
            Some(target) => (Url::from_file_path(target).ok()?, root.engine.project.load(target).ok()?.text.clone()),
        };
        let index = LineIndex::new(&target_text);
        let edits: Vec<TextEdit> = fix
            .edits
            .iter()
            .map(|e| TextEdit { range: index.range(e.start, e.end), new_text: e.replacement.clone() })
            .collect();
        let edit = if fix.new_files.is_empty() {
            WorkspaceEdit { changes: Some(HashMap::from([(target_uri, edits)])), ..WorkspaceEdit::default() }
        } else {
            let mut operations = Vec::new();
            for (path, text) in &fix.new_files {
                let new_uri = Url::from_file_path(path).ok()?;
                operations.push(DocumentChangeOperation::Op(ResourceOp::Create(CreateFile {
                    uri: new_uri.clone(),
                    options: None,
                    annotation_id: None,
                })));
                operations.push(DocumentChangeOperation::Edit(TextDocumentEdit {
                    text_document: OptionalVersionedTextDocumentIdentifier { uri: new_uri, version: None },
                    edits: vec![OneOf::Left(TextEdit { range: Range::default(), new_text: text.clone() })],
                }));
            }
            if !edits.is_empty() {
                operations.push(DocumentChangeOperation::Edit(TextDocumentEdit {
                    text_document: OptionalVersionedTextDocumentIdentifier { uri: target_uri, version: None },
                    edits: edits.into_iter().map(OneOf::Left).collect(),
                }));
            }
            WorkspaceEdit {
                document_changes: Some(DocumentChanges::Operations(operations)),
                ..WorkspaceEdit::default()
            }
        };
        let review = if fix.applicability == Applicability::Unsafe { " (review)" } else { "" };
        Some(CodeAction {
            title: format!("retrysafe: {}{review}", fix.title),
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: Some(vec![diagnostic.clone()]),
            is_preferred: Some(fix.applicability == Applicability::Safe),
            edit: Some(edit),
            ..CodeAction::default()
        })
    }

    /// The CLI's fix fixpoint over this file and the files whose handlers reach it, with the
    /// open buffers as the text: this file's result as one minimal edit.
    fn fix_all(&self, path: &Path, uri: &Url, unsafe_too: bool) -> Option<WorkspaceEdit> {
        let dir = self.root_of(path)?;
        let root = self.roots.get(&dir)?;
        let key = project::normalize(path);
        let original = root.engine.project.current_text(&key).ok()?;
        let mut paths: Vec<PathBuf> = root
            .reaches
            .iter()
            .filter(|(_, reached)| reached.contains(&key))
            .map(|(origin, _)| origin.clone())
            .collect();
        paths.push(key.clone());
        paths.sort();
        paths.dedup();
        let engine = Engine::new(Options { paths, guard: self.guard.clone(), ..Options::default() }).ok()?;
        for (p, doc) in &self.documents {
            engine.project.set_overlay(p, Some(Arc::from(doc.rope.to_string())));
        }
        let allowed = move |a: Applicability| match a {
            Applicability::Safe => true,
            Applicability::Unsafe => unsafe_too,
            Applicability::DisplayOnly => false,
        };
        let report = engine.fix(&allowed);
        let fixed = &report.files.iter().find(|f| f.path == key && f.fixed != original)?.fixed;
        let (start, end, replacement) = minimal_edit(&original, fixed);
        let range = LineIndex::new(&original).range(start, end);
        Some(WorkspaceEdit {
            changes: Some(HashMap::from([(uri.clone(), vec![TextEdit { range, new_text: replacement }])])),
            ..WorkspaceEdit::default()
        })
    }

    fn hover(&self, params: &HoverParams) -> Option<Hover> {
        let path = uri_to_path(&params.text_document_position_params.text_document.uri)?;
        let findings = self.findings(&path);
        let first = findings.first()?;
        let index = LineIndex::new(&first.file.text);
        let offset = index.offset(params.text_document_position_params.position);
        let here: Vec<&Diagnostic> = findings.iter().filter(|d| d.start <= offset && offset <= d.end).collect();
        let widest = here.iter().map(|d| (d.start, d.end)).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))?;
        let mut sections = Vec::new();
        for d in here {
            let mut text = format!("**retrysafe · `{}`**: {}", d.rule, d.message);
            if let Some(chain) = &d.handler {
                text.push_str(&format!("\n\nHandler: `{chain}`"));
            }
            if let Some(help) = &d.help {
                text.push_str(&format!("\n\nHelp: {help}"));
            }
            if let Some(rule) = rules::find(d.rule) {
                text.push_str(&format!("\n\n{}\n\n{}", rule.summary, rule.docs.trim()));
            }
            sections.push(text);
        }
        Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value: sections.join("\n\n---\n\n"),
            }),
            range: Some(index.range(widest.0, widest.1)),
        })
    }
}

impl Root {
    fn store(&mut self, path: PathBuf, diags: Vec<Diagnostic>, reaches: Option<HashSet<PathBuf>>) {
        self.with_fixes.remove(&path);
        if diags.is_empty() {
            self.results.remove(&path);
        } else {
            self.results.insert(path.clone(), diags);
        }
        match reaches {
            Some(r) => self.reaches.insert(path, r),
            None => self.reaches.remove(&path),
        };
    }
}

/// Analyses files in parallel: each one's raw findings and, for files that may hold a
/// handler, the project files its imports reach.
fn analyse(engine: &Engine, files: &[PathBuf]) -> Vec<(PathBuf, Vec<Diagnostic>, Option<HashSet<PathBuf>>)> {
    files
        .par_iter()
        .map(|path| {
            let key = project::normalize(path);
            let diags = engine.analyse_file(&key, Fixes::Skip).unwrap_or_default();
            let mut reaches = match engine.project.current_text(&key) {
                Ok(text) if !diags.is_empty() || crate::workspace::may_be_relevant(text.as_bytes()) => {
                    Some(crate::batch::reached_files(&engine.project, &key, &text))
                }
                _ => None,
            };
            // Files reached other than by import (a schema a rule reads) are known by the
            // findings in them.
            if let Some(r) = &mut reaches {
                r.extend(diags.iter().map(|d| d.file.path.clone()).filter(|p| p != &key));
            }
            (key, diags, reaches)
        })
        .collect()
}

fn to_lsp(d: &Diagnostic, index: &LineIndex) -> lsp_types::Diagnostic {
    let mut message = d.message.clone();
    if let Some(h) = &d.help {
        message.push_str(&format!("\nhelp: {h}"));
    }
    lsp_types::Diagnostic {
        range: index.range(d.start, d.end),
        severity: Some(match d.severity {
            crate::config::Severity::Warning => DiagnosticSeverity::WARNING,
            _ => DiagnosticSeverity::ERROR,
        }),
        code: Some(NumberOrString::String(d.rule.to_string())),
        source: Some("retrysafe".into()),
        message,
        ..lsp_types::Diagnostic::default()
    }
}

/// "Ignore here": a suppression comment on the line above, with a reason to fill in.
fn ignore_action(
    d: &Diagnostic,
    diagnostic: &lsp_types::Diagnostic,
    uri: &Url,
    index: &LineIndex,
) -> Option<CodeAction> {
    if d.rule == crate::suppress::UNUSED || d.rule == crate::suppress::INVALID {
        return None;
    }
    let text = &d.file.text;
    let line_start = text[..d.start.min(text.len())].rfind('\n').map_or(0, |i| i + 1);
    let indent: String = text[line_start..].chars().take_while(|c| *c == ' ' || *c == '\t').collect();
    let comment = if d.file.path.extension().is_some_and(|e| e == "sql") { "--" } else { "//" };
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let at = index.range(line_start, line_start).start;
    let new_text = format!("{indent}{comment} retrysafe-ignore {}: <reason>{newline}", d.rule);
    Some(CodeAction {
        title: format!("retrysafe: ignore `{}` here", d.rule),
        kind: Some(CodeActionKind::QUICKFIX),
        diagnostics: Some(vec![diagnostic.clone()]),
        edit: Some(WorkspaceEdit {
            changes: Some(HashMap::from([(uri.clone(), vec![TextEdit { range: Range::new(at, at), new_text }])])),
            ..WorkspaceEdit::default()
        }),
        ..CodeAction::default()
    })
}

fn ranges_touch(a: &Range, b: &Range) -> bool {
    let key = |p: &Position| (p.line, p.character);
    key(&a.start) <= key(&b.end) && key(&b.start) <= key(&a.end)
}

fn parse<P: serde::de::DeserializeOwned>(request: Request) -> Result<P, String> {
    serde_json::from_value(request.params).map_err(|e| format!("{}: invalid params: {e}", request.method))
}

fn send(connection: &Connection, message: Message) {
    // A closed channel means the client is gone; the main loop ends on the next receive.
    let _ = connection.sender.send(message);
}

fn publish(connection: &Connection, uri: Url, diagnostics: Vec<lsp_types::Diagnostic>) {
    let params = PublishDiagnosticsParams { uri, diagnostics, version: None };
    send(connection, Message::Notification(Notification::new(notif::PublishDiagnostics::METHOD.into(), params)));
}

fn show_error(connection: &Connection, message: &str) {
    let params = lsp_types::ShowMessageParams { typ: lsp_types::MessageType::ERROR, message: message.into() };
    send(connection, Message::Notification(Notification::new(notif::ShowMessage::METHOD.into(), params)));
}

fn is_config(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| CONFIG_NAMES.contains(&n))
}

/// Applies one content change (a range in UTF-16 units, or the whole text) to the buffer:
/// the change in bytes, for a range.
fn apply_change(rope: &mut Rope, range: Option<Range>, text: &str) -> Option<TextChange> {
    let Some(range) = range else {
        *rope = Rope::from_str(text);
        return None;
    };
    let start = rope_char(rope, range.start);
    let end = rope_char(rope, range.end).max(start);
    let (start_byte, end_byte) = (rope.char_to_byte(start), rope.char_to_byte(end));
    let change = TextChange::at(start_byte, end_byte, text, rope_point(rope, start_byte), rope_point(rope, end_byte));
    rope.remove(start..end);
    rope.insert(start, text);
    Some(change)
}

/// The tree-sitter point of a byte offset: rows counted by `\n` only (ropey's lines also
/// break at other separators).
fn rope_point(rope: &Rope, byte: usize) -> tree_sitter::Point {
    let (mut row, mut column) = (0, 0);
    for chunk in rope.byte_slice(..byte).chunks() {
        let bytes = chunk.as_bytes();
        match memchr::memrchr(b'\n', bytes) {
            Some(last) => {
                row += memchr::memchr_iter(b'\n', bytes).count();
                column = bytes.len() - last - 1;
            }
            None => column += bytes.len(),
        }
    }
    tree_sitter::Point::new(row, column)
}

fn rope_char(rope: &Rope, position: Position) -> usize {
    let line = (position.line as usize).min(rope.len_lines().saturating_sub(1));
    let line_start = rope.line_to_char(line);
    let line_len = rope.line(line).len_chars();
    let line_units = rope.char_to_utf16_cu(line_start);
    let char_in_line = rope.utf16_cu_to_char(line_units + position.character as usize) - line_start;
    line_start + char_in_line.min(line_len)
}

/// Byte offsets ↔ LSP positions (UTF-16 columns) for one text.
struct LineIndex<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str) -> LineIndex<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        LineIndex { text, line_starts }
    }

    fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let character: usize = self.text[start..offset].chars().map(char::len_utf16).sum();
        Position::new(line as u32, character as u32)
    }

    fn range(&self, start: usize, end: usize) -> Range {
        Range::new(self.position(start), self.position(end))
    }

    fn offset(&self, position: Position) -> usize {
        let Some(&start) = self.line_starts.get(position.line as usize) else { return self.text.len() };
        let end = self.line_starts.get(position.line as usize + 1).copied().unwrap_or(self.text.len());
        let mut units = 0;
        for (i, c) in self.text[start..end].char_indices() {
            if units >= position.character as usize {
                return start + i;
            }
            units += c.len_utf16();
        }
        end
    }
}

/// The smallest single replacement that turns `old` into `new`.
pub fn minimal_edit(old: &str, new: &str) -> (usize, usize, String) {
    let mut prefix = old.bytes().zip(new.bytes()).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(prefix) || !new.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let max_suffix = (old.len() - prefix).min(new.len() - prefix);
    let mut suffix = old.bytes().rev().zip(new.bytes().rev()).take(max_suffix).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(old.len() - suffix) || !new.is_char_boundary(new.len() - suffix) {
        suffix -= 1;
    }
    (prefix, old.len() - suffix, new[prefix..new.len() - suffix].to_string())
}

fn uri_to_path(uri: &Url) -> Option<PathBuf> {
    uri.to_file_path().ok().map(|p| project::normalize(&p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_edit_spans_only_the_change() {
        assert_eq!(minimal_edit("abcXdef", "abcYYdef"), (3, 4, "YY".to_string()));
        assert_eq!(minimal_edit("same", "same"), (4, 4, String::new()));
    }

    #[test]
    fn positions_count_utf16_units() {
        let index = LineIndex::new("a😀b\nc");
        assert_eq!(index.position(5), Position::new(0, 3));
        assert_eq!(index.position(7), Position::new(1, 0));
        assert_eq!(index.offset(Position::new(0, 3)), 5);
    }

    #[test]
    fn incremental_changes_apply_in_utf16_units() {
        let mut rope = Rope::from_str("a😀b\nc\n");
        apply_change(&mut rope, Some(Range::new(Position::new(0, 3), Position::new(0, 4))), "XY");
        apply_change(&mut rope, Some(Range::new(Position::new(1, 0), Position::new(1, 1))), "d");
        assert_eq!(rope.to_string(), "a😀XY\nd\n");
        apply_change(&mut rope, None, "whole");
        assert_eq!(rope.to_string(), "whole");
    }

    #[test]
    fn rope_points_count_newlines_only() {
        let text = "a😀b\r\nc\u{2028}d\ne";
        let rope = Rope::from_str(text);
        for offset in (0..=text.len()).filter(|o| text.is_char_boundary(*o)) {
            let change = TextChange::new(text, offset, offset, "");
            assert_eq!(rope_point(&rope, offset), change.input_edit.start_position, "at {offset}");
        }
    }

    #[test]
    fn file_uris_decode() {
        let uri = Url::parse("file:///a%20b/c.ts").unwrap();
        assert_eq!(uri_to_path(&uri), Some(PathBuf::from("/a b/c.ts")));
    }
}
