//! [`Kernel`]: a WGSL compute shader and its entry point.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A compute kernel: WGSL source and the entry point to run. Cheap to clone; clones share
/// one compiled pipeline per client (compiled at the first launch).
///
/// The kernel's storage buffers are `@group(0) @binding(i)` for the i-th handle of a
/// launch.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub(crate) id: u64,
    pub(crate) label: Arc<str>,
    pub(crate) source: Arc<str>,
    pub(crate) entry_point: Arc<str>,
}

impl Kernel {
    /// A kernel named `label` (used in errors and reports) from WGSL `source`, running
    /// `entry_point`. Nothing is compiled until its first launch.
    pub fn new(
        label: impl Into<Arc<str>>,
        source: impl Into<Arc<str>>,
        entry_point: impl Into<Arc<str>>,
    ) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            label: label.into(),
            source: source.into(),
            entry_point: entry_point.into(),
        }
    }

    /// The label given at construction.
    pub fn label(&self) -> &str {
        &self.label
    }
}
