//! [`Kernel`]: a WGSL compute shader and its entry point.

use super::reflection::{BindingUse, binding_use};
use std::sync::{Arc, OnceLock};

/// A compute kernel: WGSL source and the entry point to run. Cheap to clone. A client
/// compiles one pipeline per source and entry point (at the first launch), shared by
/// every kernel made from them, and keeps at most
/// [`MAX_PIPELINES`](crate::client::MAX_PIPELINES) of them.
///
/// The kernel's storage buffers are `@group(0) @binding(i)` for the i-th handle of a
/// launch. Only storage bindings are supported: the client's pages have no `UNIFORM`
/// usage, so a `var<uniform>` binding is refused by wgpu (the launch returns
/// [`ClientError::Wgpu`](crate::ClientError::Wgpu)); put small parameters in a small
/// handle bound `var<storage, read_write>` (the README, "Small parameters"). An entry
/// point that uses another group is refused
/// ([`ClientError::UnsupportedGroup`](crate::ClientError::UnsupportedGroup)), and so is a
/// launch that gives fewer handles than the bindings it uses
/// ([`ClientError::MissingBinding`](crate::ClientError::MissingBinding)).
///
/// What the kernel reads and writes comes from its entry point alone, read with naga
/// when its pipeline is compiled: only the globals the entry point (or a function it
/// calls) uses count, so one module may declare different globals at one binding
/// number for different entry points. Its outputs are the bindings it stores to,
/// atomics included, which a refused batch or a skipped launch claims (a binding
/// declared `read_write` but only read is never claimed). Every handle counts as read.
/// [`writes`](Self::writes) overrides both for kernels whose outputs are written whole
/// without being read.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// A hash of `source` and `entry_point`, computed once: the pipeline cache's key
    /// hashes this instead of the whole source at every launch.
    pub(crate) fingerprint: u64,
    pub(crate) label: Arc<str>,
    pub(crate) source: Arc<str>,
    pub(crate) entry_point: Arc<str>,
    /// The bindings [`writes`](Self::writes) named; `None`: what the source stores to.
    pub(crate) writes: Option<Arc<[usize]>>,
    /// What the source does with its bindings, read at the first launch and shared by
    /// clones (see `reflection`).
    pub(crate) usage: Arc<OnceLock<Arc<BindingUse>>>,
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
            usage: Arc::default(),
        }
    }

    /// The bindings (positions in a launch's handle list) the kernel writes whole
    /// without reading their old bytes, replacing what its source says. Failure tracking
    /// uses it: a refused batch or a skipped launch claims the bytes of these handles
    /// only, and a claim on them does not stop the launch (it overwrites them). A binding
    /// whose global (the one the entry point uses) is declared `var<storage, read>` is
    /// never written, whatever this says.
    ///
    /// Default: the outputs are the bindings the source stores to, and every binding is
    /// read (so a claim on any of them stops the launch: a store may cover only part of
    /// a binding). A source naga cannot analyse counts every binding as written.
    pub fn writes(mut self, bindings: &[usize]) -> Self {
        self.writes = Some(bindings.into());
        self
    }

    /// What the entry point does with its bindings: computed once, on the first call
    /// (when its pipeline is compiled), and kept by every clone.
    pub(crate) fn binding_use(&self) -> Arc<BindingUse> {
        self.usage
            .get_or_init(|| Arc::new(binding_use(&self.source, &self.entry_point, &self.label)))
            .clone()
    }

    /// Whether the kernel writes binding `index`, given what its source does (`usage`).
    pub(crate) fn writes_binding(&self, index: usize, usage: &BindingUse) -> bool {
        let binding = u32::try_from(index).unwrap_or(u32::MAX);
        match &self.writes {
            Some(writes) => {
                writes.contains(&index) && usage.read_only.binary_search(&binding).is_err()
            }
            None => usage.may_write(binding),
        }
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
