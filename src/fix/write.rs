//! Atomic writes: a temporary file in the same directory, the original's permissions, then a
//! rename. An interrupted write leaves the old file intact, never a truncated one.

use std::io::Write;
use std::path::Path;

pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let permissions = std::fs::metadata(path).ok().map(|m| m.permissions());
    // A new migration can live in a directory of its own that does not exist yet.
    if permissions.is_none() {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = tempfile::Builder::new().prefix(".retrysafe-").suffix(".tmp").tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    if let Some(p) = permissions {
        std::fs::set_permissions(tmp.path(), p)?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// How old a temporary file of ours must be before it counts as abandoned: a live write
/// holds one for milliseconds.
pub const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes `.retrysafe-*.tmp` files older than [`STALE_TEMP_AGE`] from the directories that
/// hold `files`, and returns them.
pub fn remove_stale_temp_files(files: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    dirs.sort();
    dirs.dedup();
    let mut removed = Vec::new();
    for dir in dirs {
        let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with(".retrysafe-") && name.ends_with(".tmp")) {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TEMP_AGE);
            if old && entry.file_type().is_ok_and(|t| t.is_file()) && std::fs::remove_file(entry.path()).is_ok() {
                removed.push(entry.path());
            }
        }
    }
    removed
}
