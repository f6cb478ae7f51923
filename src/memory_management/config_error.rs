//! Why a `memory.pools` configuration was refused.
//!
//! Every variant is a mistake in the configuration itself (its text, its values, or what
//! this build supports), so retrying the same configuration never helps: fix it and
//! load it again. Entries are counted from 0, in the order they appear in the
//! `[[memory.pools]]` list; sizes are bytes.

use std::path::PathBuf;

use thiserror::Error;

use super::usage::format_bytes;

/// A `memory.pools` configuration that cannot be read or cannot become a layout.
///
/// Returned by [`parse_memory_config`](super::parse_memory_config) and the loaders (text,
/// types, fields, size strings) and by
/// [`MemoryPoolsConfig::resolve`](super::MemoryPoolsConfig::resolve) (values checked
/// against the device alignment and the pool limits). `entry` is the 0-based position of
/// the offending entry in the pools list; sizes are bytes.
///
/// Retrying never helps for any variant: the configuration must be changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PoolConfigError {
    /// `memory.pools` is an empty list, so no reservation could be served.
    ///
    /// Retrying does not help: add at least one entry, or use a preset string such as
    /// `pools = "adaptive"`.
    #[error(
        "memory.pools is an empty list, so no reservation could be served; add at least one \
         [[memory.pools]] entry, or use a preset (pools = \"adaptive\" or \"exclusive-pages\")"
    )]
    EmptyPoolList,

    /// A size field that must be non-zero is `0` (`page_size`, `max_slice_size` or
    /// `max_pool_size` of a sliced entry).
    ///
    /// Retrying does not help: give the field a non-zero size, or (for the optional
    /// fields) remove it to get its default.
    #[error(
        "memory.pools entry {entry}: `{field}` is 0 bytes but must be non-zero; give it a \
         size such as \"64 MiB\"{hint}",
        hint = zero_size_hint(field)
    )]
    ZeroSize {
        /// Position of the entry in the pools list (0-based).
        entry: usize,
        /// The field that is zero.
        field: &'static str,
    },

    /// A sliced entry's `max_slice_size` exceeds its `page_size`, both rounded up to the
    /// device alignment: a slice must fit in one page.
    ///
    /// Retrying does not help: lower `max_slice_size` to at most `page_size`, or raise
    /// `page_size`.
    #[error(
        "memory.pools entry {entry}: `max_slice_size` {} is larger than `page_size` {} (both \
         rounded up to the device alignment); a slice must fit in one page: lower \
         `max_slice_size` to at most {page_size} bytes or raise `page_size`",
        show(*.max_slice_size),
        show(*.page_size)
    )]
    SliceLargerThanPage {
        /// Position of the entry in the pools list (0-based).
        entry: usize,
        /// The page size after rounding up to the alignment, in bytes.
        page_size: u64,
        /// The largest slice after rounding up to the alignment, in bytes.
        max_slice_size: u64,
    },

    /// A sliced entry's `page_size` (rounded up to the device alignment) is larger than
    /// the largest page the device can make: `limit` is the device's
    /// [`MemoryDeviceProperties::max_page_size`](super::MemoryDeviceProperties), on wgpu
    /// the smaller of the adapter's `max_buffer_size` and
    /// `max_storage_buffer_binding_size`. Every reservation of such a pool would fail
    /// when its page is made.
    ///
    /// Retrying does not help: lower `page_size` to at most `limit` bytes.
    #[error(
        "memory.pools entry {entry}: `{field}` {} is larger than the largest page this \
         device can make ({}, its max_page_size); lower `{field}` to at most {limit} bytes",
        show(*.page_size),
        show(*.limit)
    )]
    PageOverDeviceLimit {
        /// Position of the entry in the pools list (0-based).
        entry: usize,
        /// The field holding the page size (`page_size`).
        field: &'static str,
        /// The page size after rounding up to the alignment, in bytes.
        page_size: u64,
        /// The device's largest page, in bytes.
        limit: u64,
    },

    /// A sliced entry's `max_pool_size` is smaller than one (aligned) page, so the pool
    /// could never hold a page.
    ///
    /// Retrying does not help: raise `max_pool_size` to at least `page_size`, lower
    /// `page_size`, or remove the cap.
    #[error(
        "memory.pools entry {entry}: `max_pool_size` {} is smaller than one page \
         (`page_size` {} after rounding up to the device alignment); raise `max_pool_size` \
         to at least {page_size} bytes, lower `page_size`, or remove the cap",
        show(*.max_pool_size),
        show(*.page_size)
    )]
    CapSmallerThanPage {
        /// Position of the entry in the pools list (0-based).
        entry: usize,
        /// The page size after rounding up to the alignment, in bytes.
        page_size: u64,
        /// The cap as written, in bytes.
        max_pool_size: u64,
    },

    /// A sliced entry's `max_pool_size` spans more whole pages than a pool can index
    /// (`max_pool_size / page_size > 65535`: a page's position is 16 bits wide).
    ///
    /// Retrying does not help: raise `page_size` or lower `max_pool_size` so that the cap
    /// holds at most `limit` pages.
    #[error(
        "memory.pools entry {entry}: `max_pool_size` spans {pages} pages of `page_size`, but \
         a pool holds at most {limit} pages; raise `page_size` or lower `max_pool_size` so \
         that max_pool_size / page_size <= {limit}"
    )]
    TooManyPages {
        /// Position of the entry in the pools list (0-based).
        entry: usize,
        /// Whole pages the cap spans (`max_pool_size / page_size`, aligned page).
        pages: u64,
        /// The most pages one pool can hold (65535).
        limit: u64,
    },

    /// The pools list has more entries than a layout can hold (a pool's position is 8
    /// bits wide and the last value belongs to the persistent pool).
    ///
    /// Retrying does not help: merge entries until at most `limit` remain.
    #[error(
        "memory.pools has {count} entries, but a layout holds at most {limit} pools (the \
         last pool position is kept for the persistent pool); merge entries until at most \
         {limit} remain"
    )]
    TooManyPools {
        /// Entries in the list.
        count: usize,
        /// The most entries a layout can hold (254).
        limit: usize,
    },

    /// An entry's `type` is not one of `"sliced"`, `"exclusive"`, `"direct"`.
    ///
    /// Retrying does not help: fix the spelling of `type`.
    #[error(
        "memory.pools entry {entry}: unknown pool type {found:?}; `type` must be one of \
         \"sliced\", \"exclusive\", \"direct\""
    )]
    UnknownType {
        /// Position of the entry in the pools list (0-based).
        entry: usize,
        /// The type as written.
        found: String,
    },

    /// A key that this place does not know: a field an entry of its type does not have
    /// (for example `preallocate`, or `page_size` on an exclusive entry), or a key of the
    /// `[memory]` table other than `pools`.
    ///
    /// Retrying does not help: remove the key or fix its spelling; `allowed` lists the
    /// keys accepted there.
    #[error(
        "{}: unknown field `{field}`{}; remove it or use one of: {}",
        place(*.entry, table),
        nearest.map(|known| format!(" (did you mean `{known}`?)")).unwrap_or_default(),
        allowed.join(", ")
    )]
    UnknownField {
        /// Position of the entry in the pools list (0-based), or `None` for a key directly
        /// in a table (`table`).
        entry: Option<usize>,
        /// The table the key was read in, as written in the file (`"[memory]"`,
        /// `"[submit]"`; `"memory.pools"` for an entry).
        table: &'static str,
        /// The key as written.
        field: String,
        /// The allowed key it nearly spells (case aside, at most two letters changed, or
        /// one inside the other), if one.
        nearest: Option<&'static str>,
        /// The keys accepted at that place.
        allowed: &'static [&'static str],
    },

    /// A top-level table (or key) that a configuration file does not have: the file
    /// holds only `[memory]` and `[submit]`. `nearest` is the known table the name is
    /// close to (a misspelling such as `[memroy]`, or a key of that table written above
    /// every table, `misplaced_key`), if any.
    ///
    /// Retrying does not help: fix the table's name, move the key under its table, or
    /// keep another program's tables in a file of its own.
    #[error("{}", unknown_table_text(found, *nearest, *misplaced_key))]
    UnknownTable {
        /// The table or key as written.
        found: String,
        /// The known table it is close to, if any.
        nearest: Option<&'static str>,
        /// Whether `found` is a key of `nearest` written outside it.
        misplaced_key: bool,
    },

    /// An entry lacks a field its type requires (`type` itself, `page_size` on a sliced
    /// entry, `max_alloc_size` on an exclusive entry).
    ///
    /// Retrying does not help: add the field.
    #[error("memory.pools entry {entry}: missing required field `{field}`; add it")]
    MissingField {
        /// Position of the entry in the pools list (0-based).
        entry: usize,
        /// The missing field.
        field: &'static str,
    },

    /// `memory.pools` is a string that names no preset.
    ///
    /// Retrying does not help: use `"adaptive"` or `"exclusive-pages"`, or write the
    /// pools out as `[[memory.pools]]` entries.
    #[error(
        "memory.pools: unknown preset {found:?}; use \"adaptive\" or \"exclusive-pages\", or \
         list the pools (`pools = [{{ type = \"sliced\", ... }}]`, or [[memory.pools]] entries)"
    )]
    UnknownPreset {
        /// The preset as written.
        found: String,
    },

    /// A size that is not a whole number of bytes we can hold: a string that does not
    /// parse, a negative or NaN value, an unknown unit or a bare prefix such as `"64M"`
    /// (ambiguous between `MiB` and `MB`), or a value past `u64::MAX` bytes (also after
    /// rounding up to the alignment).
    ///
    /// Retrying does not help: write the size as a non-negative integer of bytes or as a
    /// string such as `"64 MiB"` or `"1.5GiB"`.
    #[error(
        "{}: `{field}` = {value} is not a valid size: {reason}; write an integer of bytes or \
         a string such as \"64 MiB\" (units B; KiB, MiB, GiB, TiB, 1024-based; kB, MB, GB, TB, \
         1000-based)",
        place(*.entry, "[memory]")
    )]
    BadSize {
        /// Position of the entry in the pools list (0-based), or `None` for a size read
        /// outside any entry.
        entry: Option<usize>,
        /// The field holding the size.
        field: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A preset that this build cannot provide: `"adaptive"` shares pages between
    /// allocations, which an exclusive-memory-only build
    /// ([`EXCLUSIVE_MEMORY_ONLY`](super::EXCLUSIVE_MEMORY_ONLY)) forbids.
    ///
    /// Retrying does not help: use `"exclusive-pages"` or exclusive entries.
    #[error(
        "memory.pools: preset {preset:?} is unavailable in this build (exclusive memory \
         only: pages cannot be shared between allocations); use \"exclusive-pages\" or \
         exclusive/direct entries"
    )]
    PresetUnavailable {
        /// The preset asked for.
        preset: &'static str,
    },

    /// A sliced entry in an exclusive-memory-only build
    /// ([`EXCLUSIVE_MEMORY_ONLY`](super::EXCLUSIVE_MEMORY_ONLY)), where pages cannot be
    /// shared between allocations.
    ///
    /// Retrying does not help: replace the entry with an exclusive or direct one.
    #[error(
        "memory.pools entry {entry}: sliced pools are unavailable in this build (exclusive \
         memory only: pages cannot be shared between allocations); use type = \"exclusive\" \
         or \"direct\""
    )]
    SlicedPoolsUnavailable {
        /// Position of the entry in the pools list (0-based).
        entry: usize,
    },

    /// The text is not valid TOML, or a value has the wrong type (for example a table
    /// where a size belongs, or `memory.pools` given as a number).
    ///
    /// Retrying does not help: fix the text at the place `message` names.
    #[error("memory configuration is not valid: {message}")]
    Toml {
        /// What the TOML reader or the schema check reported, with its location.
        message: String,
    },

    /// A budget (`[memory] budget`, or `Client::set_budget`) below the bytes the client's
    /// memories already hold, even after every free page was given back: the budget would
    /// be crossed from the start.
    ///
    /// Retrying helps only once live handles are dropped: drop them, or give a budget of
    /// at least `held` bytes.
    #[error(
        "[memory]: `{field}` = {} is below the {} the memories already hold after giving \
         back every free page ({}); drop live handles first or give a budget of at least \
         {held} bytes",
        show(*.budget),
        show(*.held),
        held_text(held_by)
    )]
    BudgetBelowHeld {
        /// The field (`budget`).
        field: &'static str,
        /// The budget asked for, in bytes.
        budget: u64,
        /// Bytes held by every memory together.
        held: u64,
        /// Bytes held by each memory, by name (`main`, `staging`, `upload`).
        held_by: Vec<(String, u64)>,
    },

    /// A budget (`[memory] budget`, or `Client::set_budget`) below the smallest page the
    /// main memory's pools make (`page_size`): every reservation would need a page the
    /// budget refuses.
    ///
    /// Retrying does not help: give a budget of at least `page_size` bytes (uploads also
    /// take pages of upload staging from it), or lay the memory out with smaller pages.
    #[error(
        "[memory]: `{field}` = {} is below the smallest page the main memory's pools make \
         ({}): every reservation would need a page the budget refuses; give a budget of at \
         least {page_size} bytes (uploads also take upload staging pages from it)",
        show(*.budget),
        show(*.page_size)
    )]
    BudgetBelowSmallestPage {
        /// The field (`budget`).
        field: &'static str,
        /// The budget asked for, in bytes.
        budget: u64,
        /// The smallest page the main memory's pools make now, in bytes.
        page_size: u64,
    },

    /// A configuration file that could not be read.
    ///
    /// Retrying the same load only helps if the file is fixed meanwhile: create it, fix
    /// its permissions, or point `WGPU_MEMORY_CONFIG` at the right path.
    #[error(
        "cannot read memory configuration file {}: {message}; check the path (and \
         WGPU_MEMORY_CONFIG if set) and the file's permissions",
        path.display()
    )]
    Io {
        /// The file that was read.
        path: PathBuf,
        /// The operating system's reason.
        message: String,
    },
}

