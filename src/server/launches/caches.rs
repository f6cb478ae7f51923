//! The compiled pipelines and bind groups a client reuses across launches.
//!
//! - Pipelines are keyed by WGSL source and entry point (not by `Kernel` value), so two
//!   kernels made from one source share one pipeline. At most [`MAX_PIPELINES`] are
//!   kept; the least recently used one goes first.
//! - Bind groups are keyed by pipeline and by the (page, offset, size) of every binding:
//!   a launch over the same slices reuses the bind group instead of asking wgpu for a
//!   new one (a measurable share of a small launch's cost). At most
//!   [`MAX_BIND_GROUPS`] are kept, least recently used first out. A cached bind group
//!   keeps its pages alive inside wgpu, so the server empties this cache once the main
//!   memory gave a page back (the memory counts its deallocations): at the next bind
//!   group it makes, when a reservation runs out of room, and whenever the pending work
//!   is taken for a submit, which comes before the budget can credit a page that work
//!   may still use. (A page no unfinished work uses is destroyed when it is given back:
//!   a clone left here holds no device memory.) So no page the budget credits is kept
//!   alive here.

use rustc_hash::FxHashMap as HashMap;
use std::hash::Hash;
use std::sync::Arc;

/// Bound on the pipelines a client keeps compiled.
pub const MAX_PIPELINES: usize = 64;

/// Bound on the bind groups a client keeps.
pub const MAX_BIND_GROUPS: usize = 1024;

/// A pipeline's key: its WGSL source and entry point. Hashes only their fingerprint
/// (computed once per `Kernel`); equality compares the texts (pointers first).
#[derive(Debug, Clone)]
pub(crate) struct PipelineKey {
    pub(crate) fingerprint: u64,
    pub(crate) source: Arc<str>,
    pub(crate) entry_point: Arc<str>,
}

impl PartialEq for PipelineKey {
    fn eq(&self, other: &Self) -> bool {
        let same = |a: &Arc<str>, b: &Arc<str>| Arc::ptr_eq(a, b) || a == b;
        self.fingerprint == other.fingerprint
            && same(&self.source, &other.source)
            && same(&self.entry_point, &other.entry_point)
    }
}

impl Eq for PipelineKey {}

impl Hash for PipelineKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.fingerprint.hash(state);
    }
}

/// A bind group's key: the pipeline's slot, and each binding's page, offset and size.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct BindGroupKey {
    pub(crate) pipeline: u64,
    pub(crate) bindings: Vec<(wgpu::Buffer, u64, u64)>,
}

/// A map of at most `capacity` entries that drops the least recently used one when full.
///
/// Eviction scans the entries (O(capacity)); it happens only on a miss of a full cache,
/// next to the compile or bind-group creation the miss costs anyway.
pub(crate) struct Lru<K, V> {
    entries: HashMap<K, (V, u64)>,
    capacity: usize,
    clock: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> Lru<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::default(),
            capacity: capacity.max(1),
            clock: 0,
        }
    }

    /// The value under `key`, marked as just used.
    pub(crate) fn get(&mut self, key: &K) -> Option<V> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|(value, used)| {
            *used = clock;
            value.clone()
        })
    }

    /// Inserts `value` under `key`, dropping the least recently used entry when full.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        self.clock += 1;
        self.entries.insert(key, (value, self.clock));
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

/// A compiled pipeline and the number that names it in bind-group keys.
#[derive(Clone)]
pub(crate) struct CachedPipeline {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
    pub(crate) slot: u64,
    /// What the entry point does with its bindings (read-only ones, written ones, the
    /// ones it uses), shared with the kernels made from it.
    pub(crate) usage: Arc<super::reflection::BindingUse>,
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        assert_eq!(lru.get(&"a"), Some(1));
        lru.insert("c", 3);
        assert_eq!(lru.get(&"b"), None, "b was the least recently used");
        assert_eq!(lru.get(&"a"), Some(1));
        assert_eq!(lru.get(&"c"), Some(3));
        assert_eq!(lru.len(), 2);
    }

    #[test]
    fn replacing_a_key_evicts_nothing() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        lru.insert("a", 10);
        assert_eq!(lru.get(&"a"), Some(10));
        assert_eq!(lru.get(&"b"), Some(2));
    }
}
