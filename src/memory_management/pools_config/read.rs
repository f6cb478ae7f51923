//! Reading a `[memory]` table into typed values, naming the entry and field of each error.

use super::memory_size::{size_from_float, size_from_integer, size_from_str};
use super::*;

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// Reads the memory configuration from the text of a whole TOML file.
///
/// Only the `[memory]` table is read; `[submit]` belongs to the submit policy's reader
/// and is left alone, and any other top-level table or key is refused
/// ([`PoolConfigError::UnknownTable`]). A file without `[memory]`, or a `[memory]` without
/// `pools`,
/// gives `pools: None`. Values are checked for shape only; [`MemoryPoolsConfig::resolve`] checks
/// them against a device.
///
/// # Errors
///
/// - [`PoolConfigError::Toml`]: the text is not TOML, or a value has the wrong type.
/// - [`PoolConfigError::UnknownTable`]: a top-level table or key other than `[memory]` and
///   `[submit]` (a misspelled `[memroy]` names `[memory]`).
/// - [`PoolConfigError::UnknownField`]: a key `[memory]` or an entry does not have.
/// - [`PoolConfigError::UnknownPreset`]: `pools` is a string that names no preset.
/// - [`PoolConfigError::UnknownType`], [`PoolConfigError::MissingField`]: an entry's
///   `type` is unknown or a required field is missing.
/// - [`PoolConfigError::BadSize`]: a size that does not parse or does not fit in `u64`.
pub fn parse_memory_config(toml_text: &str) -> Result<MemoryConfig, PoolConfigError> {
    let file: Table = toml::from_str(toml_text).map_err(|error| PoolConfigError::Toml {
        message: error.to_string(),
    })?;
    check_file_tables(&file)?;
    match file.get("memory") {
        None => Ok(MemoryConfig::default()),
        Some(Value::Table(memory)) => memory_config_from_table(memory),
        Some(other) => Err(PoolConfigError::Toml {
            message: format!(
                "`memory` must be a table ([memory]), found {}",
                other.type_str()
            ),
        }),
    }
}

/// Refuses the first top-level table or key of a configuration file (in key order) that
/// the file does not have (see [`FILE_TABLES`]), naming the known table it is close to:
/// one whose name it nearly spells (case aside, at most two letters changed, or one name
/// inside the other), or the table whose key it is.
///
/// The `[submit]` table's keys are checked here too, so the memory configuration and the
/// submit policy refuse a misspelled one alike.
///
/// # Errors
/// [`PoolConfigError::UnknownTable`]; [`PoolConfigError::UnknownField`] for a key
/// `[submit]` does not have.
pub(crate) fn check_file_tables(file: &Table) -> Result<(), PoolConfigError> {
    let known = |key: &str| FILE_TABLES.iter().any(|(table, _)| *table == key);
    let Some(found) = file.keys().find(|key| !known(key)) else {
        if let Some(Value::Table(submit)) = file.get("submit") {
            reject_unknown_keys(submit, Place::Table("[submit]"), SUBMIT_FIELDS)?;
        }
        return Ok(());
    };
    let owner = FILE_TABLES
        .iter()
        .find(|(_, keys)| keys.contains(&found.as_str()))
        .map(|(table, _)| *table);
    let misplaced_key = owner.is_some() && !file[found].is_table();
    let nearest = if misplaced_key {
        owner
    } else {
        FILE_TABLES
            .iter()
            .map(|(table, _)| *table)
            .find(|table| nearly_spells(found, table))
    };
    Err(PoolConfigError::UnknownTable {
        found: found.clone(),
        nearest,
        misplaced_key,
    })
}

/// Whether `found` nearly spells `known`: equal but for case, within two edits of it,
/// or one of them inside the other (the shorter at least three letters long).
fn nearly_spells(found: &str, known: &str) -> bool {
    let found = found.to_lowercase();
    let (shorter, longer) = if found.len() <= known.len() {
        (found.as_str(), known)
    } else {
        (known, found.as_str())
    };
    (shorter.len() >= 3 && longer.contains(shorter)) || edit_distance(&found, known) <= 2
}

