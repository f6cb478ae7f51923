//! Writing into handles: the upload staging pages writes fill in place, and the copies
//! (and edge merges) that carry the bytes into the handles in queue order; on the web,
//! writes handed to the queue instead (`queued`).

pub(super) mod queued;
pub(super) mod transfer;
pub(super) mod upload;
