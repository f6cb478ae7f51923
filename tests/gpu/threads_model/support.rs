//! The threads model's tools: its generator, the host model of `ADD_ONE`, and the tally
//! it prints.

use crate::kernels::groups_for;
use wgpu_memory::Handle;
use wgpu_memory::memory_management::ManagedMemoryId;

/// The soak's generator, one per thread.
pub use crate::soak::support::Lcg;

/// Adds 1 to each little-endian word of `bytes` that `ADD_ONE` dispatched over
/// `groups_for(dispatched)` reaches; a partial last word as the kernel leaves the bytes
/// of it that the handle holds (a carry only runs upward, so the padding's bytes do not
/// matter).
pub fn add_one(bytes: &mut [u8], dispatched: u64) {
    let reached = groups_for(dispatched)[0] as usize * crate::kernels::WORKGROUP as usize * 4;
    let mut padded = bytes.to_vec();
    padded.resize(bytes.len().next_multiple_of(4), 0);
    for word in padded.chunks_exact_mut(4).take(reached / 4) {
        let value = u32::from_le_bytes(word.try_into().unwrap()).wrapping_add(1);
        word.copy_from_slice(&value.to_le_bytes());
    }
    let len = bytes.len();
    bytes.copy_from_slice(&padded[..len]);
}

/// The allocation a handle names (ids are never reused).
pub fn id_of(handle: &Handle) -> ManagedMemoryId {
    handle.memory().descriptor().id
}

/// What the threads did, summed at the end.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub steps: u64,
    pub creates: u64,
    pub drops: u64,
    pub writes: u64,
    pub launches: u64,
    pub reads: u64,
    pub read_then_writes: u64,
    pub checks: u64,
    pub pins: u64,
    pub app_copies: u64,
    /// App copies whose resources were dropped before their submit.
    pub copies_dropped_first: u64,
    /// App copies with a handle they use dropped before their submit.
    pub copies_over_dropped_handles: u64,
    pub app_passes: u64,
    pub app_writes: u64,
    pub submits: u64,
    pub syncs: u64,
    pub handles_checked: u64,
    /// Handles that read other bytes than the model's.
    pub wrong_handles: u64,
    pub wrong_bytes: u64,
    pub errors: u64,
}

impl Tally {
    pub fn add(&mut self, other: &Tally) {
        macro_rules! sum {
            ($($field:ident),*) => { $(self.$field += other.$field;)* };
        }
        sum!(
            steps,
            creates,
            drops,
            writes,
            launches,
            reads,
            read_then_writes,
            checks,
            pins,
            app_copies,
            copies_dropped_first,
            copies_over_dropped_handles,
            app_passes,
            app_writes,
            submits,
            syncs,
            handles_checked,
            wrong_handles,
            wrong_bytes,
            errors
        );
    }
}
