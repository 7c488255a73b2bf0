//! The guard module as part of the guard wrap. When `--guard MODULE#EXPORT` names a module
//! that does not exist yet, the wrap creates it from the client the wrapped work writes
//! through (a Prisma client, a pg Pool, a Drizzle database; a Redis client for work that has
//! no database write to share a transaction with), so the claim and the writes commit in one
//! transaction. Without this, a wrap of a Prisma handler would leave `prisma.` calls on the
//! root client, outside the guard's transaction: exactly the failure the guard exists for.

use super::GuardSpec;
use super::wrap_guard::GuardFlavor;
use crate::model::ast::{self, text};
use crate::model::effects::{self, EffectKind};
use crate::project::{self, Project};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::path::{Path, PathBuf};
use tree_sitter::Node;

/// A guard module this run creates (or created in an earlier pass).
pub struct PlannedGuard {
    pub path: PathBuf,
    pub text: String,
    pub flavor: GuardFlavor,
    /// The handler's local name of the client the guard is built from.
    pub client: String,
    /// Whether the file is new in this fix (false: an earlier pass of this run created it).
    pub create: bool,
}

/// None when the module already resolves (the existing module decides) or cannot be placed.
/// Err when it would be created but no client to build it from was found.
pub fn plan(
    project: &Project,
    file: &SourceFile,
    spec: &GuardSpec,
    region: &[Node],
) -> Result<Option<PlannedGuard>, String> {
    let Some(path) = project.planned_module_path(&file.path, &spec.module) else { return Ok(None) };
    let clients = clients_written(project, file, region);
    if let Some(existing) = project.virtual_text(&path) {
        let flavor = super::wrap_guard::flavor_of(&existing);
        let client = clients.iter().find(|c| c.flavor == flavor).map(|c| c.local.clone()).unwrap_or_default();
        return Ok(Some(PlannedGuard { path, text: existing, flavor, client, create: false }));
    }
    let client = clients
        .iter()
        .find(|c| c.flavor != GuardFlavor::Lease)
        .or_else(|| clients.iter().find(|c| c.flavor == GuardFlavor::Lease))
        .ok_or_else(|| {
            format!(
                "`{}` does not exist and the work writes through no client the guard can be built from \
                 (a Prisma client, a pg Pool, a Drizzle database or a Redis client): create it by hand",
                spec.module
            )
        })?;
    let style = file.style();
    let (q, semi, eol) = (style.quote, style.semi(), style.eol);
    let commonjs = uses_commonjs(file);
    let factory = match client.flavor {
        GuardFlavor::Prisma => "prismaGuard",
        GuardFlavor::Postgres => "postgresGuard",
        GuardFlavor::Drizzle => "drizzleGuard",
        _ => "redisGuard",
    };
    let mut lines = Vec::new();
    let import = |names: &str, module: &str, default: bool| {
        if commonjs {
            if default {
                format!("const {names} = require({q}{module}{q}){semi}")
            } else {
                format!("const {{ {names} }} = require({q}{module}{q}){semi}")
            }
        } else if default {
            format!("import {names} from {q}{module}{q}{semi}")
        } else {
            format!("import {{ {names} }} from {q}{module}{q}{semi}")
        }
    };
    lines.push(import(factory, "@retrysafe/guard", false));
    let local = match &client.source {
        ClientSource::Import { module, imported } => {
            let module = module_from(&path, file, module);
            match imported.as_str() {
                "default" | "*" => lines.push(import(&client.local, &module, true)),
                name if name == client.local => lines.push(import(name, &module, false)),
                name => lines.push(import(&format!("{name} as {}", client.local), &module, false)),
            }
            client.local.clone()
        }
        ClientSource::Constructed { init, packages } => {
            for (names, module, default) in packages {
                lines.push(import(names, module, *default));
            }
            lines.push(String::new());
            lines.push("// The guard's own client: the handler's is not exported.".to_string());
            lines.push(format!("const {} = {init}{semi}", client.local));
            client.local.clone()
        }
    };
    let why = match client.flavor {
        GuardFlavor::Lease => "// A lease: the work has no database write to share a transaction with.",
        _ => "// The claim commits in one transaction with the writes made through `tx`.",
    };
    lines.push(String::new());
    lines.push(why.to_string());
    let options =
        if client.flavor == GuardFlavor::Lease { ", { ttlSeconds: 30 * 24 * 3600, leaseSeconds: 60 }" } else { "" };
    if spec.export == "default" {
        if commonjs {
            lines.push(format!("module.exports = {factory}({local}{options}){semi}"));
        } else {
            lines.push(format!("export default {factory}({local}{options}){semi}"));
        }
    } else if commonjs {
        lines.push(format!("const {} = {factory}({local}{options}){semi}", spec.export));
        lines.push(format!("module.exports = {{ {} }}{semi}", spec.export));
    } else {
        lines.push(format!("export const {} = {factory}({local}{options}){semi}", spec.export));
    }
    let text = lines.join(eol) + eol;
    Ok(Some(PlannedGuard { path, text, flavor: client.flavor, client: client.local.clone(), create: true }))
}

