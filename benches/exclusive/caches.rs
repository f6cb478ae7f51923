//! The two reference caches, written for this bench: whole buffers kept after release
//! and handed out again by size, as WebGPU runtimes on the web do it.
//!
//! - [`Policy::Buckets`]: a model of ONNX Runtime Web's GPU data manager (the storage
//!   buffer cache of its WebGPU backend, which transformers.js runs on). A request is
//!   rounded up to the first of its fixed bucket sizes (64 B .. 160 MiB, roughly powers of
//!   two, finer between 8 and 64 MiB); a released buffer goes on its bucket's free list
//!   unless that list already holds the bucket's limit of buffers, and is destroyed
//!   otherwise; a request takes the most recently freed buffer of its bucket, or creates
//!   one. A request over the largest bucket is rounded up to 16 bytes and its buffer is
//!   destroyed on release (never cached).
//! - [`Policy::Exact`]: every request rounded up to 16 bytes (ORT's normalisation), every
//!   released buffer kept, and reused only by a request of exactly the same rounded size
//!   (ORT's "simple" cache mode).
//!
//! ORT releases buffers to the cache when the submitted work is flushed; here a release
//! reaches the free list at once, which can only lower the model's peak (the most
//! favourable reading of the reference).

use rustc_hash::FxHashMap;
use wgpu_memory::storage::{BytesStorage, ComputeStorage, StorageHandle};

use crate::sides::CountingStorage;
use crate::web::WebSide;

/// ORT Web's buckets: (buffer size in bytes, most free buffers kept of that size).
const BUCKETS: [(u64, usize); 26] = [
    (64, 250),
    (128, 200),
    (256, 200),
    (512, 200),
    (2048, 230),
    (4096, 200),
    (8192, 50),
    (16384, 50),
    (32768, 50),
    (65536, 50),
    (131072, 50),
    (262144, 50),
    (524288, 50),
    (1048576, 50),
    (2097152, 30),
    (4194304, 20),
    (8388608, 10),
    (12582912, 10),
    (16777216, 10),
    (26214400, 15),
    (33554432, 22),
    (44236800, 2),
    (58982400, 6),
    (67108864, 6),
    (134217728, 6),
    (167772160, 6),
];

/// ORT's size normalisation: buffers are whole multiples of 16 bytes.
const NORMAL: u64 = 16;

/// Which buffers a cache keeps and which a request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Buckets,
    Exact,
}

impl Policy {
    /// The buffer size a request of `size` bytes gets.
    fn buffer_size(self, size: u64) -> u64 {
        let normal = size.max(1).div_ceil(NORMAL) * NORMAL;
        match self {
            Policy::Exact => normal,
            Policy::Buckets => {
                let first = BUCKETS.partition_point(|&(bucket, _)| bucket < size);
                BUCKETS.get(first).map_or(normal, |&(bucket, _)| bucket)
            }
        }
    }

    /// How many free buffers of `bytes` the cache keeps.
    fn limit(self, bytes: u64) -> usize {
        match self {
            Policy::Exact => usize::MAX,
            Policy::Buckets => BUCKETS
                .binary_search_by_key(&bytes, |&(bucket, _)| bucket)
                .map_or(0, |index| BUCKETS[index].1),
        }
    }
}

/// A buffer cache over host pages that count as buffers.
pub struct Cache {
    policy: Policy,
    storage: CountingStorage<BytesStorage>,
    /// Free buffers by size, most recently freed last.
    free: FxHashMap<u64, Vec<StorageHandle>>,
    slots: Vec<Option<StorageHandle>>,
}

impl Cache {
    pub fn new(policy: Policy, slots: usize) -> Self {
        Self {
            policy,
            storage: CountingStorage::new(BytesStorage::default()),
            free: FxHashMap::default(),
            slots: vec![None; slots],
        }
    }
}

impl WebSide for Cache {
    #[inline]
    fn reserve(&mut self, slot: usize, size: u64) -> Result<(), String> {
        let bytes = self.policy.buffer_size(size);
        let buffer = match self.free.get_mut(&bytes).and_then(Vec::pop) {
            Some(buffer) => buffer,
            None => self.storage.alloc(bytes).map_err(|e| e.to_string())?,
        };
        self.slots[slot] = Some(buffer);
        Ok(())
    }

    #[inline]
    fn release(&mut self, slot: usize) {
        let Some(buffer) = self.slots[slot].take() else {
            return;
        };
        let bytes = buffer.size();
        let limit = self.policy.limit(bytes);
        let free = self.free.entry(bytes).or_default();
        if free.len() < limit {
            free.push(buffer);
        } else {
            self.storage.dealloc(buffer.id);
            self.storage.flush();
        }
    }

    fn counter(&mut self) -> &mut CountingStorage<BytesStorage> {
        &mut self.storage
    }

    fn release_all(&mut self) {
        for buffer in self.free.drain().flat_map(|(_, buffers)| buffers) {
            self.storage.dealloc(buffer.id);
        }
        self.storage.flush();
    }
}

/// The rounding rules, checked in test mode (`cargo test --bench exclusive`).
pub fn check_policies() {
    let bucket = |size| Policy::Buckets.buffer_size(size);
    assert_eq!(bucket(0), 64);
    assert_eq!(bucket(64), 64);
    assert_eq!(bucket(65), 128);
    // ORT's table has no 1 KiB bucket.
    assert_eq!(bucket(600), 2048);
    assert_eq!(bucket(9 << 20), 12 << 20);
    assert_eq!(bucket(40 << 20), 44_236_800);
    assert_eq!(bucket(200 << 20), 200 << 20);
    assert_eq!(bucket((200 << 20) + 1), (200 << 20) + 16);
    assert_eq!(Policy::Buckets.limit(200 << 20), 0);
    assert_eq!(Policy::Buckets.limit(64), 250);
    assert_eq!(Policy::Exact.buffer_size(17), 32);
}