/// The edit distance (insertions, deletions, substitutions) between two short names.
///
/// # Complexity
/// O(a · b) for names of a and b characters; table names are a few letters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Reads the memory configuration of the process, if there is one.
///
/// Reads the file named by the `WGPU_MEMORY_CONFIG` environment variable when it is set
/// and not empty (an empty value counts as unset: it names no file), else
/// `wgpu-memory.toml` in the current directory when that exists.
///
/// # Errors
///
/// [`PoolConfigError::Io`] when `WGPU_MEMORY_CONFIG` names a file that cannot be read
/// (a missing file included), or `wgpu-memory.toml` exists but cannot be read; any error
/// of [`parse_memory_config`] for the file's text. Returns `Ok(None)` when the variable is
/// unset (or empty) and the default file does not exist. On the web (wasm32), which has
/// no file system, the default file never exists.
pub fn load_memory_config() -> Result<Option<MemoryConfig>, PoolConfigError> {
    load_from_sources(
        std::env::var_os(CONFIG_PATH_VAR),
        Path::new(DEFAULT_CONFIG_FILE),
    )
}

/// Reads the memory configuration from the file at `path`.
///
/// # Errors
///
/// [`PoolConfigError::Io`] when the file cannot be read (a missing file included); any
/// error of [`parse_memory_config`] for its text.
pub fn load_memory_config_from(path: &Path) -> Result<MemoryConfig, PoolConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| io_error(path, &error))?;
    parse_memory_config(&text)
}

/// [`load_memory_config`] with its sources passed in: the environment variable's value,
/// and the default file, which may be absent.
pub(super) fn load_from_sources(
    explicit: Option<OsString>,
    default_file: &Path,
) -> Result<Option<MemoryConfig>, PoolConfigError> {
    // An empty value names no file (issue 12, item 7: it tried to open "").
    if let Some(path) = explicit.filter(|path| !path.is_empty()) {
        return load_memory_config_from(Path::new(&path)).map(Some);
    }
    match std::fs::read_to_string(default_file) {
        Ok(text) => parse_memory_config(&text).map(Some),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        // The web has no file system: std answers every file operation `Unsupported`.
        #[cfg(target_arch = "wasm32")]
        Err(error) if error.kind() == ErrorKind::Unsupported => Ok(None),
        Err(error) => Err(io_error(default_file, &error)),
    }
}

pub(super) fn io_error(path: &Path, error: &std::io::Error) -> PoolConfigError {
    PoolConfigError::Io {
        path: PathBuf::from(path),
        message: error.to_string(),
    }
}

/// Builds a [`MemoryConfig`] from the contents of the `[memory]` table.
pub(super) fn memory_config_from_table(memory: &Table) -> Result<MemoryConfig, PoolConfigError> {
    reject_unknown_keys(memory, Place::Table("[memory]"), MEMORY_FIELDS)?;
    let pools = memory.get("pools").map(pools_from_value).transpose()?;
    let history = memory.get("history").map(history_from_value).transpose()?;
    let oom_snapshot = path_from_value(memory.get("oom_snapshot"), "oom_snapshot")?;
    let records = path_from_value(memory.get("records"), "records")?;
    let budget = memory.get("budget").map(budget_from_value).transpose()?;
    Ok(MemoryConfig {
        pools,
        history,
        oom_snapshot,
        records,
        budget,
    })
}

/// Reads `memory.budget`: a size (an integer of bytes or a string such as `"8 GiB"`),
/// not zero.
fn budget_from_value(value: &Value) -> Result<MemorySize, PoolConfigError> {
    const FIELD: &str = "budget";
    let size = match value {
        Value::Integer(bytes) => size_from_integer(None, FIELD, *bytes)?,
        Value::String(text) => size_from_str(None, FIELD, text)?,
        Value::Float(value) => return Err(size_from_float(None, FIELD, *value)),
        other => {
            return Err(PoolConfigError::BadSize {
                entry: None,
                field: FIELD,
                value: other.to_string(),
                reason: format!("a size is an integer or a string, not {}", other.type_str()),
            });
        }
    };
    if size.0 == 0 {
        return Err(PoolConfigError::BadSize {
            entry: None,
            field: FIELD,
            value: value.to_string(),
            reason: "a budget of 0 bytes would refuse every page".to_string(),
        });
    }
    Ok(size)
}

/// Reads `memory.<key>`, a path (a string), when present.
fn path_from_value(value: Option<&Value>, key: &str) -> Result<Option<PathBuf>, PoolConfigError> {
    match value {
        None => Ok(None),
        Some(Value::String(path)) => Ok(Some(PathBuf::from(path))),
        Some(other) => Err(PoolConfigError::Toml {
            message: format!(
                "`memory.{key}` must be a path (a string), found {}",
                other.type_str()
            ),
        }),
    }
}

