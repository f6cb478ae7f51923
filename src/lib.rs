#![doc = include_str!("../README.md")]
//!
//! # Layers
//!
//! Each layer calls only the ones below it (`tests/layering.rs` checks it):
//!
//! - [`client`]: [`Client`], [`Handle`], [`Kernel`]: what an application calls; history,
//!   label scopes, snapshots and memory records.
//! - `server`: per device, the main and staging memories and the wgpu work around them.
//! - [`report`]: views of the memory: text summaries, snapshots, history events, the
//!   out-of-memory detail, and the data behind `examples/memory_viz`'s pictures.
//! - [`memory_management`]: pools, layouts, reports, generic over a storage. No wgpu.
//! - [`storage`]: [`WgpuStorage`](storage::WgpuStorage) (buffers) and
//!   [`BytesStorage`](storage::BytesStorage) (host memory).
#![warn(missing_docs)]
// No unsafe code: mapped staging is written only through wgpu's write-only views.
#![forbid(unsafe_code)]

pub mod client;
pub mod memory_management;
pub mod report;
mod server;
pub mod storage;

pub use client::{
    CleanupReport, Client, ClientError, CompactionReport, GivenBack, Handle, HandleResource,
    Kernel, LabelScope, ReadBytes, SubmitPolicy,
};
