//! The `memory.pools` configuration: its TOML form, how it is read, and how it becomes a
//! layout for one device.
//!
//! Two steps, each with its own errors ([`PoolConfigError`]):
//!
//! 1. **Read** ([`parse_memory_config`], [`load_memory_config`]): the TOML text becomes a
//!    [`MemoryConfig`]. This step checks the shape only: known keys, the right value types,
//!    sizes that parse. The text is read into a `toml::Table` first and walked by hand, so
//!    each error names the entry (0-based) and the field it is about.
//! 2. **Resolve** ([`MemoryPoolsConfig::resolve`]): the values are checked against the
//!    device's alignment and the pool limits, rounded, and turned into a [`PoolLayout`].
//!
//! ```toml
//! [memory]
//! # Either a preset ...
//! # pools = "adaptive"            # or "exclusive-pages"
//! # ... or an ordered list; a reservation goes to the first pool that accepts its size.
//! [[memory.pools]]
//! type = "exclusive"
//! max_alloc_size = "8 KiB"
//! dealloc_period = 10000
//!
//! [[memory.pools]]
//! type = "sliced"
//! page_size = "64 MiB"
//! max_slice_size = "16 MiB"     # optional, default: the page size
//! max_pool_size = "4 GiB"       # optional, default: no cap
//!
//! [[memory.pools]]
//! type = "direct"
//! reclaim_at = "1 GiB"          # optional
//! ```
//!
//! Sizes are bytes: an integer, or a string `<number>[ws]<unit>` whose units are all
//! 1024-based (see [`MemorySize::parse`]).

use std::ffi::OsString;
use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use toml::{Table, Value};

use super::config::{MemoryPoolOptions, PoolType};
use super::config_error::PoolConfigError;
use super::{EXCLUSIVE_MEMORY_ONLY, MemoryConfiguration, MemoryDeviceProperties};

/// The most entries a layout may hold: a pool's position is a `u8`, and its last value
/// (255) is the persistent pool's.
const MAX_POOLS: usize = 254;

/// The most pages one pool may hold: a page's position is a `u16`.
const MAX_PAGES_PER_POOL: u64 = u16::MAX as u64;

/// The environment variable naming the configuration file [`load_memory_config`] reads.
const CONFIG_PATH_VAR: &str = "WGPU_MEMORY_CONFIG";

/// The file [`load_memory_config`] reads from the current directory when
/// [`CONFIG_PATH_VAR`] is not set.
const DEFAULT_CONFIG_FILE: &str = "wgpu-memory.toml";

/// The keys of the `[memory]` table.
const MEMORY_FIELDS: &[&str] = &["pools"];
/// The keys of a `type = "sliced"` entry.
const SLICED_FIELDS: &[&str] = &[
    "type",
    "page_size",
    "max_slice_size",
    "max_pool_size",
    "dealloc_period",
];
/// The keys of a `type = "exclusive"` entry.
const EXCLUSIVE_FIELDS: &[&str] = &["type", "max_alloc_size", "dealloc_period"];
/// The keys of a `type = "direct"` entry.
const DIRECT_FIELDS: &[&str] = &["type", "reclaim_at"];

// ---------------------------------------------------------------------------------------
// MemorySize
// ---------------------------------------------------------------------------------------

/// A size in bytes, as written in the configuration.
///
/// Read from a TOML integer (`>= 0`) or a string `<number>[ws]<unit>` (see
/// [`MemorySize::parse`]); written back as a plain integer of bytes, so a value read and
/// written again reads back the same. (A size past `i64::MAX`, which a TOML integer
/// cannot hold, is written as a string of its bytes instead.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemorySize(pub u64);

/// Multipliers of the accepted units, lower-case; all binary (1024-based).
const UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("k", 1 << 10),
    ("kb", 1 << 10),
    ("kib", 1 << 10),
    ("m", 1 << 20),
    ("mb", 1 << 20),
    ("mib", 1 << 20),
    ("g", 1 << 30),
    ("gb", 1 << 30),
    ("gib", 1 << 30),
    ("t", 1 << 40),
    ("tb", 1 << 40),
    ("tib", 1 << 40),
];