/// Reads `memory.history`: a number of events (0 or more), or a table of `events` and
/// `backtraces`.
fn history_from_value(value: &Value) -> Result<HistoryConfig, PoolConfigError> {
    match value {
        Value::Table(table) => {
            reject_unknown_keys(table, Place::Table("[memory]"), HISTORY_FIELDS).map_err(|error| match error {
                PoolConfigError::UnknownField { field, .. } => PoolConfigError::Toml {
                    message: format!(
                        "`memory.history` has no key `{field}` (it takes `events` and `backtraces`)"
                    ),
                },
                other => other,
            })?;
            let events = match table.get("events") {
                Some(events) => history_events(events)?,
                None => {
                    return Err(PoolConfigError::Toml {
                        message: "`memory.history` as a table needs `events = N`".to_string(),
                    });
                }
            };
            let backtraces = match table.get("backtraces") {
                None => false,
                Some(Value::Boolean(on)) => *on,
                Some(other) => {
                    return Err(PoolConfigError::Toml {
                        message: format!(
                            "`memory.history.backtraces` must be true or false, found {}",
                            other.type_str()
                        ),
                    });
                }
            };
            Ok(HistoryConfig { events, backtraces })
        }
        other => Ok(HistoryConfig {
            events: history_events(other)?,
            backtraces: false,
        }),
    }
}

/// Reads a number of history events, 0 or more.
fn history_events(value: &Value) -> Result<usize, PoolConfigError> {
    match value {
        Value::Integer(events) => usize::try_from(*events).map_err(|_| PoolConfigError::Toml {
            message: format!("`memory.history` must be 0 or more events, found {events}"),
        }),
        other => Err(PoolConfigError::Toml {
            message: format!(
                "`memory.history` must be a number of events (an integer), found {}",
                other.type_str()
            ),
        }),
    }
}

/// Builds the value of `memory.pools`.
pub(super) fn pools_from_value(value: &Value) -> Result<MemoryPoolsConfig, PoolConfigError> {
    match value {
        Value::String(name) => preset_from_str(name).map(MemoryPoolsConfig::Preset),
        Value::Array(entries) => entries
            .iter()
            .enumerate()
            .map(|(entry, value)| entry_from_value(entry, value))
            .collect::<Result<Vec<_>, _>>()
            .map(MemoryPoolsConfig::Explicit),
        other => Err(PoolConfigError::Toml {
            message: format!(
                "`memory.pools` must be a preset string (\"adaptive\" or \"exclusive-pages\") \
                 or a list of [[memory.pools]] tables, found {}",
                other.type_str()
            ),
        }),
    }
}

pub(super) fn preset_from_str(name: &str) -> Result<MemoryPoolsPreset, PoolConfigError> {
    match name {
        "adaptive" => Ok(MemoryPoolsPreset::Adaptive),
        "exclusive-pages" => Ok(MemoryPoolsPreset::ExclusivePages),
        _ => Err(PoolConfigError::UnknownPreset {
            found: name.to_owned(),
        }),
    }
}

/// Builds one entry; `entry` is its position in the list. Checks run in this order: the
/// entry is a table, `type` is present and known, no unknown key, required fields present,
/// then each value.
pub(super) fn entry_from_value(
    entry: usize,
    value: &Value,
) -> Result<MemoryPoolConfig, PoolConfigError> {
    let Value::Table(table) = value else {
        return Err(PoolConfigError::Toml {
            message: format!(
                "memory.pools entry {entry} must be a table with a `type` key, found {}",
                value.type_str()
            ),
        });
    };
    let fields = Fields { entry, table };
    let kind = match table.get("type") {
        None => {
            return Err(PoolConfigError::MissingField {
                entry,
                field: "type",
            });
        }
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => {
            return Err(fields.wrong_type("type", "a string", other));
        }
    };
    match kind {
        "sliced" => {
            reject_unknown_keys(table, Place::Entry(entry), SLICED_FIELDS)?;
            Ok(MemoryPoolConfig::Sliced {
                page_size: fields.required_size("page_size")?,
                max_slice_size: fields.size("max_slice_size")?,
                max_pool_size: fields.size("max_pool_size")?,
                dealloc_period: fields.count("dealloc_period")?,
            })
        }
        "exclusive" => {
            reject_unknown_keys(table, Place::Entry(entry), EXCLUSIVE_FIELDS)?;
            Ok(MemoryPoolConfig::Exclusive {
                max_alloc_size: fields.required_size("max_alloc_size")?,
                dealloc_period: fields.count("dealloc_period")?,
            })
        }
        "direct" => {
            reject_unknown_keys(table, Place::Entry(entry), DIRECT_FIELDS)?;
            Ok(MemoryPoolConfig::Direct {
                reclaim_at: fields.size("reclaim_at")?,
            })
        }
        _ => Err(PoolConfigError::UnknownType {
            entry,
            found: kind.to_owned(),
        }),
    }
}