enum ClientSource {
    /// Imported by the handler from a module the guard module can import too.
    Import { module: String, imported: String },
    /// Built in the handler file from configuration only (`new PrismaClient()`): the guard
    /// module builds its own, with the package imports it needs (names, module, default).
    Constructed { init: String, packages: Vec<(String, String, bool)> },
}

struct Client {
    local: String,
    flavor: GuardFlavor,
    source: ClientSource,
}

/// The clients the region writes through, database clients first in the order written;
/// then a Redis client the file has, for a lease.
fn clients_written(project: &Project, file: &SourceFile, region: &[Node]) -> Vec<Client> {
    let src = file.text.as_str();
    let mut out: Vec<Client> = Vec::new();
    for stmt in region {
        for call in ast::calls_in(*stmt, false) {
            let Some(effect) = effects::classify(call, src, false) else { continue };
            if !effect.kind.is_db() {
                continue;
            }
            let Some(root) = ast::callee_path(call, src).into_iter().next() else { continue };
            if out.iter().any(|c| c.local == root) {
                continue;
            }
            if let Some(client) = describe_client(project, file, &root).filter(|c| c.flavor != GuardFlavor::Lease) {
                out.push(client);
            }
        }
    }
    let has_external = region.iter().any(|s| {
        ast::calls_in(*s, false)
            .into_iter()
            .filter_map(|c| effects::classify(c, src, false))
            .any(|e| e.kind.is_external() && e.kind != EffectKind::Possible)
    });
    if out.is_empty() && has_external {
        let names: Vec<String> =
            project::imports(file).iter().map(|i| i.local.clone()).chain(module_declared(file)).collect();
        // Only a binding named for Redis: a module that also builds a Redis client exports
        // other things (a filter, a config) the lease cannot be built from.
        for name in names.into_iter().filter(|n| n.to_ascii_lowercase().contains("redis")) {
            if let Some(client) = describe_client(project, file, &name).filter(|c| c.flavor == GuardFlavor::Lease) {
                out.push(client);
                break;
            }
        }
    }
    out
}

fn module_declared(file: &SourceFile) -> Vec<String> {
    let src = file.text.as_str();
    ast::named_children(file.root())
        .into_iter()
        .filter(|s| matches!(s.kind_name(), "lexical_declaration" | "variable_declaration"))
        .flat_map(ast::named_children)
        .filter_map(|d| d.field("name").filter(|n| n.kind_name() == "identifier").map(|n| text(n, src).to_string()))
        .collect()
}

fn flavor_of_client_text(t: &str) -> Option<GuardFlavor> {
    if t.contains("PrismaClient") || t.contains("@prisma/client") {
        Some(GuardFlavor::Prisma)
    } else if t.contains("drizzle(") || t.contains("drizzle-orm") {
        Some(GuardFlavor::Drizzle)
    } else if t.contains("new Pool(")
        || t.contains("new pg.Pool(")
        || t.contains("from \"pg\"")
        || t.contains("from 'pg'")
    {
        Some(GuardFlavor::Postgres)
    } else if t.contains("ioredis")
        || t.contains("new Redis(")
        || t.contains("from \"redis\"")
        || t.contains("from 'redis'")
    {
        Some(GuardFlavor::Lease)
    } else {
        None
    }
}

