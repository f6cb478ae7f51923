//! [`ReadBytes`]: the bytes of a read, viewed in the mapped staging range itself (or,
//! for a read streamed through bounded staging, in host memory it was assembled in).

use super::mapping::Mapping;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// The bytes a read returned: a view into the mapped staging buffer, not a copy (a read
/// larger than the room the budget leaves is streamed instead, and its bytes are
/// assembled in host memory this owns; see `Client::read`).
///
/// Derefs to `&[u8]`; `to_vec()` makes an owned copy. The bytes start at an address
/// aligned to at least 4 bytes, so `bytemuck::cast_slice` to `f32`, `u32` and the like
/// works; an empty read derefs to an empty slice at a 16-byte-aligned address. While any `ReadBytes` of a read is
/// alive its staging slice stays mapped and out of reuse; dropping the last one unmaps
/// it and returns the slice to the staging pool. Hold them briefly: a held read keeps
/// its staging bytes reserved.
pub struct ReadBytes {
    bytes: Bytes,
    range: Range<usize>,
}

/// Where a read's bytes are.
enum Bytes {
    /// Nowhere: a zero-size read.
    Empty,
    /// In the mapped staging range of the read, shared by its parts.
    Mapped(Arc<Mapping>),
    /// In host memory of their own, in 4-byte words (so the bytes are 4-byte aligned).
    Host(Box<[u32]>),
}

impl ReadBytes {
    pub(crate) fn mapped(mapping: Arc<Mapping>, range: Range<usize>) -> Self {
        Self {
            bytes: Bytes::Mapped(mapping),
            range,
        }
    }

    /// The bytes of a zero-size read (no staging, no GPU work).
    pub(crate) fn empty() -> Self {
        Self {
            bytes: Bytes::Empty,
            range: 0..0,
        }
    }

    /// The first `len` bytes of `words`, assembled in host memory.
    pub(crate) fn host(words: Box<[u32]>, len: usize) -> Self {
        debug_assert!(len <= words.len() * 4);
        Self {
            bytes: Bytes::Host(words),
            range: 0..len,
        }
    }
}

/// A zero-size array at a 16-byte-aligned address: what an empty read derefs to. A
/// plain `&[]` sits at address 1, which casts to no slice of a wider type.
#[repr(C, align(16))]
struct AlignedEmpty([u8; 0]);

static EMPTY: AlignedEmpty = AlignedEmpty([]);

impl Deref for ReadBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        if self.range.is_empty() {
            return &EMPTY.0;
        }
        match &self.bytes {
            Bytes::Mapped(mapping) => &mapping.bytes()[self.range.clone()],
            Bytes::Host(words) => &bytemuck::cast_slice(words)[self.range.clone()],
            Bytes::Empty => &EMPTY.0,
        }
    }
}

impl core::fmt::Debug for ReadBytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&**self, f)
    }
}

impl<T: AsRef<[u8]> + ?Sized> PartialEq<T> for ReadBytes {
    fn eq(&self, other: &T) -> bool {
        **self == *other.as_ref()
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ReadBytes>();
};

#[cfg(test)]
mod tests {
    use super::ReadBytes;

    #[test]
    fn an_empty_read_derefs_to_an_aligned_empty_slice() {
        let empty = ReadBytes::empty();
        assert!(empty.is_empty());
        assert_eq!(empty.as_ptr() as usize % 16, 0, "{:p}", empty.as_ptr());
        assert!(bytemuck::cast_slice::<u8, [f32; 4]>(&empty).is_empty());
    }
}
