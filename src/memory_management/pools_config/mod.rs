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
//! Sizes are bytes: an integer, or a string `<number>[ws]<unit>` where `KiB`, `MiB`,
//! `GiB`, `TiB` are 1024-based and `kB`, `MB`, `GB`, `TB` 1000-based (a bare `M` is
//! refused as ambiguous; see [`MemorySize::parse`]).

mod memory_size;
mod read;
mod resolve;
#[cfg(test)]
mod tests;

pub use memory_size::MemorySize;
pub(crate) use read::check_file_tables;
pub use read::{load_memory_config, load_memory_config_from, parse_memory_config};

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

use super::layout::MAX_POOLS;
use super::pool::pages::MAX_PAGES as MAX_PAGES_PER_POOL;

/// The environment variable naming the configuration file [`load_memory_config`] reads.
const CONFIG_PATH_VAR: &str = "WGPU_MEMORY_CONFIG";

/// The file [`load_memory_config`] reads from the current directory when
/// [`CONFIG_PATH_VAR`] is not set.
const DEFAULT_CONFIG_FILE: &str = "wgpu-memory.toml";

/// The keys of the `[submit]` table (read by the client's submit policy reader; listed
/// here so that a key of it written above every table is named as one).
const SUBMIT_FIELDS: &[&str] = &["max_dispatches", "max_bytes"];
/// The tables of a configuration file, with their keys.
const FILE_TABLES: &[(&str, &[&str])] = &[("memory", MEMORY_FIELDS), ("submit", SUBMIT_FIELDS)];

/// The keys of the `[memory]` table.
const MEMORY_FIELDS: &[&str] = &["pools", "history", "oom_snapshot", "records", "budget"];
/// The keys of a `memory.history` table.
const HISTORY_FIELDS: &[&str] = &["events", "backtraces"];
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
// The configuration values
// ---------------------------------------------------------------------------------------

/// The `[memory]` table of a configuration file.
///
/// Serializes (and deserializes) as the table's contents, `pools = ...`, so it can be a
/// `memory` field of a larger configuration; a whole file is this value under a `memory`
/// key. Any key other than `pools`, `history`, `oom_snapshot`, `records` and `budget` is
/// refused
/// ([`PoolConfigError::UnknownField`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryConfig {
    /// The pools of the main memory, or `None` to keep the runtime's own default layout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pools: Option<MemoryPoolsConfig>,
    /// `history = N` or `history = { events = N, backtraces = true }`: record at most N
    /// history events (a ring keeping the newest; see `Client::record_history`) from the
    /// start, each reservation with the caller's backtrace when `backtraces` is true
    /// (`Client::record_backtraces`); `None` or 0 events records none. A negative or
    /// non-integer count, a non-boolean `backtraces` or another key is refused
    /// ([`PoolConfigError::Toml`], [`PoolConfigError::UnknownField`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryConfig>,
    /// `oom_snapshot = "path"`: where a main-memory out-of-memory writes the memory
    /// snapshot (PyTorch's pickle for a `.pickle` / `.pkl` path, JSON otherwise; see
    /// `Client::set_oom_snapshot`). A value that is not a string is
    /// refused ([`PoolConfigError::Toml`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom_snapshot: Option<std::path::PathBuf>,
    /// `records = "path"`: the file `Client::record_memory` appends each record to, as
    /// one JSON line (see `Client::set_records_file`). A value that is not a string is
    /// refused ([`PoolConfigError::Toml`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<std::path::PathBuf>,
    /// `budget = "8 GiB"` (or a byte count): the cap on the bytes of every page the
    /// client creates, in the main memory and both staging memories together (see
    /// `Client::set_budget`). Zero, a negative value or a value that is not a size is
    /// refused ([`PoolConfigError::BadSize`]); a value below the smallest page the main
    /// memory's pools make, [`PoolConfigError::BudgetBelowSmallestPage`]; a value below
    /// what the client already holds when it is applied,
    /// [`PoolConfigError::BudgetBelowHeld`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<MemorySize>,
}

/// The value of `memory.history`: how many events to keep, and whether reservations
/// record backtraces. Written as a number (`history = 500`: no backtraces) or a table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HistoryConfig {
    /// The most events the ring keeps; 0 records none.
    pub events: usize,
    /// Whether each reservation records the caller's backtrace.
    pub backtraces: bool,
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
