//! The budget over every memory of a client, and what a reservation does when it is out
//! of room.
//!
//! One [`Budget`] is shared by the storages of the main memory, the readback staging and
//! the upload staging: each takes a page's bytes from it before `create_buffer`, so no
//! buffer is ever created past it. A reservation in any of the three memories that runs
//! out of room (the budget or the device refused a page, or a capped pool is full):
//!
//! 1. cleans up its own memory and retries (the memory does this itself; the main memory
//!    also gives back the staging memories' idle pages, [`IdleStaging`]);
//! 2. gives back the free pages of every memory and the bind groups that keep given-back
//!    pages alive, compacts ([`Server::compact_for`]), and retries once more;
//! 3. fails. When the budget refused a page on the way, the refusal and the budget's
//!    detail of that moment are kept for the client's out-of-memory error, per thread
//!    ([`Server::take_budget_refusal`]; the client takes it as soon as its attempt
//!    returns): the client lets go of the server's lock, and waits for the device,
//!    between the refused reservation and its error, and another thread's reservation
//!    (which starts with no refusal of its own), a wgpu callback's reservation on this
//!    thread, or a budget set or cleared meanwhile must not turn a budget refusal into
//!    an error that names no budget.
//!
//! [`IdleStaging`]: super::pending::IdleStaging

use super::pending::IdleStaging;
use crate::memory_management::{Cleanup, PoolConfigError, format_bytes};
use crate::report::{BudgetDetail, MemoryHeld};
use crate::server::Server;
use crate::server::faults::error::ClientError;
use crate::server::memory::compaction::RoomInBatch;
use crate::server::uploads::upload::{Region, out_of_room};
use crate::storage::wgpu_storage::budget::Budget;
use cubecl_runtime::memory_management::ManagedMemoryHandle;
use std::cell::RefCell;

/// The config field (and [`Client::set_budget`](crate::Client::set_budget)) the budget is
/// read from, as errors name it.
pub const BUDGET_FIELD: &str = "budget";

/// A reservation the budget refused: in which memory, and how many bytes were asked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BudgetRefusal {
    pub(crate) memory: &'static str,
    pub(crate) requested: u64,
}

thread_local! {
    /// The budget's detail of the refusal the last reservation made on this thread met
    /// (see the module doc, step 3), if it met one: one per thread, gone with it.
    static REFUSED: RefCell<Option<BudgetDetail>> = const { RefCell::new(None) };
}

impl Server {
    /// A reservation of `size` bytes in the main memory (steps in the module doc).
    pub(crate) fn reserve_main(&mut self, size: u64) -> Result<ManagedMemoryHandle, ClientError> {
        self.tick();
        self.with_room("main", size, |server| {
            let bind_groups = &mut server.bind_groups;
            let mut idle = IdleStaging {
                staging: &mut server.staging,
                upload: &mut server.uploads.memory,
                bind_groups: &mut || bind_groups.clear(),
            };
            let mut room = RoomInBatch {
                pending: &mut server.pending,
                device: &server.device,
                pins: &server.pins,
                exports: &mut server.exports,
                destroyed: &mut server.destroyed,
                max_bytes: server.max_move_bytes,
            };
            let memory = server.main.reserve_making_room(size, &mut idle, &mut room);
            server.forget_given_back_pages();
            Ok(memory?)
        })
    }

    /// A slice of `size` bytes of readback staging.
    pub(crate) fn reserve_readback(
        &mut self,
        size: u64,
    ) -> Result<ManagedMemoryHandle, ClientError> {
        self.tick();
        self.idle.readback_used();
        self.with_room("staging", size, |server| {
            Ok(server.staging.reserve(size)?)
        })
    }

    /// Gives free upload staging over its bound back, for a write of `len` bytes: after
    /// every write, and before a `create` reserves its handle (see
    /// [`UploadStaging::give_back_free_over_bound`]).
    ///
    /// [`UploadStaging::give_back_free_over_bound`]: crate::server::uploads::upload::UploadStaging::give_back_free_over_bound
    pub(crate) fn bound_free_staging(&mut self, len: u64) {
        let main = &self.main;
        self.uploads
            .give_back_free_over_bound(len, || main.memory_usage().bytes_in_use);
    }

    /// `len` bytes of mapped upload staging in the pending batch.
    pub(crate) fn upload_region(&mut self, len: u64) -> Result<Region, ClientError> {
        let region = self.with_room("upload", len, |server| {
            server.uploads.region(len, &mut server.pending)
        })?;
        self.bound_free_staging(len);
        Ok(region)
    }

    /// Runs `reserve`; when it is out of room, makes room in every memory and runs it once
    /// more; remembers a refusal of the budget on the way.
    fn with_room<T>(
        &mut self,
        memory: &'static str,
        size: u64,
        mut reserve: impl FnMut(&mut Self) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        REFUSED.with(|refused| refused.borrow_mut().take());
        let refusals = self.budget.refusals();
        let mut result = reserve(self);
        if matches!(&result, Err(error) if out_of_room(error)) && self.make_room(size) {
            result = reserve(self);
        }
        if result.is_err() && self.budget.refusals() > refusals {
            // The detail of this moment, under the lock that saw the refusal.
            let detail = self.budget_detail(BudgetRefusal {
                memory,
                requested: size,
            });
            REFUSED.with(|refused| *refused.borrow_mut() = detail);
        }
        result
    }

