//! Reading handles back: the staging layout of a read, its copies, the mapped range its
//! views hold, the background poller that completes the maps, and the wait for the
//! device's work to be done that `sync_async` awaits.

pub(super) mod mapping;
pub(super) mod poller;
pub(super) mod read_bytes;
pub(super) mod read_plan;
pub(super) mod readback;
pub(super) mod streamed;
pub(super) mod work_done;
