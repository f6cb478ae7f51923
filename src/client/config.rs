//! The `[submit]` table of `wgpu-memory.toml`: when recorded work is submitted.

use crate::memory_management::{MemorySize, PoolConfigError, check_file_tables};
use crate::server::SubmitPolicy;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The `[submit]` table as written; every key is optional.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitTable {
    max_dispatches: Option<u32>,
    max_bytes: Option<MemorySize>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct File {
    submit: Option<SubmitTable>,
}

/// The submit policy of the process's configuration file (the file named by
/// `WGPU_MEMORY_CONFIG` when it is set and not empty, else `wgpu-memory.toml` in the
/// working directory when it exists), keys missing from its `[submit]` table taking
/// [`SubmitPolicy::default`]'s values:
///
/// ```toml
/// [submit]
/// max_dispatches = 256    # launches recorded before a submit is due
/// max_bytes = "64 MiB"    # bytes copied (uploads, reads) before a submit is due
/// ```
///
/// # Errors
/// [`PoolConfigError::Io`] when the named file cannot be read;
/// [`PoolConfigError::Toml`] when the file is not TOML, or the `[submit]` table has an
/// unknown key or a value of the wrong type (the message names it);
/// [`PoolConfigError::UnknownTable`] for a top-level table other than `[memory]` and
/// `[submit]` (a misspelled `[sumbit]` names `[submit]`).
pub fn load_submit_policy() -> Result<SubmitPolicy, PoolConfigError> {
    let Some(path) = config_path() else {
        return Ok(SubmitPolicy::default());
    };
    let text = std::fs::read_to_string(&path).map_err(|error| PoolConfigError::Io {
        path: path.clone(),
        message: error.to_string(),
    })?;
    parse_submit_policy(&text)
}

/// [`load_submit_policy`] on a file's text.
///
/// # Errors
/// As [`load_submit_policy`], but for [`PoolConfigError::Io`].
pub fn parse_submit_policy(text: &str) -> Result<SubmitPolicy, PoolConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|error| PoolConfigError::Toml {
        message: error.to_string(),
    })?;
    check_file_tables(&table)?;
    let file: File = table.try_into().map_err(|error| PoolConfigError::Toml {
        message: format!("[submit]: {error}"),
    })?;
    let table = file.submit.unwrap_or_default();
    let default = SubmitPolicy::default();
    Ok(SubmitPolicy {
        max_dispatches: table.max_dispatches.unwrap_or(default.max_dispatches),
        max_bytes: table
            .max_bytes
            .map_or(default.max_bytes, |size| size.bytes()),
    })
}

/// The process's configuration file, if it has one: the file named by
/// `WGPU_MEMORY_CONFIG` when it is set and not empty, else `wgpu-memory.toml` in the
/// working directory when it exists.
pub(super) fn config_path() -> Option<PathBuf> {
    config_path_from(
        std::env::var_os("WGPU_MEMORY_CONFIG"),
        Path::new("wgpu-memory.toml"),
    )
}

/// [`config_path`] with its sources passed in: the variable's value and the default file.
fn config_path_from(explicit: Option<OsString>, default: &Path) -> Option<PathBuf> {
    match explicit {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => default.exists().then(|| default.to_path_buf()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_keys_take_the_defaults() {
        let policy = parse_submit_policy("[submit]\nmax_dispatches = 8\n").unwrap();
        assert_eq!(policy.max_dispatches, 8);
        assert_eq!(policy.max_bytes, SubmitPolicy::default().max_bytes);
        assert_eq!(parse_submit_policy("").unwrap(), SubmitPolicy::default());
    }

    #[test]
    fn sizes_take_units() {
        let policy = parse_submit_policy("[submit]\nmax_bytes = \"2 MiB\"\n").unwrap();
        assert_eq!(policy.max_bytes, 2 << 20);
    }

    #[test]
    fn the_config_file_is_the_variables_else_the_default_when_it_exists() {
        let present = std::env::temp_dir().join(format!(
            "wgpu-memory-config-path-{}.toml",
            std::process::id()
        ));
        std::fs::write(&present, "").unwrap();
        let absent = Path::new("/nonexistent/wgpu-memory.toml");
        let named = OsString::from("/elsewhere/mine.toml");
        assert_eq!(
            config_path_from(Some(named.clone()), absent),
            Some(PathBuf::from(&named))
        );
        assert_eq!(config_path_from(None, absent), None);
        assert_eq!(config_path_from(Some(OsString::new()), absent), None);
        assert_eq!(config_path_from(None, &present), Some(present.clone()));
        std::fs::remove_file(&present).unwrap();
    }

    #[test]
    fn an_unknown_key_is_refused_by_name() {
        let error = parse_submit_policy("[submit]\nmax_dispatch = 8\n").unwrap_err();
        assert!(error.to_string().contains("max_dispatch"), "{error}");
    }
}
