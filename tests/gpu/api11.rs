//! Stand-ins for the issue 11 API (`/work/notes/api-11.md`) until it lands on main.
//!
//! TODO(api-11): delete this module and its `use crate::api11::...` lines once `Client`
//! has `create_with`, `write_with`, `flush`, `cached_pipelines`, `set_submit_policy` and
//! `ClientError::DeviceLost`, and the memory report has the `"upload"` auxiliary memory.
//! Inherent methods win over these trait methods, so the call sites stay as they are.

use wgpu_memory::memory_management::MemoryReport;
use wgpu_memory::{Client, ClientError, Handle};

/// `wgpu_memory::SubmitPolicy`, field for field.
///
/// TODO(api-11): delete, and import `wgpu_memory::SubmitPolicy` where this one is used
/// (`ordering_model.rs`): once `Client::set_submit_policy` lands, passing this type to it
/// no longer compiles, which is the reminder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitPolicy {
    pub max_dispatches: u32,
    pub max_bytes: u64,
}

/// TODO(api-11): the inherent `Client` methods replace these.
pub trait Api11 {
    /// `Client::create_with`: here a host buffer filled by `fill`, then `create`.
    fn create_with(&self, size: u64, fill: impl FnOnce(&mut [u8])) -> Result<Handle, ClientError>;
    /// `Client::write_with`: here a host buffer filled by `fill`, then `write`.
    fn write_with(
        &self,
        handle: &Handle,
        offset: u64,
        size: u64,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), ClientError>;
    /// `Client::flush`: today every operation is submitted at once, so nothing to do.
    fn flush(&self) -> Result<(), ClientError>;
    /// `Client::cached_pipelines`: today's client cannot say.
    fn cached_pipelines(&self) -> usize;
    /// `Client::set_submit_policy`: today every operation is submitted at once.
    fn set_submit_policy(&self, policy: SubmitPolicy);
    /// `Client::submit_policy`: here the defaults of the contract's example config.
    fn submit_policy(&self) -> SubmitPolicy;
}

impl Api11 for Client {
    fn create_with(&self, size: u64, fill: impl FnOnce(&mut [u8])) -> Result<Handle, ClientError> {
        let mut bytes = vec![0; size as usize];
        fill(&mut bytes);
        self.create(&bytes)
    }

    fn write_with(
        &self,
        handle: &Handle,
        offset: u64,
        size: u64,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), ClientError> {
        let mut bytes = vec![0; size as usize];
        fill(&mut bytes);
        self.write(handle, offset, &bytes)
    }

    fn flush(&self) -> Result<(), ClientError> {
        Ok(())
    }

    fn cached_pipelines(&self) -> usize {
        panic!("TODO(api-11): Client::cached_pipelines is not on this main yet")
    }

    fn set_submit_policy(&self, policy: SubmitPolicy) {
        let _ = policy;
    }

    fn submit_policy(&self) -> SubmitPolicy {
        SubmitPolicy {
            max_dispatches: 256,
            max_bytes: 64 << 20,
        }
    }
}

/// Whether `error` says the device is lost.
///
/// TODO(api-11): `matches!(error, ClientError::DeviceLost { .. })`. Today's client has no
/// such variant, so any error counts.
pub fn is_device_lost(error: &ClientError) -> bool {
    let _ = error;
    true
}

/// Live slices of the `"upload"` auxiliary memory.
///
/// TODO(api-11): require the memory (`crate::reports::auxiliary_slices(report, "upload")
/// .expect(..)`); today's client has none, so its absence counts as 0.
pub fn upload_slices(report: &MemoryReport) -> u64 {
    crate::reports::auxiliary_slices(report, "upload").unwrap_or(0)
}
