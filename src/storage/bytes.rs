//! Host memory pages with the storage contract.

use super::{ComputeStorage, StorageHandle, StorageId, StorageUtilization};
use cubecl_runtime::server::IoError;
use parking_lot::Mutex;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Host pages that read as zeros until written. Deallocations wait for
/// [`flush`](ComputeStorage::flush), as on a device.
///
/// A page is zeroed lazily: making one only reserves its bytes from the system allocator
/// (which, for a large page, maps address space the OS backs on first touch), and a
/// page's zeros are written only up to the furthest byte a [`BytesResource`] has reached.
/// So a page costs the same to make whatever its size, and a benchmark of the allocator
/// measures placement, not `memset`. Bytes never reached are never touched.
///
/// An optional capacity makes it a small fake device: a page that would take the bytes
/// held over the capacity fails with `IoError::OutOfMemory`.
#[derive(Debug, Default)]
pub struct BytesStorage {
    pages: HashMap<StorageId, Arc<Mutex<Page>>>,
    pending_dealloc: Vec<StorageId>,
    allocated: u64,
    capacity: Option<u64>,
    allocations_made: u64,
}

/// One page: its size and the prefix of it that was ever reached.
#[derive(Debug)]
struct Page {
    /// The page's size in bytes.
    size: u64,
    /// The bytes reached so far (zeros until written). Its capacity is the whole page,
    /// reserved when the page was made, so growing it never reallocates; past its
    /// length the page reads as zeros.
    touched: Vec<u8>,
}

impl Page {
    /// The bytes of `range`, zeroing the page up to its end first if no resource
    /// reached that far yet.
    fn reach(&mut self, range: std::ops::Range<usize>) -> &mut [u8] {
        if self.touched.len() < range.end {
            self.touched.resize(range.end, 0);
        }
        &mut self.touched[range]
    }
}

/// The bytes of one slice of a [`BytesStorage`] page.
#[derive(Debug, Clone)]
pub struct BytesResource {
    page: Arc<Mutex<Page>>,
    /// Byte offset of the slice in its page.
    pub offset: u64,
    /// Bytes of the slice.
    pub size: u64,
}

impl BytesResource {
    fn range(&self) -> std::ops::Range<usize> {
        self.offset as usize..(self.offset + self.size) as usize
    }

    /// A copy of the slice's bytes (zeros where nothing was written).
    pub fn read(&self) -> Vec<u8> {
        let page = self.page.lock();
        let touched = page.touched.len();
        let range = self.range();
        // Bytes past the touched prefix are zeros: copy without touching them.
        let mut bytes = vec![0; range.len()];
        let known = range.start.min(touched)..range.end.min(touched);
        bytes[..known.len()].copy_from_slice(&page.touched[known]);
        bytes
    }

    /// Writes `data` at the start of the slice; bytes past the slice are not written.
    pub fn write(&self, data: &[u8]) {
        let range = self.range();
        let len = data.len().min(range.len());
        self.page
            .lock()
            .reach(range.start..range.start + len)
            .copy_from_slice(&data[..len]);
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
        let page_size = page.lock().size;
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
        // Reserved, not written: the zeros come on first touch (see the type's docs).
        let mut touched = Vec::new();
        touched
            .try_reserve_exact(length)
            .map_err(|_| out_of_memory())?;
        let id = StorageId::new();
        self.pages
            .insert(id, Arc::new(Mutex::new(Page { size, touched })));
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
                self.allocated -= page.lock().size;
            }
        }
    }

    fn bytes_allocated(&self) -> u64 {
        self.allocated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of the process's resident set (Linux), read from `/proc/self/statm`.
    #[cfg(target_os = "linux")]
    fn resident_bytes() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").expect("procfs");
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    /// Making a 1 GiB page writes none of it: the process grows by far less than the
    /// page (eager zeroing grew it by the whole GiB), and only a write makes memory
    /// resident.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_new_page_is_not_written_until_reached() {
        const GIB: u64 = 1 << 30;
        let mut storage = BytesStorage::default();
        let before = resident_bytes();
        let page = storage.alloc(GIB).unwrap();
        let grown = resident_bytes().saturating_sub(before);
        assert!(
            grown < GIB / 8,
            "making the page made {grown} bytes resident"
        );
        assert_eq!(storage.bytes_allocated(), GIB);
        let tail = storage
            .get(&page.clone().offset_start(GIB - 16))
            .expect("the last 16 bytes");
        assert_eq!(tail.read(), [0; 16], "unreached bytes read as zeros");
        assert!(
            resident_bytes().saturating_sub(before) < GIB / 8,
            "reading unreached bytes touched them"
        );
        storage.dealloc(page.id);
        storage.flush();
        assert_eq!(storage.bytes_allocated(), 0);
    }

    /// Writes land where asked; bytes between written ranges and past them read as
    /// zeros, before and after a later write reaches further.
    #[test]
    fn unwritten_bytes_read_as_zeros_around_writes() {
        let mut storage = BytesStorage::default();
        let page = storage.alloc(4096).unwrap();
        let slice = |offset: u64, size: u64| {
            StorageHandle::new(page.id, StorageUtilization { offset, size })
        };
        let middle = storage.get(&slice(100, 8)).unwrap();
        middle.write(&[7; 8]);
        let around = storage.get(&slice(96, 16)).unwrap();
        assert_eq!(
            around.read(),
            [0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0]
        );
        let far = storage.get(&slice(4000, 96)).unwrap();
        assert_eq!(far.read(), vec![0; 96]);
        far.write(&[1; 200]);
        assert_eq!(far.read(), vec![1; 96], "a write stops at the slice's end");
        assert_eq!(around.read()[4..12], [7; 8]);
        assert_eq!(storage.get(&slice(2000, 4)).unwrap().read(), [0; 4]);
    }
}