impl MemorySize {
    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// Parses a size string into bytes.
    ///
    /// The grammar is `<number>[whitespace]<unit>`, surrounded by optional whitespace:
    ///
    /// - `<number>`: decimal digits, optionally with one `.` and a fraction (`"1.5"`);
    ///   `_` may separate digits (`"1_048_576"`). A fraction of a byte is truncated.
    /// - `<unit>`: none or `b` (bytes), `k`/`kb`/`kib` (2^10), `m`/`mb`/`mib` (2^20),
    ///   `g`/`gb`/`gib` (2^30), `t`/`tb`/`tib` (2^40), in any case. **All units are
    ///   binary**: `"1 MB"` is 1 048 576 bytes.
    ///
    /// # Errors
    ///
    /// A reason, for the caller to put in [`PoolConfigError::BadSize`], when the string is
    /// empty, negative, not a number (`"nan"`, `"abc"`), has a misplaced `_` or a second
    /// `.`, names an unknown unit (`"5XB"`), or comes to more than `u64::MAX` bytes.
    ///
    /// # Panics
    ///
    /// Never.
    pub fn parse(text: &str) -> Result<u64, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the size is empty".to_owned());
        }
        if text.starts_with('-') {
            return Err("a size cannot be negative".to_owned());
        }
        let number_len = text
            .find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.'))
            .unwrap_or(text.len());
        let (number, rest) = text.split_at(number_len);
        let unit = rest.trim_start().to_ascii_lowercase();
        if !number.bytes().any(|b| b.is_ascii_digit()) {
            return Err(format!(
                "{text:?} does not start with a number (expected digits, then an optional unit)"
            ));
        }
        let multiplier = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|&(_, multiplier)| multiplier)
            .ok_or_else(|| {
                format!(
                    "unknown unit {:?} (B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB)",
                    rest.trim_start()
                )
            })?;
        check_underscores(number)?;
        let digits: String = number.chars().filter(|&c| c != '_').collect();
        let (whole, fraction) = match digits.split_once('.') {
            Some((whole, fraction)) => (whole, fraction),
            None => (digits.as_str(), ""),
        };
        if fraction.contains('.') {
            return Err(format!("{number:?} has more than one decimal point"));
        }
        let too_large = || format!("{text:?} is more than {} bytes (u64::MAX)", u64::MAX);
        let whole = if whole.is_empty() {
            0
        } else {
            whole.parse::<u64>().map_err(|_| too_large())?
        };
        // floor(0.fraction * multiplier), exact: Horner's rule from the last digit, where
        // each step's floor division loses nothing that a later step would need, and the
        // running value stays below `multiplier`.
        let mut fraction_bytes: u64 = 0;
        for digit in fraction.bytes().rev() {
            fraction_bytes = (u64::from(digit - b'0') * multiplier + fraction_bytes) / 10;
        }
        whole
            .checked_mul(multiplier)
            .and_then(|bytes| bytes.checked_add(fraction_bytes))
            .ok_or_else(too_large)
    }
}

/// Refuses a `_` that does not sit between two digits.
fn check_underscores(number: &str) -> Result<(), String> {
    let bytes = number.as_bytes();
    for (index, &byte) in bytes.iter().enumerate() {
        if byte != b'_' {
            continue;
        }
        let before = index.checked_sub(1).and_then(|i| bytes.get(i));
        let after = bytes.get(index + 1);
        let between_digits =
            before.is_some_and(u8::is_ascii_digit) && after.is_some_and(u8::is_ascii_digit);
        if !between_digits {
            return Err(format!(
                "{number:?} has a `_` that is not between two digits"
            ));
        }
    }
    Ok(())
}

impl From<u64> for MemorySize {
    fn from(bytes: u64) -> Self {
        Self(bytes)
    }
}

impl From<MemorySize> for u64 {
    fn from(size: MemorySize) -> Self {
        size.0
    }
}

impl Serialize for MemorySize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if i64::try_from(self.0).is_ok() {
            serializer.serialize_u64(self.0)
        } else {
            // A TOML integer is an i64: larger sizes go out as a string of bytes, which
            // `MemorySize::parse` reads back to the same value.
            serializer.serialize_str(&self.0.to_string())
        }
    }
}

