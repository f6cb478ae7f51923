//! The options a [`MemoryManagement`](super::MemoryManagement) is built with.

use super::config::MemoryPoolOptions;
use cubecl_runtime::memory_management::MemoryAllocationMode;

/// How to build one [`MemoryManagement`](super::MemoryManagement): its name in reports and
/// logs, the allocation mode it starts in, and optionally an explicit pool layout.
#[derive(Debug, Clone)]
pub struct MemoryManagementOptions {
    pub(crate) name: String,
    pub(crate) mode: MemoryAllocationMode,
    pub(crate) pools: Option<Vec<MemoryPoolOptions>>,
    /// Exclusive pages reuse any larger free page (allocations are short-lived).
    pub(crate) transient: bool,
}

impl MemoryManagementOptions {
    /// Options named `name`, starting in [`MemoryAllocationMode::Auto`], with the layout
    /// of the [`MemoryConfiguration`](super::MemoryConfiguration) given at construction.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            mode: MemoryAllocationMode::Auto,
            pools: None,
            transient: false,
        }
    }

    /// Marks the memory's allocations as short-lived (a staging memory for reads):
    /// exclusive pages then serve any reservation that fits, the smallest fitting page
    /// first, instead of only those within half again their size.
    pub fn transient(mut self) -> Self {
        self.transient = true;
        self
    }

    /// The mode in force when no window is open (see
    /// [`MemoryManagement::mode`](super::MemoryManagement::mode)).
    pub fn mode(mut self, mode: MemoryAllocationMode) -> Self {
        self.mode = mode;
        self
    }

    /// An explicit layout: reservations go to the first of these pools that accepts their
    /// size. Overrides the configuration's preset.
    pub fn pools(mut self, pools: Vec<MemoryPoolOptions>) -> Self {
        self.pools = Some(pools);
        self
    }

    /// The name given at construction.
    pub fn name(&self) -> &str {
        &self.name
    }
}
