//! Writing into handles: the upload staging pages writes fill in place, and the copies
//! (and edge merges) that carry the bytes into the handles in queue order.

pub(super) mod transfer;
pub(super) mod upload;
