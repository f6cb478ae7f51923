//! Errors a caller of the [`Client`](crate::Client) matches on.

use crate::memory_management::{
    FailureReport, InstallMemoryPoolsError, PoolConfigError, ReserveError,
};
use crate::report::OutOfMemoryDetail;
use cubecl_runtime::memory_management::ManagedMemoryId;
use cubecl_runtime::server::IoError;

/// The line naming the out-of-memory snapshot file, if one was written.
fn snapshot_line(snapshot: Option<&std::path::Path>) -> String {
    snapshot.map_or_else(String::new, |path| {
        format!(
            "\nthe memory snapshot of that moment is in {}",
            path.display()
        )
    })
}

/// The reservation's own error as the first line of an out-of-memory message, unless the
/// budget refused it (its line in the detail says more, and the memory layer can only say
/// that the storage refused a page).
fn reserve_line(error: &ReserveError, detail: &OutOfMemoryDetail) -> String {
    match detail.budget {
        Some(_) => String::new(),
        None => format!("{error}\n"),
    }
}

/// Why a [`Client`](crate::Client) operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// wgpu found no adapter. On a headless Linux machine, install the software Vulkan
    /// driver (`apt-get install mesa-vulkan-drivers`). Retrying cannot help.
    #[error(
        "no wgpu adapter found ({0}); on headless Linux install mesa-vulkan-drivers (lavapipe)"
    )]
    NoAdapter(String),
    /// The `memory.pools` configuration (a `wgpu-memory.toml` file, the file named by
    /// `WGPU_MEMORY_CONFIG`, or one given to
    /// [`install_memory_pools`](crate::Client::install_memory_pools)) is invalid; the
    /// error names the entry and the field. Fix the config.
    #[error(transparent)]
    Config(#[from] PoolConfigError),
    /// A new pool layout was not installed (live slices remain, or too many pools).
    #[error(transparent)]
    Install(#[from] InstallMemoryPoolsError),
    /// The adapter refused to open a device.
    #[error("the adapter refused to open a device: {0}")]
    RequestDevice(String),
    /// The memory could not reserve the bytes: too big for any pool, a gap in the
    /// layout, or out of room in the upload or readback staging memory. The error carries
    /// the numbers. Out of room in the main memory is [`OutOfMemory`](Self::OutOfMemory).
    #[error(transparent)]
    Reserve(#[from] ReserveError),
    /// A main-memory reservation ran out of room: the device refused a page
    /// ([`ReserveError::OutOfMemory`]) or every accepting pool is capped and full
    /// ([`ReserveError::PoolCapacityExceeded`]), even after a cleanup and a wait for the
    /// bytes pending release. Or a reservation in any memory (main, readback staging,
    /// upload staging) would have crossed the budget
    /// ([`set_budget`](crate::Client::set_budget), `[memory] budget`) even after every
    /// memory gave its free pages back: then `detail.budget` names the budget, what each
    /// memory holds and the largest free slice, and the message starts with it.
    ///
    /// `detail` names the five largest live allocations (size, label and age when history
    /// is on, id, pool) and each pool's free room, largest free slice and fragmentation,
    /// all from a snapshot of that moment. When an out-of-memory snapshot path is set
    /// (`[memory] oom_snapshot`, [`set_oom_snapshot`](crate::Client::set_oom_snapshot)),
    /// the whole snapshot was written there (`snapshot`); draw it with
    /// `examples/memory_viz`. A snapshot that could not be written is logged and
    /// `snapshot` is `None`.
    /// The message holds the reservation's own error where the device or a pool refused
    /// it, and no `source()`: a budget refusal reaches the memory as the storage's
    /// out-of-memory, and its text cannot tell a budget from the device.
    #[error("{}{detail}{}", reserve_line(error, detail), snapshot_line(.snapshot.as_deref()))]
    OutOfMemory {
        /// The reservation's error, with the memory's numbers. When `detail.budget` is
        /// set, the budget refused the page, not the device, whatever its text says.
        error: Box<ReserveError>,
        /// What held the memory at that moment.
        detail: Box<OutOfMemoryDetail>,
        /// Where the snapshot (JSON) was written, if it was.
        snapshot: Option<std::path::PathBuf>,
    },
    /// A handle names no live slice (stale, or never allocated), or another memory error.
    #[error(transparent)]
    Memory(#[from] IoError),
    /// A write or read range does not fit in the handle.
    #[error(
        "{operation} of {len} bytes at offset {offset} does not fit in a handle of {size} bytes"
    )]
    OutOfBounds {
        /// What was attempted (`write`).
        operation: &'static str,
        /// Byte offset asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// Bytes of the handle.
        size: u64,
    },
    /// A launch asked for more workgroups per dimension than the device allows
    /// (`max_compute_workgroups_per_dimension`).
    #[error(
        "launch of {kernel} asks for {requested:?} workgroups; the device allows at most {limit} per dimension"
    )]
    TooManyWorkgroups {
        /// The kernel's label.
        kernel: String,
        /// The workgroup counts asked for.
        requested: [u32; 3],
        /// The per-dimension limit.
        limit: u32,
    },
    /// A launch bound more storage buffers than the device allows in one stage
    /// (`max_storage_buffers_per_shader_stage`).
    #[error("launch of {kernel} binds {given} storage buffers; the device allows at most {limit}")]
    TooManyBindings {
        /// The kernel's label.
        kernel: String,
        /// Handles given.
        given: usize,
        /// The limit.
        limit: u32,
    },
    /// wgpu rejected an operation (a shader that does not compile, a bind group that does
    /// not match the shader, a device error); `message` is wgpu's own text.
    #[error("wgpu rejected {operation}: {message}")]
    Wgpu {
        /// What was attempted (`launch of matmul`, `write`, `read`).
        operation: String,
        /// wgpu's message.
        message: String,
    },
    /// A read found bytes that a failed operation left unwritten: the report names the
    /// root failure with its original wgpu message, how many allocations carry it, and
    /// the launches it stopped on the way here. Retrying cannot help; rewrite the bytes
    /// (or redo the work that fills them) first.
    #[error("the read found unwritten bytes: {0}")]
    Unwritten(Box<FailureReport>),
    /// The device was lost (destroyed, reset, or out of its driver's reach): every later
    /// operation fails with this error, reads in flight end with it, and nothing more
    /// runs. Retrying cannot help; open a new device and client.
    #[error("{operation} failed: the device was lost ({message})")]
    DeviceLost {
        /// What was attempted (`write`, `launch of matmul`, `read`, `sync`).
        operation: String,
        /// wgpu's message, or the device-lost callback's reason and message.
        message: String,
    },
    /// A launch bound a handle to a binding its kernel declares `var<storage, read>`, and
    /// another handle in the same page to a writable binding. wgpu refuses one buffer
    /// used both ways in a dispatch, and would report it only for the whole batch; the
    /// launch is refused alone instead. Declare the binding `read_write` (slices of one
    /// page can always be bound together then).
    #[error(
        "launch of {kernel}: binding {read_only} is declared var<storage, read> and shares a page with writable binding {writable}; wgpu refuses one buffer bound both ways in a dispatch, so declare binding {read_only} read_write"
    )]
    ReadOnlyAliasesWritable {
        /// The kernel's label.
        kernel: String,
        /// The read-only binding.
        read_only: u32,
        /// The writable binding in the same page.
        writable: u32,
    },
    /// A launch's entry point uses a binding outside `@group(0)` (any kind: storage,
    /// uniform, texture, sampler). A launch binds only `@group(0)`, the i-th handle at
    /// `@binding(i)`, and wgpu would refuse the dispatch only when the batch is
    /// submitted, failing every operation in it; the launch is refused alone instead,
    /// before anything is recorded. Declare the binding in `@group(0)` and pass its handle
    /// at that position, or bind the group yourself in your own pipeline, with the
    /// handles' buffers from [`Client::resource`](crate::Client::resource).
    #[error(
        "launch of {kernel}: its entry point uses @group({group}) @binding({binding}), but a launch binds only @group(0), the i-th handle at @binding(i); declare it in @group(0) and pass its handle at that position, or bind @group({group}) yourself in your own pipeline with buffers from Client::resource"
    )]
    UnsupportedGroup {
        /// The kernel's label.
        kernel: String,
        /// The group outside 0 (the lowest the entry point uses).
        group: u32,
        /// The lowest binding number the entry point uses in that group.
        binding: u32,
    },
    /// A launch's entry point uses `@group(0) @binding(binding)`, but fewer handles were
    /// given: the i-th handle is bound at `@binding(i)`, so `binding` has none. Refused
    /// before anything is recorded. Pass one handle per binding the entry point uses.
    #[error(
        "launch of {kernel}: its entry point uses @group(0) @binding({binding}), but the launch gave {given} handles (the i-th is bound at @binding(i)); pass a handle for every binding the entry point uses"
    )]
    MissingBinding {
        /// The kernel's label.
        kernel: String,
        /// The highest binding number the entry point uses.
        binding: u32,
        /// Handles given.
        given: usize,
    },
    /// A handle of another client was given to this one: its slice lives in the other
    /// client's memory. Use each handle with the client that made it.
    #[error(
        "{operation} was given a handle of another client (client #{owner}); this is client #{client}"
    )]
    ForeignHandle {
        /// What was attempted.
        operation: String,
        /// The number of the client that made the handle.
        owner: u64,
        /// The number of the client it was given to.
        client: u64,
    },
    /// A read asked for more bytes at once than one staging buffer can hold
    /// (`max_buffer_size` of the device): read fewer or smaller handles per call.
    #[error(
        "a read of {requested} bytes does not fit in one staging buffer: the device allows at most {limit} bytes per buffer"
    )]
    ReadTooBig {
        /// Bytes the read needs in staging (each part rounded up to 4).
        requested: u64,
        /// The device's `max_buffer_size`, in bytes.
        limit: u64,
    },
    /// The read's handle has no slice (its reservation failed).
    #[error("the read's handle was never allocated: memory #{0}")]
    Unallocated(usize),
    /// The application destroyed a page of the main memory (`destroy()` on a
    /// [`HandleResource`](crate::HandleResource)'s buffer). The device is healthy; the
    /// bytes of every handle in that page are gone. `handles` lists the allocations the
    /// page held (every live slice in it, not only the exported one). Operations on
    /// them fail with this error; the batch that found it claims its outputs; new
    /// allocations never land in that page, which goes back to wgpu once its handles are
    /// dropped. Retrying cannot help; drop those handles and make new ones.
    #[error(
        "{operation} failed: a page of the main memory was destroyed (the application called destroy() on its buffer); it held the allocations {handles:?}"
    )]
    PageDestroyed {
        /// What was attempted (`submit`, `read`, `launch of matmul`, `write`).
        operation: String,
        /// The allocations whose slices lie in the destroyed page, by id.
        handles: Vec<ManagedMemoryId>,
    },
    /// The client already holds the most callbacks of this kind it keeps.
    #[error("the client already holds {limit} {kind} callbacks, the most it keeps")]
    TooManyCallbacks {
        /// `device-lost` or `uncaptured-error`.
        kind: &'static str,
        /// [`MAX_CALLBACKS`](crate::client::MAX_CALLBACKS).
        limit: usize,
    },
    /// An operation that needs the main pools empty
    /// ([`install_memory_pools`](crate::Client::install_memory_pools)) found live
    /// allocations, some of them exported slices whose
    /// [`HandleResource`](crate::HandleResource)s were dropped on other threads that have
    /// not submitted through [`Client::queue`](crate::Client::queue), synced, cleaned up
    /// or exited since: work those threads recorded on them may still wait for its
    /// submit, so the slices stay reserved (see
    /// [`Client::resource`](crate::Client::resource)). Transient: let each named thread
    /// call `Client::queue().submit(..)`, `Client::sync()` or `Client::cleanup()` (or
    /// end), drop any other handles and resources, and retry.
    #[error(
        "{operation}: {allocations} allocations ({bytes_in_use} bytes) are still live in the main pools; {slices} of them ({bytes} bytes) are exported slices whose resources were dropped on threads that have not submitted since: {}; call Client::queue().submit(..), Client::sync() or Client::cleanup() on each of those threads (or let it end), drop any other handles and resources, and retry",
        threads.join(", ")
    )]
    ExportsHeld {
        /// What was attempted (`install_memory_pools`).
        operation: String,
        /// Live allocations in the main pools, the held slices included.
        allocations: u64,
        /// Their bytes in use, in bytes.
        bytes_in_use: u64,
        /// Exported slices held for threads that have not submitted since their drop.
        slices: usize,
        /// Those slices' bytes (their handles' sizes), in bytes.
        bytes: u64,
        /// The threads they wait for (name and id), at most eight.
        threads: Vec<String>,
    },
    /// A staging buffer could not be mapped for a read.
    #[error("mapping the staging buffer of a {size}-byte read failed: {message}")]
    Map {
        /// Bytes of the read.
        size: u64,
        /// wgpu's message.
        message: String,
    },
}