fn describe_client(project: &Project, file: &SourceFile, name: &str) -> Option<Client> {
    let src = file.text.as_str();
    if let Some(import) = project::imports(file).iter().find(|i| i.local == name) {
        let flavor = match project.resolve(&file.path, &import.source) {
            Some(path) => {
                let loaded = project.load(&path).ok()?;
                // The module's declaration of the export, else the whole module.
                flavor_of_client_text(&loaded.text)?
            }
            None => return None,
        };
        return Some(Client {
            local: name.to_string(),
            flavor,
            source: ClientSource::Import { module: import.source.clone(), imported: import.imported.clone() },
        });
    }
    // `const prisma = new PrismaClient()` at module level.
    let declarator = ast::named_children(file.root())
        .into_iter()
        .filter(|s| matches!(s.kind_name(), "lexical_declaration" | "variable_declaration"))
        .flat_map(ast::named_children)
        .find(|d| d.field("name").is_some_and(|n| text(n, src) == name))?;
    let init = declarator.field("value")?;
    let init_text = text(init, src);
    let flavor = flavor_of_client_text(init_text).or_else(|| {
        let ctor = init.field("constructor").map(|c| text(c, src))?;
        let import = project::imports(file).iter().find(|i| i.local == ctor.split('.').next().unwrap_or(ctor))?;
        flavor_of_client_text(&format!("{ctor}( {}", import.source))
    })?;
    // Only configuration from the environment can be copied: anything else is the handler's.
    let mut packages = Vec::new();
    let mut ok = init.kind_name() == "new_expression" || init.kind_name() == "call_expression";
    ast::walk(init, &mut |n| {
        if n.kind_name() == "identifier" {
            let id = text(n, src);
            if id == "process" || id == "undefined" {
                return true;
            }
            match project::imports(file).iter().find(|i| i.local == id) {
                Some(i) if !i.source.starts_with('.') => {
                    let entry = if i.imported == "default" || i.imported == "*" {
                        (id.to_string(), i.source.clone(), true)
                    } else if i.imported == id {
                        (id.to_string(), i.source.clone(), false)
                    } else {
                        (format!("{} as {id}", i.imported), i.source.clone(), false)
                    };
                    if !packages.contains(&entry) {
                        packages.push(entry);
                    }
                }
                _ => ok = false,
            }
        }
        true
    });
    if !ok || init_text.contains('\n') && init_text.lines().count() > 6 {
        return None;
    }
    Some(Client {
        local: name.to_string(),
        flavor,
        source: ClientSource::Constructed { init: init_text.to_string(), packages },
    })
}

fn uses_commonjs(file: &SourceFile) -> bool {
    let kinds: Vec<&str> = ast::named_children(file.root()).into_iter().map(|n| n.kind_name()).collect();
    !kinds.contains(&"import_statement")
        && !kinds.contains(&"export_statement")
        && (file.text.contains("require(") || file.text.contains("module.exports"))
}

/// The specifier the guard module at `guard_path` uses for a module the handler imports as
/// `spec`: a package or alias as it is; a relative path recomputed from the guard's folder.
fn module_from(guard_path: &Path, handler: &SourceFile, spec: &str) -> String {
    if !spec.starts_with('.') {
        return spec.to_string();
    }
    let Some(from_dir) = handler.path.parent() else { return spec.to_string() };
    let target = project::normalize(&from_dir.join(spec));
    let Some(guard_dir) = guard_path.parent() else { return spec.to_string() };
    relative(guard_dir, &target)
}

fn relative(from_dir: &Path, target: &Path) -> String {
    let from: Vec<_> = from_dir.components().collect();
    let to: Vec<_> = target.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(to[common..].iter().map(|c| c.as_os_str().to_string_lossy().to_string()));
    let joined = parts.join("/");
    if joined.starts_with("..") { joined } else { format!("./{joined}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_specifiers_are_recomputed_from_the_guard_folder() {
        assert_eq!(relative(Path::new("/p/src/lib"), Path::new("/p/src/lib/prisma")), "./prisma");
        assert_eq!(relative(Path::new("/p/src/lib"), Path::new("/p/src/db/client")), "../db/client");
        assert_eq!(relative(Path::new("/p/lib"), Path::new("/p/src/db.js")), "../src/db.js");
    }
}
