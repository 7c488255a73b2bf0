//! `retrysafe init`: sets a JavaScript project up for the fixes. It reads `package.json` for
//! the database and Redis clients, the tsconfig/jsconfig `paths` for an import alias, and
//! plans `retrysafe.json`, the guard module and the claim table (a Prisma model or SQL).
//! Nothing is written until the whole plan is known: a file that exists with other content
//! stops the run (unless `--force`), so a second run changes nothing.

use crate::fix::write::write_atomic;
use crate::project::jsonc_to_json;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Database {
    Prisma,
    Drizzle,
    Pg,
    Mysql2,
}

impl Database {
    pub fn label(self) -> &'static str {
        match self {
            Database::Prisma => "Prisma",
            Database::Drizzle => "Drizzle",
            Database::Pg => "pg",
            Database::Mysql2 => "mysql2",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redis {
    Ioredis,
    NodeRedis,
}

#[derive(Debug, Default)]
pub struct Detected {
    pub database: Option<Database>,
    pub redis: Option<Redis>,
}

/// The clients a `package.json` depends on; the first database in the order the guard
/// prefers (an ORM over its driver) wins.
pub fn detect(manifest: &Value) -> Detected {
    let has = |name: &str| {
        ["dependencies", "devDependencies", "optionalDependencies"].iter().any(|k| manifest[k].get(name).is_some())
    };
    let database = if has("@prisma/client") || has("prisma") {
        Some(Database::Prisma)
    } else if has("drizzle-orm") {
        Some(Database::Drizzle)
    } else if has("pg") {
        Some(Database::Pg)
    } else if has("mysql2") {
        Some(Database::Mysql2)
    } else {
        None
    };
    let redis = if has("ioredis") {
        Some(Redis::Ioredis)
    } else if has("redis") {
        Some(Redis::NodeRedis)
    } else {
        None
    };
    Detected { database, redis }
}

pub struct Options {
    pub dir: PathBuf,
    pub force: bool,
    /// How the user runs us, for the printed next command (`npx retrysafe` or `retrysafe`).
    pub command: String,
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub written: Vec<PathBuf>,
    pub unchanged: Vec<PathBuf>,
    pub notes: Vec<String>,
    pub next: Vec<String>,
}

struct Planned {
    path: PathBuf,
    text: String,
    kind: Kind,
}

#[derive(PartialEq)]
enum Kind {
    /// A file of ours: present with exactly this text, or absent.
    Exact,
    /// Appended to a file the user owns (schema.prisma): compared by presence, not equality.
    Append,
    /// retrysafe.json: one that parses and names the same guard (or we have none) is kept.
    Config(Option<String>),
    /// The guard module: one that imports @retrysafe/guard and exports `guard` is kept.
    GuardModule,
}

/// Whether an existing file already does what the planned one would.
fn already_set_up(kind: &Kind, existing: &str) -> bool {
    match kind {
        Kind::Exact | Kind::Append => false,
        Kind::Config(guard) => serde_json::from_str::<Value>(&jsonc_to_json(existing))
            .is_ok_and(|v| v.is_object() && guard.as_ref().is_none_or(|g| v["guard"] == g.as_str())),
        Kind::GuardModule => {
            existing.contains("@retrysafe/guard")
                && crate::regex!(r"export\s+const\s+guard\b|module\.exports\s*=\s*\{[^}]*\bguard\b").is_match(existing)
        }
    }
}

/// Where the guard module goes and how handlers import it.
struct GuardPlace {
    file: PathBuf,
    /// `@/lib/guard`, when a path alias reaches the file from everywhere.
    specifier: Option<String>,
}

pub fn run(opts: &Options) -> Result<Outcome, String> {
    let dir = std::path::absolute(&opts.dir).map(|d| normalize(&d)).unwrap_or_else(|_| opts.dir.clone());
    let opts = &Options { dir, force: opts.force, command: opts.command.clone() };
    let manifest_path = opts.dir.join("package.json");
    let manifest: Value = match std::fs::read_to_string(&manifest_path) {
        Ok(t) => serde_json::from_str(&t).map_err(|e| format!("{}: invalid JSON: {e}", manifest_path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{}: not found; run `init` in the package that holds your handlers",
                manifest_path.display()
            ));
        }
        Err(e) => return Err(format!("{}: cannot read: {e}", manifest_path.display())),
    };
    let detected = detect(&manifest);
    let typescript = opts.dir.join("tsconfig.json").is_file()
        || ["dependencies", "devDependencies"].iter().any(|k| manifest[k].get("typescript").is_some());
    let esm = typescript || manifest["type"] == "module";
    let place = guard_place(&opts.dir, typescript)?;
    let mut outcome = Outcome::default();
    let mut plan = Vec::new();

    let guard_module = guard_module(&opts.dir, &place.file, &detected, esm, &mut outcome.notes);
    let guard_spec = match (&guard_module, &place.specifier) {
        (Some(_), Some(spec)) => Some(format!("{spec}#guard")),
        (Some(_), None) => {
            outcome.notes.push(format!(
                "no `paths` alias (such as \"@/*\": [\"./src/*\"]) in tsconfig.json/jsconfig.json: a handler in any \
                 directory could not import {} by one name, so retrysafe.json names no guard; add the alias and set \
                 \"guard\": \"@/lib/guard#guard\"",
                display(&opts.dir, &place.file)
            ));
            None
        }
        (None, _) => None,
    };
    plan.push(Planned {
        path: opts.dir.join(crate::config::CONFIG_FILE),
        text: config_text(&opts.dir, guard_spec.as_deref()),
        kind: Kind::Config(guard_spec.clone()),
    });
    if let Some(text) = guard_module {
        plan.push(Planned { path: place.file.clone(), text, kind: Kind::GuardModule });
    }
    if let Some(claim) = claim_table(&opts.dir, &manifest, &detected, &mut outcome.notes)? {
        plan.push(claim);
    }

    let mut conflicts = Vec::new();
    let mut writes = Vec::new();
    let own_model = crate::regex!(r"(?m)^\s*model\s+ProcessedEvent\s*\{");
    for p in plan {
        match std::fs::read_to_string(&p.path) {
            Ok(existing) if p.kind == Kind::Append => {
                if existing.contains("@@map(\"processed_events\")") {
                    outcome.unchanged.push(p.path);
                } else {
                    // The project's own model of that name is some other table.
                    let text = if own_model.is_match(&existing) {
                        p.text.replace("model ProcessedEvent ", "model RetrysafeProcessedEvent ")
                    } else {
                        p.text
                    };
                    let sep = if existing.ends_with('\n') { "\n" } else { "\n\n" };
                    writes.push((p.path, format!("{existing}{sep}{text}")));
                }
            }
            Ok(existing) if existing == p.text || (!opts.force && already_set_up(&p.kind, &existing)) => {
                outcome.unchanged.push(p.path)
            }
            Ok(_) if opts.force => writes.push((p.path, p.text)),
            Ok(_) => conflicts.push(p.path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => writes.push((p.path, p.text)),
            Err(e) => return Err(format!("{}: cannot read: {e}", p.path.display())),
        }
    }
    if !conflicts.is_empty() {
        let names: Vec<String> = conflicts.iter().map(|p| display(&opts.dir, p)).collect();
        return Err(format!(
            "{} already exist{} with other content; nothing was written (use --force to overwrite)",
            names.join(", "),
            if names.len() == 1 { "s" } else { "" }
        ));
    }
    for (path, text) in writes {
        write_atomic(&path, &text).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        outcome.written.push(path);
    }
    // Paths as the user sees them: relative to the package.
    for p in outcome.written.iter_mut().chain(outcome.unchanged.iter_mut()) {
        *p = PathBuf::from(display(&opts.dir, p));
    }
    let cmd = &opts.command;
    outcome.next.push(format!("{cmd} check"));
    if guard_spec.is_some() {
        outcome.next.push(format!("{cmd} fix          # the diff; then `{cmd} fix --write`"));
    }
    Ok(outcome)
}

pub fn display(base: &Path, path: &Path) -> String {
    path.strip_prefix(base).unwrap_or(path).to_string_lossy().replace('\\', "/")
}

/// The `@/`-style alias of tsconfig/jsconfig `paths` (`"@/*": ["./src/*"]`) decides where
/// the module goes: `<target>/lib/guard.ts`, imported as `@/lib/guard`.
fn guard_place(dir: &Path, typescript: bool) -> Result<GuardPlace, String> {
    let ext = if typescript { "ts" } else { "js" };
    for name in ["tsconfig.json", "jsconfig.json"] {
        let path = dir.join(name);
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let json: Value = serde_json::from_str(&jsonc_to_json(&text))
            .map_err(|e| format!("{}: invalid JSON: {e}", path.display()))?;
        let options = &json["compilerOptions"];
        let base = dir.join(options["baseUrl"].as_str().unwrap_or("."));
        let Some(paths) = options["paths"].as_object() else { continue };
        let mut aliases: Vec<(&String, &str)> = paths
            .iter()
            .filter_map(|(pattern, targets)| Some((pattern, targets.as_array()?.first()?.as_str()?)))
            .filter(|(pattern, target)| pattern.ends_with("/*") && target.ends_with("/*"))
            .collect();
        // `@/` is the convention most templates use; any other whole-tree alias will do.
        aliases.sort_by_key(|(pattern, _)| (pattern.as_str() != "@/*", pattern.len()));
        if let Some((pattern, target)) = aliases.first() {
            let root = base.join(target.trim_end_matches('*'));
            let root = normalize(&root);
            return Ok(GuardPlace {
                file: root.join("lib").join(format!("guard.{ext}")),
                specifier: Some(format!("{}lib/guard", pattern.trim_end_matches('*'))),
            });
        }
    }
    let src = if dir.join("src").is_dir() { dir.join("src") } else { dir.to_path_buf() };
    Ok(GuardPlace { file: src.join("lib").join(format!("guard.{ext}")), specifier: None })
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn config_text(dir: &Path, guard: Option<&str>) -> String {
    // The launcher package ships the schema; a `cargo install` user has the repository's copy.
    let schema = if dir.join("node_modules/retrysafe/retrysafe.schema.json").is_file() {
        "./node_modules/retrysafe/retrysafe.schema.json"
    } else {
        "https://raw.githubusercontent.com/retrysafe/retrysafe/main/retrysafe.schema.json"
    };
    let mut config = serde_json::Map::new();
    config.insert("$schema".into(), schema.into());
    if let Some(g) = guard {
        config.insert("guard".into(), g.into());
    }
    format!("{}\n", serde_json::to_string_pretty(&Value::Object(config)).unwrap_or_default())
}

/// An exported client the project already builds (`export const prisma = new PrismaClient()`),
/// so the guard shares its connection pool instead of opening a second one.
fn find_export(dir: &Path, constructor: &regex::Regex, exclude: &Path) -> Option<(PathBuf, String)> {
    let walker = ignore::WalkBuilder::new(dir)
        .max_depth(Some(5))
        .filter_entry(|e| !crate::workspace::is_skipped_dir_name(&e.file_name().to_string_lossy()))
        .build();
    let mut found: Vec<(PathBuf, String)> = walker
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
        .filter(|p| p != exclude && crate::source::Dialect::for_path(p).is_some() && crate::workspace::is_candidate(p))
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let name = constructor.captures(&text)?.get(1)?.as_str().to_string();
            Some((p, name))
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

fn import_path(from_file: &Path, to_file: &Path) -> String {
    let from_dir = from_file.parent().unwrap_or(Path::new(""));
    let from: Vec<_> = from_dir.components().collect();
    let target = to_file.with_extension("");
    let to: Vec<_> = target.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); from.len() - common];
    parts.extend(to[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    let joined = parts.join("/");
    if joined.starts_with("..") { joined } else { format!("./{joined}") }
}

fn guard_module(dir: &Path, file: &Path, detected: &Detected, esm: bool, notes: &mut Vec<String>) -> Option<String> {
    let import = |names: &str, module: &str| {
        if esm {
            format!("import {names} from \"{module}\";\n")
        } else {
            format!("const {names} = require(\"{module}\");\n")
        }
    };
    let existing = |pattern: &regex::Regex| {
        find_export(dir, pattern, file)
            .map(|(path, name)| (import(&format!("{{ {name} }}"), &import_path(file, &path)), name))
    };
    let (factory, client_import, client) = match (detected.database, detected.redis) {
        (Some(Database::Prisma), _) => {
            let (imp, name) = existing(crate::regex!(r"export\s+const\s+(\w+)\s*=\s*new\s+PrismaClient\b"))
                .unwrap_or_else(|| {
                    (
                        format!(
                            "{}// No exported PrismaClient was found: this one opens its own connection pool.\nconst prisma = new PrismaClient();\n",
                            import("{ PrismaClient }", "@prisma/client")
                        ),
                        "prisma".into(),
                    )
                });
            ("prismaGuard", imp, name)
        }
        (Some(Database::Drizzle), _) => match existing(crate::regex!(r"export\s+const\s+(\w+)\s*=\s*drizzle\s*\(")) {
            Some((imp, name)) => ("drizzleGuard", imp, name),
            None => {
                notes.push(
                    "Drizzle is a dependency but no `export const db = drizzle(...)` was found: the guard module was \
                     not written; create it with `export const guard = drizzleGuard(db)`"
                        .into(),
                );
                return None;
            }
        },
        (Some(Database::Pg), _) => {
            let (imp, name) = existing(crate::regex!(r"export\s+const\s+(\w+)\s*=\s*new\s+(?:pg\.)?Pool\b"))
                .unwrap_or_else(|| {
                    (
                        format!(
                            "{}// No exported pg Pool was found: this one reads DATABASE_URL.\nconst pool = new pg.Pool({{ connectionString: process.env.DATABASE_URL }});\n",
                            import("pg", "pg")
                        ),
                        "pool".into(),
                    )
                });
            ("postgresGuard", imp, name)
        }
        (Some(Database::Mysql2), _) => {
            let (imp, name) = existing(crate::regex!(r"export\s+const\s+(\w+)\s*=\s*(?:mysql\.)?createPool\s*\("))
                .unwrap_or_else(|| {
                    (
                        format!(
                            "{}// No exported mysql2 pool was found: this one reads DATABASE_URL.\nconst pool = mysql.createPool(process.env.DATABASE_URL!);\n",
                            import("mysql", "mysql2/promise")
                        ),
                        "pool".into(),
                    )
                });
            ("mysqlGuard", imp, name)
        }
        (_, Some(redis)) => {
            let pattern = match redis {
                Redis::Ioredis => crate::regex!(r"export\s+const\s+(\w+)\s*=\s*new\s+(?:IORedis|Redis)\b"),
                Redis::NodeRedis => crate::regex!(r"export\s+const\s+(\w+)\s*=\s*(?:await\s+)?createClient\s*\("),
            };
            match existing(pattern) {
                Some((imp, name)) => ("redisGuard", imp, name),
                None if redis == Redis::Ioredis => (
                    "redisGuard",
                    format!(
                        "{}// No exported Redis client was found: this one reads REDIS_URL.\nconst redis = new Redis(process.env.REDIS_URL ?? \"redis://127.0.0.1:6379\");\n",
                        import("Redis", "ioredis")
                    ),
                    "redis".into(),
                ),
                None => {
                    notes.push(
                        "redis is a dependency but no exported `createClient(...)` was found: the guard module was not \
                         written; create it with `export const guard = redisGuard(client)` on a connected client"
                            .into(),
                    );
                    return None;
                }
            }
        }
        (None, None) => {
            notes.push(
                "package.json depends on none of @prisma/client, drizzle-orm, pg, mysql2, ioredis, redis: the guard \
                 module was not written; see `@retrysafe/guard`'s README for the guards"
                    .into(),
            );
            return None;
        }
    };
    let guard_import = import(&format!("{{ {factory} }}"), "@retrysafe/guard");
    let why = if factory == "redisGuard" {
        "// Leases the event key in Redis while the handler runs, released if it fails."
    } else {
        "// Claims the event key and runs the handler's writes in the same transaction."
    };
    let export = if esm {
        format!("export const guard = {factory}({client});\n")
    } else {
        format!("const guard = {factory}({client});\nmodule.exports = {{ guard }};\n")
    };
    Some(format!("{guard_import}{client_import}\n{why}\n{export}"))
}

const PROCESSED_EVENTS_MODEL: &str =
    "// @retrysafe/guard: the claim table prismaGuard writes (its primary key makes the claim atomic).
model ProcessedEvent {
  key         String   @id
  processedAt DateTime @default(now()) @map(\"processed_at\") @db.Timestamptz(6)

  @@map(\"processed_events\")
}
";

const POSTGRES_TABLE: &str = include_str!("../guard/sql/processed_events.sql");

const MYSQL_TABLE: &str =
    "-- @retrysafe/guard: the claim table. The primary key is what makes the claim atomic: keep it.
-- VARBINARY: the default collations ignore case and trailing spaces, which would merge keys.
CREATE TABLE IF NOT EXISTS processed_events (
  `key`        VARBINARY(512) NOT NULL PRIMARY KEY,
  processed_at TIMESTAMP(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  fingerprint  CHAR(64) CHARACTER SET ascii NULL
) ENGINE = InnoDB;
";

fn claim_table(
    dir: &Path,
    manifest: &Value,
    detected: &Detected,
    notes: &mut Vec<String>,
) -> Result<Option<Planned>, String> {
    let sql = |text: &str, notes: &mut Vec<String>| {
        let folder = ["migrations", "db/migrations", "sql"].iter().map(|d| dir.join(d)).find(|d| d.is_dir());
        let path = folder.unwrap_or_else(|| dir.join("sql")).join("retrysafe_processed_events.sql");
        notes.push(format!("apply {} with your migration tool", display(dir, &path)));
        Planned { path, text: text.to_string(), kind: Kind::Exact }
    };
    Ok(match detected.database {
        Some(Database::Prisma) => {
            let schema = manifest["prisma"]["schema"]
                .as_str()
                .map(|s| dir.join(s))
                .unwrap_or_else(|| dir.join("prisma").join("schema.prisma"));
            if schema.is_dir() {
                // A multi-file schema folder: the model goes in a file of its own.
                Some(Planned {
                    path: schema.join("retrysafe.prisma"),
                    text: PROCESSED_EVENTS_MODEL.into(),
                    kind: Kind::Exact,
                })
            } else if schema.is_file() {
                notes.push("then create the table: `npx prisma migrate dev --name retrysafe_processed_events`".into());
                Some(Planned { path: schema, text: PROCESSED_EVENTS_MODEL.into(), kind: Kind::Append })
            } else {
                notes.push(format!("{}: not found; the ProcessedEvent model was not added", display(dir, &schema)));
                None
            }
        }
        Some(Database::Drizzle | Database::Pg) => Some(sql(POSTGRES_TABLE, notes)),
        Some(Database::Mysql2) => Some(sql(MYSQL_TABLE, notes)),
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_orm_wins_over_its_driver() {
        let m = serde_json::json!({ "dependencies": { "pg": "8", "drizzle-orm": "0.3" }, "devDependencies": { "ioredis": "5" } });
        let d = detect(&m);
        assert_eq!(d.database, Some(Database::Drizzle));
        assert_eq!(d.redis, Some(Redis::Ioredis));
    }

    #[test]
    fn import_paths_are_relative_to_the_guard_module() {
        assert_eq!(import_path(Path::new("/p/src/lib/guard.ts"), Path::new("/p/src/lib/clients.ts")), "./clients");
        assert_eq!(import_path(Path::new("/p/src/lib/guard.ts"), Path::new("/p/src/db/index.ts")), "../db/index");
    }
}