/// Where a key was read: a table of the file, or an entry of `memory.pools`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Place {
    /// A table, as errors name it (`"[memory]"`, `"[submit]"`).
    Table(&'static str),
    /// An entry of `memory.pools` (0-based).
    Entry(usize),
}

/// Refuses the first key (in key order) not in `allowed`, naming the allowed key it nearly
/// spells, if one.
pub(super) fn reject_unknown_keys(
    table: &Table,
    place: Place,
    allowed: &'static [&'static str],
) -> Result<(), PoolConfigError> {
    let Some(field) = table.keys().find(|key| !allowed.contains(&key.as_str())) else {
        return Ok(());
    };
    let (entry, table) = match place {
        Place::Table(table) => (None, table),
        Place::Entry(entry) => (Some(entry), "memory.pools"),
    };
    Err(PoolConfigError::UnknownField {
        entry,
        table,
        field: field.clone(),
        nearest: allowed
            .iter()
            .copied()
            .find(|known| nearly_spells(field, known)),
        allowed,
    })
}

/// The fields of one entry, read with errors that name the entry.
struct Fields<'a> {
    entry: usize,
    table: &'a Table,
}

impl Fields<'_> {
    fn required_size(&self, field: &'static str) -> Result<MemorySize, PoolConfigError> {
        self.size(field)?.ok_or(PoolConfigError::MissingField {
            entry: self.entry,
            field,
        })
    }

    fn size(&self, field: &'static str) -> Result<Option<MemorySize>, PoolConfigError> {
        let entry = Some(self.entry);
        match self.table.get(field) {
            None => Ok(None),
            Some(Value::Integer(bytes)) => size_from_integer(entry, field, *bytes).map(Some),
            Some(Value::String(text)) => size_from_str(entry, field, text).map(Some),
            Some(Value::Float(value)) => Err(size_from_float(entry, field, *value)),
            Some(other) => Err(self.wrong_type(
                field,
                "a size (an integer of bytes or a string such as \"64 MiB\")",
                other,
            )),
        }
    }

    /// A count of reservations (`dealloc_period`).
    fn count(&self, field: &'static str) -> Result<Option<u64>, PoolConfigError> {
        const EXPECTED: &str = "a non-negative integer (a count of reservations)";
        match self.table.get(field) {
            None => Ok(None),
            Some(Value::Integer(count)) => {
                u64::try_from(*count)
                    .map(Some)
                    .map_err(|_| PoolConfigError::Toml {
                        message: format!(
                            "memory.pools entry {}: `{field}` must be {EXPECTED}, found {count}",
                            self.entry
                        ),
                    })
            }
            Some(other) => Err(self.wrong_type(field, EXPECTED, other)),
        }
    }

    fn wrong_type(&self, field: &str, expected: &str, found: &Value) -> PoolConfigError {
        PoolConfigError::Toml {
            message: format!(
                "memory.pools entry {}: `{field}` must be {expected}, found {} {found}",
                self.entry,
                found.type_str()
            ),
        }
    }
}

impl<'de> Deserialize<'de> for MemoryConfig {
    /// Reads the contents of a `[memory]` table, with the checks of
    /// [`parse_memory_config`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let table = Table::deserialize(deserializer)?;
        memory_config_from_table(&table).map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for MemoryPoolsConfig {
    /// Reads a value of `memory.pools`, with the checks of [`parse_memory_config`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        pools_from_value(&value).map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for MemoryPoolsPreset {
    /// Reads a preset name: `"adaptive"` or `"exclusive-pages"`.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        preset_from_str(&name).map_err(de::Error::custom)
    }
}