impl<'de> Deserialize<'de> for MemorySize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;

        impl Visitor<'_> for SizeVisitor {
            type Value = MemorySize;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a size: an integer of bytes or a string such as \"64 MiB\"")
            }

            fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<MemorySize, E> {
                Ok(MemorySize(bytes))
            }

            fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<MemorySize, E> {
                size_from_integer(None, "size", bytes).map_err(|error| E::custom(error.to_string()))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<MemorySize, E> {
                Err(E::custom(size_from_float(None, "size", value).to_string()))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<MemorySize, E> {
                size_from_str(None, "size", text).map_err(|error| E::custom(error.to_string()))
            }
        }

        deserializer.deserialize_any(SizeVisitor)
    }
}

/// A TOML integer as a size.
fn size_from_integer(
    entry: Option<usize>,
    field: &'static str,
    bytes: i64,
) -> Result<MemorySize, PoolConfigError> {
    u64::try_from(bytes)
        .map(MemorySize)
        .map_err(|_| PoolConfigError::BadSize {
            entry,
            field,
            value: bytes.to_string(),
            reason: "a size cannot be negative".to_owned(),
        })
}

/// A TOML float as a size: always refused, with the reason that fits it.
fn size_from_float(entry: Option<usize>, field: &'static str, value: f64) -> PoolConfigError {
    let reason = if value.is_nan() {
        "NaN is not a size"
    } else if value.is_sign_negative() {
        "a size cannot be negative"
    } else {
        "a bare number must be a whole number of bytes; write a fraction as a string with \
         a unit, such as \"1.5 GiB\""
    };
    PoolConfigError::BadSize {
        entry,
        field,
        value: value.to_string(),
        reason: reason.to_owned(),
    }
}

/// A TOML string as a size.
fn size_from_str(
    entry: Option<usize>,
    field: &'static str,
    text: &str,
) -> Result<MemorySize, PoolConfigError> {
    MemorySize::parse(text)
        .map(MemorySize)
        .map_err(|reason| PoolConfigError::BadSize {
            entry,
            field,
            value: format!("{text:?}"),
            reason,
        })
}

// ---------------------------------------------------------------------------------------
// The configuration values
// ---------------------------------------------------------------------------------------

/// The `[memory]` table of a configuration file.
///
/// Serializes (and deserializes) as the table's contents, `pools = ...`, so it can be a
/// `memory` field of a larger configuration; a whole file is this value under a `memory`
/// key. Any key other than `pools` is refused ([`PoolConfigError::UnknownField`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryConfig {
    /// The pools of the main memory, or `None` to keep the runtime's own default layout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pools: Option<MemoryPoolsConfig>,
}

/// The value of `memory.pools`: a preset, or the pools written out.
///
/// In TOML, a preset is a string (`pools = "adaptive"`), an explicit layout an array of
/// tables (`[[memory.pools]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum MemoryPoolsConfig {
    /// One of the built-in layouts, sized from the device's properties.
    Preset(MemoryPoolsPreset),
    /// The pools in order: a reservation goes to the first one that accepts its size.
    Explicit(Vec<MemoryPoolConfig>),
}

/// A built-in layout, named by a string in TOML.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryPoolsPreset {
    /// `"adaptive"`: [`MemoryConfiguration`]'s adaptive layout (pages shared between
    /// allocations). Refused on exclusive-memory-only builds
    /// ([`PoolConfigError::PresetUnavailable`]).
    Adaptive,
    /// `"exclusive-pages"`: one page per allocation, in size buckets
    /// ([`MemoryConfiguration::ExclusivePages`]).
    ExclusivePages,
}

impl MemoryPoolsPreset {
    /// The preset's TOML spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Adaptive => "adaptive",
            Self::ExclusivePages => "exclusive-pages",
        }
    }
}

