//! GPU memory for wgpu programs: pools carve device buffers (pages) into slices, handles
//! keep slices alive, failures claim the bytes they left unwritten, staging buffers read
//! results back, and reports, snapshots and pictures show where memory went.
//!
//! Open a client, put bytes on the GPU, run a kernel, read the result (blocking, or as a
//! future on any executor):
//!
//! ```
//! use wgpu_memory::{Client, ClientError, Kernel};
//!
//! # fn main() -> Result<(), ClientError> {
//! let client = match Client::open_default() {
//!     Ok(client) => client,
//!     // No GPU on this machine: nothing to run (with CI=true it is an error).
//!     Err(ClientError::NoAdapter(_)) if std::env::var("CI").is_err() => return Ok(()),
//!     Err(error) => return Err(error),
//! };
//! let x = client.create(bytemuck::cast_slice(&[1.0f32, 2.0, 3.0, 4.0]))?;
//! let y = client.empty(16)?; // bytes
//! let kernel = Kernel::new(
//!     "double",
//!     "@group(0) @binding(0) var<storage, read_write> x: array<f32>;
//!      @group(0) @binding(1) var<storage, read_write> y: array<f32>;
//!      @compute @workgroup_size(4)
//!      fn main(@builtin(global_invocation_id) i: vec3<u32>) { y[i.x] = 2.0 * x[i.x]; }",
//!     "main",
//! );
//! client.launch(&kernel, [1, 1, 1], &[&x, &y])?; // handle i is @group(0) @binding(i)
//!
//! let bytes = client.read_blocking(&y)?; // blocking
//! assert_eq!(bytemuck::cast_slice::<u8, f32>(&bytes), &[2.0, 4.0, 6.0, 8.0]);
//!
//! let bytes = pollster::block_on(client.read(&y))?; // a `Send + 'static` future
//! assert_eq!(bytemuck::cast_slice::<u8, f32>(&bytes), &[2.0, 4.0, 6.0, 8.0]);
//!
//! client.cleanup(); // after a warm-up: give empty pages and idle staging back
//! println!("{}", wgpu_memory::report::MemorySummary::new(&client.memory_report()));
//! # Ok(())
//! # }
//! ```
//!
//! The guide (README.md in the repository) covers your own device, threads, budgets,
//! configuration and the rules the client asks of you; docs/ holds the measurements.
//!
//! # Layers
//!
//! Each layer calls only the ones below it (`tests/layering.rs` checks it):
//!
//! - [`client`]: [`Client`], [`Handle`], [`Kernel`]: what an application calls; history,
//!   label scopes, snapshots and memory records.
//! - the server (internal, not a public module): per device, the main and staging memories
//!   and the wgpu work around them; the client is its only door.
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

/// The guide's examples, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use client::{
    CleanupReport, Client, ClientError, CompactionReport, GivenBack, Handle, HandleResource,
    Kernel, LabelScope, ReadBytes, SubmitPolicy,
};
