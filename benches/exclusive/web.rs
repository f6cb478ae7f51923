//! What the bench compares: a side that makes and releases allocations by slot, this
//! crate's memory in the web's layout, and replaying a trace on a side.

use cubecl_runtime::memory_management::{ManagedMemoryHandle, MemoryConfiguration};
use wgpu_memory::memory_management::{
    Cleanup, MemoryDeviceProperties, MemoryManagement, MemoryManagementOptions,
};
use wgpu_memory::storage::BytesStorage;

use crate::sides::CountingStorage;
use crate::traces::{MIB, Op, Trace};

/// The web's default device: WebGPU's default limits give storage bindings of at most
/// 128 MiB (`maxStorageBufferBindingSize`, under `maxBufferSize` of 256 MiB) and storage
/// offsets aligned to 256 bytes.
pub fn web_properties() -> MemoryDeviceProperties {
    MemoryDeviceProperties::new(128 * MIB, 256)
}

/// A memory the traces run on. Every side's buffers are pages of a counting host
/// storage, so pages made and bytes held are counted the same way on every side.
pub trait WebSide {
    /// Makes the allocation of `slot`, of `size` bytes.
    fn reserve(&mut self, slot: usize, size: u64) -> Result<(), String>;
    /// Lets go of the allocation of `slot`.
    fn release(&mut self, slot: usize);
    /// The counting storage under the side.
    fn counter(&mut self) -> &mut CountingStorage<BytesStorage>;
    /// Gives every free buffer back (untimed, after a replay).
    fn release_all(&mut self);
}

/// This crate's memory with `MemoryConfiguration::ExclusivePages`, the layout of an
/// exclusive-memory-only build (the web): every reservation a page of its own. A
/// release drops the handle and frees its slice at once with `MemoryManagement::release`,
/// as the client does when a user's last `Handle` clone goes.
pub struct Ours {
    memory: MemoryManagement<CountingStorage<BytesStorage>>,
    slots: Vec<Option<ManagedMemoryHandle>>,
}

impl Ours {
    pub fn new(slots: usize) -> Self {
        Self {
            memory: MemoryManagement::from_configuration(
                CountingStorage::new(BytesStorage::default()),
                &web_properties(),
                MemoryConfiguration::ExclusivePages,
                MemoryManagementOptions::new("web"),
            ),
            slots: (0..slots).map(|_| None).collect(),
        }
    }
}

impl WebSide for Ours {
    #[inline]
    fn reserve(&mut self, slot: usize, size: u64) -> Result<(), String> {
        let handle = self.memory.reserve(size).map_err(|e| e.to_string())?;
        self.slots[slot] = Some(handle);
        Ok(())
    }

    #[inline]
    fn release(&mut self, slot: usize) {
        if let Some(handle) = self.slots[slot].take() {
            let (id, location) = (handle.descriptor().id, handle.descriptor().location());
            drop(handle);
            self.memory.release(id, location);
        }
    }

    fn counter(&mut self) -> &mut CountingStorage<BytesStorage> {
        self.memory.storage()
    }

    fn release_all(&mut self) {
        self.memory.cleanup(Cleanup::Explicit);
    }
}

/// Replays `trace` once on `side`; the error names the op and its size.
#[inline(always)]
pub fn replay(side: &mut impl WebSide, trace: &Trace) -> Result<(), String> {
    for (index, op) in trace.ops.iter().enumerate() {
        match *op {
            Op::Reserve { slot, size } => side
                .reserve(slot as usize, size)
                .map_err(|e| format!("op {index}, reserving {size} B: {e}"))?,
            Op::Drop { slot } => side.release(slot as usize),
        }
    }
    Ok(())
}