/// Bytes written exactly, with a readable binary size beside them when that differs.
fn show(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        format!("{bytes} bytes ({})", format_bytes(bytes))
    }
}

/// What each memory holds: `main 1.00 MiB, staging 0 B, upload 1.00 MiB`.
fn held_text(held_by: &[(String, u64)]) -> String {
    held_by
        .iter()
        .map(|(memory, bytes)| format!("{memory} {}", format_bytes(*bytes)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where a key lives: an entry of the pools list, or the `[memory]` table itself.
fn place(entry: Option<usize>, table: &str) -> String {
    match entry {
        Some(entry) => format!("memory.pools entry {entry}"),
        None => table.to_owned(),
    }
}

/// The text of [`PoolConfigError::UnknownTable`].
fn unknown_table_text(found: &str, nearest: Option<&str>, misplaced_key: bool) -> String {
    const HOLDS: &str = "a wgpu-memory configuration file holds only [memory] and [submit]";
    match nearest {
        Some(table) if misplaced_key => format!(
            "the configuration file has `{found}` above every table; it is a key of \
             [{table}]: write it after a [{table}] line"
        ),
        Some(table) => format!(
            "the configuration file has no table [{found}]; did you mean [{table}]? {HOLDS}"
        ),
        None => format!(
            "the configuration file has no table [{found}]; {HOLDS} (keep another \
             program's tables in a file of its own)"
        ),
    }
}

/// The extra way out for a zero size: optional fields can simply be left out.
fn zero_size_hint(field: &str) -> &'static str {
    match field {
        "max_slice_size" => ", or remove it to default to the page size",
        "max_pool_size" => ", or remove it for an uncapped pool",
        _ => "",
    }
}