    /// Gives back every free page of every memory and the cached bind groups, and
    /// compacts; returns whether any of it freed something a retry could use.
    fn make_room(&mut self, size: u64) -> bool {
        let before = self.budget.held();
        tracing::debug!(size, held = before, "out of room: cleaning up every memory");
        self.bind_groups.clear();
        self.main.cleanup(Cleanup::Explicit);
        self.staging.cleanup(Cleanup::Explicit);
        self.uploads.memory.cleanup(Cleanup::Explicit);
        let compacted = self.compact_for(size);
        // Pages no unfinished work used are on their way out on the reclaimer's thread:
        // the retry's page waits for them (see `WgpuStorage`).
        compacted || self.budget.held().saturating_sub(self.budget.freeing()) < before
    }

    /// For a reservation out of room even after every free page went back: compacts the
    /// main memory (its copies recorded in the pending batch, ahead of anything the
    /// retry records), frees the ranges the moved slices left and gives back the main
    /// pages that emptied, so the budget has room again. Returns whether anything moved.
    pub(crate) fn compact_for(&mut self, _size: u64) -> bool {
        let done = self.compact(self.max_move_bytes());
        self.main.release_moved();
        self.cleanup_main();
        done.moves > 0
    }

    /// The budget's detail of the refusal the last failed reservation of the calling
    /// thread met, as it was then, if it met one; taken once.
    pub(crate) fn take_budget_refusal() -> Option<BudgetDetail> {
        REFUSED.with(|refused| refused.borrow_mut().take())
    }

    /// Whether the client may wait for the device (`device.poll(Wait)`, the reclaimer)
    /// before it retries a refused reservation: never on the web, where nothing may
    /// block and the device's answers come only from the browser's event loop.
    pub(crate) fn waits_for_device(&self) -> bool {
        !self.web
    }

    /// The budget all three memories take their pages from.
    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// The budget, to wait on its reclaimer with the server's lock let go.
    pub(crate) fn shared_budget(&self) -> std::sync::Arc<Budget> {
        self.budget.clone()
    }

    /// Sets the budget over every memory (`None`: no budget). A budget below what the
    /// memories hold first gives back every free page.
    ///
    /// # Errors
    /// [`PoolConfigError::BadSize`] for a budget of 0 bytes;
    /// [`PoolConfigError::BudgetBelowSmallestPage`] for one below the smallest page the
    /// main memory's pools make;
    /// [`PoolConfigError::BudgetBelowHeld`] when the memories hold more than `budget`
    /// even after giving back every free page (the budget is left as it was).
    pub(crate) fn set_budget(&mut self, budget: Option<u64>) -> Result<(), PoolConfigError> {
        if let Some(budget) = budget {
            if budget == 0 {
                return Err(PoolConfigError::BadSize {
                    entry: None,
                    field: BUDGET_FIELD,
                    value: "0".to_string(),
                    reason: "a budget of 0 bytes would refuse every page".to_string(),
                });
            }
            let page_size = self.main.smallest_page();
            if budget < page_size {
                return Err(PoolConfigError::BudgetBelowSmallestPage {
                    field: BUDGET_FIELD,
                    budget,
                    page_size,
                });
            }
            if self.budget.held() > budget {
                self.cleanup();
            }
            let held = self.budget.held();
            if held > budget {
                return Err(PoolConfigError::BudgetBelowHeld {
                    field: BUDGET_FIELD,
                    budget,
                    held,
                    held_by: self.held_by_memory(),
                });
            }
        }
        self.budget.set_limit(budget);
        tracing::debug!(budget = ?budget.map(format_bytes), "budget");
        Ok(())
    }

    /// Bytes of the pages each memory holds, by name.
    fn held_by_memory(&self) -> Vec<(String, u64)> {
        self.memories()
            .into_iter()
            .map(|(name, memory)| (name.to_string(), memory.bytes_allocated()))
            .collect()
    }

    /// The budget's part of an out-of-memory error for `refusal`: the budget, what each
    /// memory holds, the pages still retiring and the main memory's largest free slice.
    pub(crate) fn budget_detail(&self, refusal: BudgetRefusal) -> Option<BudgetDetail> {
        let budget = self.budget.limit()?;
        Some(BudgetDetail {
            budget,
            memory: refusal.memory.to_string(),
            requested: refusal.requested,
            page: self.budget.last_refused_page(),
            held: self
                .held_by_memory()
                .into_iter()
                .map(|(memory, bytes)| MemoryHeld { memory, bytes })
                .collect(),
            retiring: self.budget.retiring(),
            largest_free_slice: self.main.largest_free_slice(),
            upload_staging: 0,
            // The client waits for retiring pages before it refuses, except on the web.
            awaiting_device: match self.waits_for_device() {
                true => 0,
                false => self.budget.retiring(),
            },
        })
    }

    /// What wgpu's allocator holds on the device, beside the bytes of our pages it may
    /// hold (the budget's `held`); `None` where the backend gives no report.
    pub(crate) fn device_memory(&self) -> Option<crate::storage::wgpu_storage::DeviceMemory> {
        crate::storage::wgpu_storage::DeviceMemory::of(&self.device, self.budget.held())
    }
}
