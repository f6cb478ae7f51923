//! [`ReadBytes`]: the bytes of a read, viewed in the mapped staging range itself.

use super::mapping::Mapping;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// The bytes a read returned: a view into the mapped staging buffer, not a copy.
///
/// Derefs to `&[u8]`; `to_vec()` makes an owned copy. While any `ReadBytes` of a read is
/// alive its staging slice stays mapped and out of reuse; dropping the last one unmaps
/// it and returns the slice to the staging pool. Hold them briefly: a held read keeps
/// its staging bytes reserved.
pub struct ReadBytes {
    mapping: Option<Arc<Mapping>>,
    range: Range<usize>,
}

impl ReadBytes {
    pub(crate) fn mapped(mapping: Arc<Mapping>, range: Range<usize>) -> Self {
        Self {
            mapping: Some(mapping),
            range,
        }
    }

    /// The bytes of a zero-size read (no staging, no GPU work).
    pub(crate) fn empty() -> Self {
        Self {
            mapping: None,
            range: 0..0,
        }
    }
}

impl Deref for ReadBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.mapping {
            Some(mapping) => &mapping.bytes()[self.range.clone()],
            None => &[],
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
