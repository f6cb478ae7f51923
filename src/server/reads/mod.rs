//! Reading handles back: the staging layout of a read, its copies, the mapped range its
//! views hold, and the background poller that completes the maps.

pub(super) mod mapping;
pub(super) mod poller;
pub(super) mod read_bytes;
pub(super) mod read_plan;
pub(super) mod readback;
pub(super) mod streamed;
