//! Memory a device may still read, kept alive until a fence says the device is past it.
//!
//! # Contract of this module
//!
//! - **Owns** the items handed to [`PendingDropQueue::push`] (host buffers an upload copies
//!   from, pages a launch still reads) until a [`Fence`] made after their last use is
//!   passed; [`queue`](PendingDropQueue) holds the numbered lifecycle.
//! - **Advises, never decides**, when to flush: [`FlushingPolicy`] counts staged items and
//!   bytes (`u64`, saturating) and the caller acts on
//!   [`should_flush`](PendingDropQueue::should_flush).
//! - **Never frees under a running device:** a fence wait that fails for any reason other
//!   than a lost device ([`FenceError::Failed`]) leaks the batch it guarded and counts it
//!   in [`leaked`](PendingDropQueue::leaked). A lost device ([`FenceError::DeviceLost`])
//!   counts as passed, since nothing runs any more.
//! - **Never mints a fence on an idle queue:** flushing with nothing staged or pending does
//!   not call the fence factory.
//! - **Never sees** the device API: a user implements [`Fence`] on its own submission
//!   marker (the tests here use a fake). The client does not use this queue: its
//!   staging slices wait behind the map that wgpu runs only after the submission that
//!   reads them (see `server::uploads::upload` and `server::reads::readback`).

mod policy;
mod queue;
#[cfg(test)]
mod queue_tests;

pub use policy::FlushingPolicy;
pub use queue::{Fence, FenceError, PendingDropQueue};
