//! Host memory pages with the storage contract.

use super::{ComputeStorage, StorageHandle, StorageId, StorageUtilization};
use cubecl_runtime::server::IoError;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Host pages: each page a zeroed `Vec<u8>`. Deallocations wait for
/// [`flush`](ComputeStorage::flush), as on a device.
///
/// An optional capacity makes it a small fake device: a page that would take the bytes
/// held over the capacity fails with `IoError::OutOfMemory`.
#[derive(Debug, Default)]
pub struct BytesStorage {
    pages: HashMap<StorageId, Arc<Mutex<Vec<u8>>>>,
    pending_dealloc: Vec<StorageId>,
    allocated: u64,
    capacity: Option<u64>,
    allocations_made: u64,
}

/// The bytes of one slice of a [`BytesStorage`] page.
#[derive(Debug, Clone)]
pub struct BytesResource {
    page: Arc<Mutex<Vec<u8>>>,
    /// Byte offset of the slice in its page.
    pub offset: u64,
    /// Bytes of the slice.
    pub size: u64,
}

impl BytesResource {
    fn range(&self) -> std::ops::Range<usize> {
        self.offset as usize..(self.offset + self.size) as usize
    }

    /// A copy of the slice's bytes.
    pub fn read(&self) -> Vec<u8> {
        self.page.lock()[self.range()].to_vec()
    }

    /// Writes `data` at the start of the slice; bytes past the slice are not written.
    pub fn write(&self, data: &[u8]) {
        let range = self.range();
        let len = data.len().min(range.len());
        self.page.lock()[range.start..range.start + len].copy_from_slice(&data[..len]);
    }
}

impl BytesStorage {
    /// A storage that refuses pages past `capacity` bytes held.
    pub fn with_capacity(capacity: u64) -> Self {
        Self {
            capacity: Some(capacity),
            ..Self::default()
        }
    }

    /// Pages made so far (successful allocations), for tests and benches.
    pub fn allocations_made(&self) -> u64 {
        self.allocations_made
    }

    /// Pages held now, a deallocation waiting on flush included.
    pub fn pages_held(&self) -> usize {
        self.pages.len()
    }
}

impl ComputeStorage for BytesStorage {
    type Resource = BytesResource;

    fn alignment(&self) -> usize {
        1
    }

    fn get(&mut self, handle: &StorageHandle) -> Result<BytesResource, IoError> {
        let page = self
            .pages
            .get(&handle.id)
            .ok_or_else(|| IoError::StorageHandleNotFound {
                reason: "no page with this id".into(),
                backtrace: Default::default(),
            })?;
        let page_size = page.lock().len() as u64;
        let end = handle.offset().checked_add(handle.size());
        if end.is_none_or(|end| end > page_size) {
            return Err(IoError::StorageHandleNotFound {
                reason: format!(
                    "the range {}+{} bytes is outside its page of {page_size} bytes",
                    handle.offset(),
                    handle.size()
                )
                .into(),
                backtrace: Default::default(),
            });
        }
        Ok(BytesResource {
            page: page.clone(),
            offset: handle.offset(),
            size: handle.size(),
        })
    }

    fn alloc(&mut self, size: u64) -> Result<StorageHandle, IoError> {
        if self
            .capacity
            .is_some_and(|capacity| self.allocated.saturating_add(size) > capacity)
        {
            return Err(IoError::OutOfMemory {
                size,
                backtrace: Default::default(),
            });
        }
        let out_of_memory = || IoError::OutOfMemory {
            size,
            backtrace: Default::default(),
        };
        let length = usize::try_from(size).map_err(|_| out_of_memory())?;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(length)
            .map_err(|_| out_of_memory())?;
        bytes.resize(length, 0);
        let id = StorageId::new();
        self.pages.insert(id, Arc::new(Mutex::new(bytes)));
        self.allocated += size;
        self.allocations_made += 1;
        Ok(StorageHandle::new(
            id,
            StorageUtilization { offset: 0, size },
        ))
    }

    fn dealloc(&mut self, id: StorageId) {
        self.pending_dealloc.push(id);
    }

    fn flush(&mut self) {
        for id in self.pending_dealloc.drain(..) {
            if let Some(page) = self.pages.remove(&id) {
                self.allocated -= page.lock().len() as u64;
            }
        }
    }

    fn bytes_allocated(&self) -> u64 {
        self.allocated
    }
}
