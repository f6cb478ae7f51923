//! [`Kernel`]: a WGSL compute shader and its entry point.

use std::sync::Arc;

/// A compute kernel: WGSL source and the entry point to run. Cheap to clone. A client
/// compiles one pipeline per source and entry point (at the first launch), shared by
/// every kernel made from them, and keeps at most
/// [`MAX_PIPELINES`](crate::client::MAX_PIPELINES) of them.
///
/// The kernel's storage buffers are `@group(0) @binding(i)` for the i-th handle of a
/// launch. Only storage bindings are supported: the client's pages have no `UNIFORM`
/// usage, so a `var<uniform>` binding is refused by wgpu (the launch returns
/// [`ClientError::Wgpu`](crate::ClientError::Wgpu)); put small parameters in a small
/// handle bound `var<storage, read_write>` (the README, "Small parameters"). Every handle is read and written unless [`writes`](Self::writes) says which
/// are outputs only.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// A hash of `source` and `entry_point`, computed once: the pipeline cache's key
    /// hashes this instead of the whole source at every launch.
    pub(crate) fingerprint: u64,
    pub(crate) label: Arc<str>,
    pub(crate) source: Arc<str>,
    pub(crate) entry_point: Arc<str>,
    /// The bindings the kernel writes; `None`: every binding.
    pub(crate) writes: Option<Arc<[usize]>>,
}

impl Kernel {
    /// A kernel named `label` (used in errors and reports) from WGSL `source`, running
    /// `entry_point`. Nothing is compiled until its first launch.
    pub fn new(
        label: impl Into<Arc<str>>,
        source: impl Into<Arc<str>>,
        entry_point: impl Into<Arc<str>>,
    ) -> Self {
        let source = source.into();
        let entry_point = entry_point.into();
        Self {
            fingerprint: fingerprint(&source, &entry_point),
            label: label.into(),
            source,
            entry_point,
            writes: None,
        }
    }

    /// The bindings (positions in a launch's handle list) the kernel writes without
    /// reading their old bytes. Failure tracking uses it: a failed or skipped launch
    /// claims the bytes of these handles only, and a claim on them does not stop the
    /// launch (it overwrites them). Default: every binding is read and written (the safe
    /// answer when unknown).
    pub fn writes(mut self, bindings: &[usize]) -> Self {
        self.writes = Some(bindings.into());
        self
    }

    /// Whether the kernel writes binding `index`.
    pub(crate) fn writes_binding(&self, index: usize) -> bool {
        self.writes
            .as_ref()
            .is_none_or(|writes| writes.contains(&index))
    }

    /// Whether the kernel reads binding `index`.
    pub(crate) fn reads_binding(&self, index: usize) -> bool {
        self.writes
            .as_ref()
            .is_none_or(|writes| !writes.contains(&index))
    }

    /// The label given at construction.
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// A hash of a kernel's source and entry point (the pipeline cache's key).
fn fingerprint(source: &str, entry_point: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut hasher);
    entry_point.hash(&mut hasher);
    hasher.finish()
}