/// One `[[memory.pools]]` entry, as written (sizes in bytes, not yet aligned).
///
/// The TOML `type` key picks the variant: `"sliced"`, `"exclusive"` or `"direct"`.
/// [`MemoryPoolsConfig::resolve`] checks and rounds the values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum MemoryPoolConfig {
    /// Pages of `page_size` bytes carved into slices ([`PoolType::SlicedPages`]).
    Sliced {
        /// Bytes of each page; must be non-zero; rounded up to the device alignment.
        page_size: MemorySize,
        /// The largest reservation the pool accepts, in bytes; must be non-zero and (once
        /// rounded up to the alignment) at most the page. Default: the aligned page size.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_slice_size: Option<MemorySize>,
        /// A cap on the bytes of all pages of the pool, kept as written (the pool uses
        /// whole pages below it); at least one page and at most 65535 pages. Default: no
        /// cap.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_pool_size: Option<MemorySize>,
        /// Accepted and kept in the layout, but sliced pools ignore it: they give pages
        /// back on explicit cleanup only.
        #[serde(skip_serializing_if = "Option::is_none")]
        dealloc_period: Option<u64>,
    },
    /// One page per reservation, reused by later reservations of a similar size
    /// ([`PoolType::ExclusivePages`]).
    Exclusive {
        /// The largest reservation the pool accepts, in bytes; rounded up to the device
        /// alignment. `0` makes a pool for zero-size reservations only.
        max_alloc_size: MemorySize,
        /// A free page idle for this many reservations is given back by the periodic
        /// cleanup. Default: only explicit cleanup gives pages back.
        #[serde(skip_serializing_if = "Option::is_none")]
        dealloc_period: Option<u64>,
    },
    /// One exactly sized page per reservation, reused by reservations of the same aligned
    /// size ([`PoolType::Direct`]).
    Direct {
        /// Reserved bytes above which free pages are given back before a new one is made,
        /// kept as written. Default: only explicit cleanup gives them back.
        #[serde(skip_serializing_if = "Option::is_none")]
        reclaim_at: Option<MemorySize>,
    },
}

