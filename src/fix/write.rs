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
