#![doc = include_str!("../README.md")]
//!
//! # Layers
//!
//! Each layer calls only the one below it:
//!
//! - [`client`]: [`Client`], [`Handle`], [`Kernel`]: what an application calls.
//! - `server`: per device, the main and staging memories and the wgpu work around them.
//! - [`memory_management`]: pools, layouts, reports, generic over a storage. No wgpu.
//! - [`storage`]: [`WgpuStorage`](storage::WgpuStorage) (buffers) and
//!   [`BytesStorage`](storage::BytesStorage) (host memory).
//! - [`report`]: text views of memory reports.
#![warn(missing_docs)]

pub mod client;
pub mod memory_management;
pub mod report;
mod server;
pub mod storage;

pub use client::{
    Client, ClientError, Handle, HandleResource, Kernel, LabelScope, ReadBytes, SubmitPolicy,
};