/// A `memory.pools` configuration resolved for one device.
#[derive(Debug, Clone)]
pub enum PoolLayout {
    /// A built-in layout, to be built from the device's properties.
    Preset(MemoryConfiguration),
    /// The dynamic pools in order, sizes checked and aligned (bytes).
    Explicit(Vec<MemoryPoolOptions>),
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// Reads the memory configuration from the text of a whole TOML file.
///
/// Only the `[memory]` table is read; other tables belong to other readers and are left
/// alone. A file without `[memory]`, or a `[memory]` without `pools`, gives
/// `pools: None`. Values are checked for shape only; [`MemoryPoolsConfig::resolve`] checks
/// them against a device.
///
/// # Errors
///
/// - [`PoolConfigError::Toml`]: the text is not TOML, or a value has the wrong type.
/// - [`PoolConfigError::UnknownField`]: a key `[memory]` or an entry does not have.
/// - [`PoolConfigError::UnknownPreset`]: `pools` is a string that names no preset.
/// - [`PoolConfigError::UnknownType`], [`PoolConfigError::MissingField`]: an entry's
///   `type` is unknown or a required field is missing.
/// - [`PoolConfigError::BadSize`]: a size that does not parse or does not fit in `u64`.
pub fn parse_memory_config(toml_text: &str) -> Result<MemoryConfig, PoolConfigError> {
    let file: Table = toml::from_str(toml_text).map_err(|error| PoolConfigError::Toml {
        message: error.to_string(),
    })?;
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

/// Reads the memory configuration of the process, if there is one.
///
/// Reads the file named by the `WGPU_MEMORY_CONFIG` environment variable when it is set,
/// else `wgpu-memory.toml` in the current directory when that exists.
///
/// # Errors
///
/// [`PoolConfigError::Io`] when `WGPU_MEMORY_CONFIG` names a file that cannot be read
/// (a missing file included), or `wgpu-memory.toml` exists but cannot be read; any error
/// of [`parse_memory_config`] for the file's text. Returns `Ok(None)` when the variable is
/// unset and the default file does not exist.
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
fn load_from_sources(
    explicit: Option<OsString>,
    default_file: &Path,
) -> Result<Option<MemoryConfig>, PoolConfigError> {
    if let Some(path) = explicit {
        return load_memory_config_from(Path::new(&path)).map(Some);
    }
    match std::fs::read_to_string(default_file) {
        Ok(text) => parse_memory_config(&text).map(Some),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io_error(default_file, &error)),
    }
}

fn io_error(path: &Path, error: &std::io::Error) -> PoolConfigError {
    PoolConfigError::Io {
        path: PathBuf::from(path),
        message: error.to_string(),
    }
}

/// Builds a [`MemoryConfig`] from the contents of the `[memory]` table.
fn memory_config_from_table(memory: &Table) -> Result<MemoryConfig, PoolConfigError> {
    reject_unknown_keys(memory, None, MEMORY_FIELDS)?;
    let pools = memory.get("pools").map(pools_from_value).transpose()?;
    Ok(MemoryConfig { pools })
}

/// Builds the value of `memory.pools`.
fn pools_from_value(value: &Value) -> Result<MemoryPoolsConfig, PoolConfigError> {
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

fn preset_from_str(name: &str) -> Result<MemoryPoolsPreset, PoolConfigError> {
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
fn entry_from_value(entry: usize, value: &Value) -> Result<MemoryPoolConfig, PoolConfigError> {
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
            reject_unknown_keys(table, Some(entry), SLICED_FIELDS)?;
            Ok(MemoryPoolConfig::Sliced {
                page_size: fields.required_size("page_size")?,
                max_slice_size: fields.size("max_slice_size")?,
                max_pool_size: fields.size("max_pool_size")?,
                dealloc_period: fields.count("dealloc_period")?,
            })
        }
        "exclusive" => {
            reject_unknown_keys(table, Some(entry), EXCLUSIVE_FIELDS)?;
            Ok(MemoryPoolConfig::Exclusive {
                max_alloc_size: fields.required_size("max_alloc_size")?,
                dealloc_period: fields.count("dealloc_period")?,
            })
        }
        "direct" => {
            reject_unknown_keys(table, Some(entry), DIRECT_FIELDS)?;
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

/// Refuses the first key (in key order) not in `allowed`.
fn reject_unknown_keys(
    table: &Table,
    entry: Option<usize>,
    allowed: &'static [&'static str],
) -> Result<(), PoolConfigError> {
    match table.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(field) => Err(PoolConfigError::UnknownField {
            entry,
            field: field.clone(),
            allowed,
        }),
        None => Ok(()),
    }
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

// ---------------------------------------------------------------------------------------
// Resolving
// ---------------------------------------------------------------------------------------

impl MemoryPoolsConfig {
    /// Checks this configuration against a device and turns it into a layout.
    ///
    /// The alignment is `max(properties.alignment, 1)` bytes. A preset becomes
    /// [`PoolLayout::Preset`]. A list is checked as a whole (not empty, at most 254
    /// entries), then entry by entry in order, and the first error wins:
    ///
    /// - exclusive: `max_alloc_size` rounded up to the alignment (0 stays 0); the period
    ///   is kept.
    /// - direct: `reclaim_at` kept as written; no period.
    /// - sliced: `page_size` non-zero, then rounded up; `max_slice_size` non-zero, rounded
    ///   up (default: the aligned page), at most the page; `max_pool_size` non-zero, at
    ///   least one aligned page and at most 65535 of them, kept as written; the period is
    ///   kept although sliced pools ignore it.
    ///
    /// `properties.max_page_size` is not checked: it is an estimate, and a page too large
    /// for the device fails when it is allocated.
    ///
    /// # Errors
    ///
    /// [`PoolConfigError::EmptyPoolList`], [`PoolConfigError::TooManyPools`],
    /// [`PoolConfigError::ZeroSize`], [`PoolConfigError::SliceLargerThanPage`],
    /// [`PoolConfigError::CapSmallerThanPage`], [`PoolConfigError::TooManyPages`],
    /// [`PoolConfigError::BadSize`] (a size that overflows `u64` when rounded up), and on
    /// exclusive-memory-only builds ([`EXCLUSIVE_MEMORY_ONLY`]) the `"adaptive"` preset
    /// ([`PoolConfigError::PresetUnavailable`]) and sliced entries
    /// ([`PoolConfigError::SlicedPoolsUnavailable`]).
    ///
    /// # Panics
    ///
    /// Never.
    pub fn resolve(
        &self,
        properties: &MemoryDeviceProperties,
    ) -> Result<PoolLayout, PoolConfigError> {
        self.resolve_for_build(properties, EXCLUSIVE_MEMORY_ONLY)
    }

    /// [`Self::resolve`] with the build's exclusive-memory-only flag passed in, so both
    /// builds' rules can be tested in one.
    fn resolve_for_build(
        &self,
        properties: &MemoryDeviceProperties,
        exclusive_only: bool,
    ) -> Result<PoolLayout, PoolConfigError> {
        match self {
            Self::Preset(preset) => resolve_preset(*preset, exclusive_only).map(PoolLayout::Preset),
            Self::Explicit(entries) => {
                if entries.is_empty() {
                    return Err(PoolConfigError::EmptyPoolList);
                }
                if entries.len() > MAX_POOLS {
                    return Err(PoolConfigError::TooManyPools {
                        count: entries.len(),
                        limit: MAX_POOLS,
                    });
                }
                let alignment = properties.alignment.max(1);
                entries
                    .iter()
                    .enumerate()
                    .map(|(entry, config)| resolve_entry(entry, config, alignment, exclusive_only))
                    .collect::<Result<Vec<_>, _>>()
                    .map(PoolLayout::Explicit)
            }
        }
    }
}

fn resolve_preset(
    preset: MemoryPoolsPreset,
    exclusive_only: bool,
) -> Result<MemoryConfiguration, PoolConfigError> {
    match preset {
        MemoryPoolsPreset::ExclusivePages => Ok(MemoryConfiguration::ExclusivePages),
        MemoryPoolsPreset::Adaptive if exclusive_only => Err(PoolConfigError::PresetUnavailable {
            preset: preset.name(),
        }),
        // `MemoryConfiguration::Adaptive` only exists where pages may be shared, so naming
        // it would not compile on exclusive-memory-only builds; the default is exactly
        // `Adaptive` on every build where this arm runs.
        MemoryPoolsPreset::Adaptive => Ok(MemoryConfiguration::default()),
    }
}

fn resolve_entry(
    entry: usize,
    config: &MemoryPoolConfig,
    alignment: u64,
    exclusive_only: bool,
) -> Result<MemoryPoolOptions, PoolConfigError> {
    let align = |field: &'static str, bytes: u64| align_up(entry, field, bytes, alignment);
    match *config {
        MemoryPoolConfig::Exclusive {
            max_alloc_size,
            dealloc_period,
        } => Ok(MemoryPoolOptions {
            pool_type: PoolType::ExclusivePages {
                max_alloc_size: align("max_alloc_size", max_alloc_size.0)?,
            },
            dealloc_period,
        }),
        MemoryPoolConfig::Direct { reclaim_at } => Ok(MemoryPoolOptions {
            pool_type: PoolType::Direct {
                reclaim_at: reclaim_at.map(MemorySize::bytes),
            },
            dealloc_period: None,
        }),
        MemoryPoolConfig::Sliced { .. } if exclusive_only => {
            Err(PoolConfigError::SlicedPoolsUnavailable { entry })
        }
        MemoryPoolConfig::Sliced {
            page_size,
            max_slice_size,
            max_pool_size,
            dealloc_period,
        } => {
            let zero = |field| PoolConfigError::ZeroSize { entry, field };
            if page_size.0 == 0 {
                return Err(zero("page_size"));
            }
            let page_size = align("page_size", page_size.0)?;
            let max_slice_size = match max_slice_size {
                Some(MemorySize(0)) => return Err(zero("max_slice_size")),
                Some(MemorySize(bytes)) => align("max_slice_size", bytes)?,
                None => page_size,
            };
            if max_slice_size > page_size {
                return Err(PoolConfigError::SliceLargerThanPage {
                    entry,
                    page_size,
                    max_slice_size,
                });
            }
            let max_pool_size = max_pool_size.map(MemorySize::bytes);
            if let Some(cap) = max_pool_size {
                if cap == 0 {
                    return Err(zero("max_pool_size"));
                }
                if cap < page_size {
                    return Err(PoolConfigError::CapSmallerThanPage {
                        entry,
                        page_size,
                        max_pool_size: cap,
                    });
                }
                let pages = cap / page_size;
                if pages > MAX_PAGES_PER_POOL {
                    return Err(PoolConfigError::TooManyPages {
                        entry,
                        pages,
                        limit: MAX_PAGES_PER_POOL,
                    });
                }
            }
            Ok(MemoryPoolOptions {
                pool_type: PoolType::SlicedPages {
                    page_size,
                    max_slice_size,
                    max_pool_size,
                },
                dealloc_period,
            })
        }
    }
}

/// `bytes` rounded up to a multiple of `alignment` (non-zero); 0 stays 0.
///
/// # Errors
///
/// [`PoolConfigError::BadSize`] when the rounded value passes `u64::MAX`.
fn align_up(
    entry: usize,
    field: &'static str,
    bytes: u64,
    alignment: u64,
) -> Result<u64, PoolConfigError> {
    bytes
        .div_ceil(alignment)
        .checked_mul(alignment)
        .ok_or_else(|| PoolConfigError::BadSize {
            entry: Some(entry),
            field,
            value: bytes.to_string(),
            reason: format!(
                "rounding it up to the device alignment of {alignment} bytes passes u64::MAX"
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props() -> MemoryDeviceProperties {
        MemoryDeviceProperties::new(128 << 20, 32)
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "wgpu-memory-pools-config-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        dir
    }

    // The exclusive-memory-only rules cannot be reached through `resolve` on this build
    // (the flag is a cubecl-runtime cfg), so they are pinned through the flag here.
    #[test]
    fn adaptive_preset_is_unavailable_on_exclusive_only_builds() {
        let config = MemoryPoolsConfig::Preset(MemoryPoolsPreset::Adaptive);
        let error = config
            .resolve_for_build(&props(), true)
            .expect_err("adaptive refused");
        assert_eq!(
            error,
            PoolConfigError::PresetUnavailable { preset: "adaptive" }
        );
        assert!(error.to_string().contains("\"adaptive\""), "{error}");
        let exclusive = MemoryPoolsConfig::Preset(MemoryPoolsPreset::ExclusivePages);
        assert!(matches!(
            exclusive.resolve_for_build(&props(), true),
            Ok(PoolLayout::Preset(MemoryConfiguration::ExclusivePages))
        ));
    }

    #[test]
    fn sliced_entries_are_unavailable_on_exclusive_only_builds() {
        let config = MemoryPoolsConfig::Explicit(vec![
            MemoryPoolConfig::Exclusive {
                max_alloc_size: MemorySize(1024),
                dealloc_period: None,
            },
            MemoryPoolConfig::Sliced {
                page_size: MemorySize(4096),
                max_slice_size: None,
                max_pool_size: None,
                dealloc_period: None,
            },
        ]);
        let error = config
            .resolve_for_build(&props(), true)
            .expect_err("sliced refused");
        assert_eq!(error, PoolConfigError::SlicedPoolsUnavailable { entry: 1 });
        let message = error.to_string();
        assert!(message.contains("entry 1"), "{message}");
        assert!(message.contains("exclusive"), "{message}");
    }

    #[test]
    fn env_path_that_is_missing_is_an_io_error() {
        let missing = scratch_dir("env-missing").join("absent.toml");
        let error = load_from_sources(Some(missing.clone().into_os_string()), Path::new("x"))
            .expect_err("missing file named by the variable");
        match error {
            PoolConfigError::Io { path, message } => {
                assert_eq!(path, missing);
                assert!(!message.is_empty());
            }
            other => panic!("expected Io, got {other:?}"),
        }
    }

    #[test]
    fn absent_default_file_gives_none_and_present_one_is_read() {
        let dir = scratch_dir("default");
        let default_file = dir.join(DEFAULT_CONFIG_FILE);
        let _ = std::fs::remove_file(&default_file);
        assert_eq!(load_from_sources(None, &default_file), Ok(None));

        std::fs::write(&default_file, "[memory]\npools = \"exclusive-pages\"\n")
            .expect("write default file");
        assert_eq!(
            load_from_sources(None, &default_file),
            Ok(Some(MemoryConfig {
                pools: Some(MemoryPoolsConfig::Preset(MemoryPoolsPreset::ExclusivePages)),
            }))
        );
        // The variable wins over the default file.
        let other = dir.join("other.toml");
        std::fs::write(&other, "[memory]\n").expect("write other file");
        assert_eq!(
            load_from_sources(Some(other.into_os_string()), &default_file),
            Ok(Some(MemoryConfig { pools: None }))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn huge_sizes_round_trip_as_strings() {
        let config = MemoryConfig {
            pools: Some(MemoryPoolsConfig::Explicit(vec![
                MemoryPoolConfig::Direct {
                    reclaim_at: Some(MemorySize(u64::MAX)),
                },
            ])),
        };
        let text = toml::to_string(&config).expect("serialize");
        let back: MemoryConfig = toml::from_str(&text).expect("deserialize");
        assert_eq!(back, config);
    }

    #[test]
    fn aligning_past_u64_max_is_a_bad_size() {
        let config = MemoryPoolsConfig::Explicit(vec![MemoryPoolConfig::Exclusive {
            max_alloc_size: MemorySize(u64::MAX),
            dealloc_period: None,
        }]);
        assert!(matches!(
            config.resolve(&props()),
            Err(PoolConfigError::BadSize {
                entry: Some(0),
                field: "max_alloc_size",
                ..
            })
        ));
    }
}
