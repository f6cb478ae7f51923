//! [`CopyStorage`]: copying bytes between two slices of a storage's pages.

use super::{BytesStorage, ComputeStorage, StorageHandle};
use cubecl_runtime::server::IoError;

/// A storage that can copy bytes from one slice of its pages to another: what a
/// compaction moves live slices with
/// ([`MemoryManagement::compact`](crate::memory_management::MemoryManagement::compact)).
///
/// The copy is ordered: whatever the storage's owner records or does with either range
/// after `copy` returns sees the copied bytes in the destination. A storage may carry the
/// copy out later (on a device, in the owner's next batch of work), so the source range
/// must stay reserved until the owner knows no later work can overtake the copy.
pub trait CopyStorage: ComputeStorage {
    /// Copies `from.size()` bytes from `from` to `to` (same size; `to` at least as
    /// large). The two ranges lie in different pages.
    ///
    /// # Errors
    /// [`IoError::StorageHandleNotFound`] when either page is unknown;
    /// [`IoError::Unknown`] when both ranges lie in one page or `to` is smaller.
    fn copy(&mut self, from: &StorageHandle, to: &StorageHandle) -> Result<(), IoError>;
}

/// The error of a copy the storage refuses, with why.
pub(crate) fn refused(reason: String) -> IoError {
    IoError::Unknown {
        description: reason,
        backtrace: Default::default(),
    }
}

/// Checks what every storage requires of a copy: distinct pages, a large enough target.
pub(crate) fn check_copy(from: &StorageHandle, to: &StorageHandle) -> Result<(), IoError> {
    if from.id == to.id {
        return Err(refused(format!(
            "a copy of {} bytes within one page (offset {} to {}): moves go between pages",
            from.size(),
            from.offset(),
            to.offset()
        )));
    }
    if to.size() < from.size() {
        return Err(refused(format!(
            "a copy of {} bytes into a slice of {} bytes",
            from.size(),
            to.size()
        )));
    }
    Ok(())
}

impl CopyStorage for BytesStorage {
    fn copy(&mut self, from: &StorageHandle, to: &StorageHandle) -> Result<(), IoError> {
        check_copy(from, to)?;
        let bytes = self.get(from)?.read();
        self.get(to)?.write(&bytes);
        Ok(())
    }
}
