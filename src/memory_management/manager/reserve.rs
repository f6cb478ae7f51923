//! Reservations: routing a size to a pool, the out-of-room path and its errors.

use super::super::compaction::{MakeRoom, NoRoom, RoomFor};
use super::super::error::ReserveError;
use super::super::page_events::{MemoryEvent, Observed};
use super::super::pending::{NothingPending, PendingRelease};
use super::super::pool::{DynamicPool, GrowError, align_up};
use super::Cleanup;
use super::MemoryManagement;
use crate::storage::ComputeStorage;
use cubecl_runtime::memory_management::{
    DEDICATED_POOL_POS, ManagedMemoryHandle, MemoryAllocationMode, PERSISTENT_POOL_POS,
};
use cubecl_runtime::server::IoError;

impl<S: ComputeStorage> MemoryManagement<S> {
    /// Reserves a slice of at least `size` bytes (zero included: a zero-size reservation
    /// still occupies one alignment unit, so it binds as a real range of a real buffer).
    ///
    /// Runs the periodic cleanup first. If the storage runs out of memory or every
    /// accepting pool is at its cap, an explicit cleanup gives back every free page
    /// (after sweeping every dropped handle) and the reservation is tried once more.
    ///
    /// # Errors
    /// - [`ReserveError::BufferTooBig`]: no pool accepts the size (over the largest page).
    /// - [`ReserveError::NoPoolAccepts`]: no pool accepts the size though it is under the
    ///   largest accepted one (a gap in the layout); states the sizes accepted.
    /// - [`ReserveError::PoolCapacityExceeded`]: every accepting pool is capped and full,
    ///   even after the cleanup.
    /// - [`ReserveError::OutOfMemory`]: the device refused a page even after the cleanup;
    ///   states the bytes in use, reserved, the largest free slice and the cap.
    /// - [`ReserveError::TooManyPages`], [`ReserveError::Storage`]: see the variants.
    ///
    /// # Complexity
    /// O(1) placement (two-level segregated fit) plus a bounded sweep for dropped
    /// handles: a few slots, or up to 64 when free space is scarce and no free block fits
    /// closely. Before a pool grows it also catches up: every slot when the reservations
    /// since its last full sweep pay for it (8 slots each, amortised), else 64, and a
    /// placement that looks at every free block of the request's size class. Errors
    /// sweep everything.
    pub fn reserve(&mut self, size: u64) -> Result<ManagedMemoryHandle, ReserveError> {
        self.reserve_with(size, &mut NothingPending)
    }

    /// [`reserve`](Self::reserve), for an owner that may hold bytes pending release: when
    /// the reservation is out of room even after the cleanup, it waits for them through
    /// `pending` and tries once more (the steps are on [`PendingRelease`]).
    ///
    /// # Errors
    /// As [`reserve`](Self::reserve); [`ReserveError::OutOfMemory`] states the bytes
    /// `pending` still reported as pending release when the reservation gave up.
    ///
    /// # Complexity
    /// As [`reserve`](Self::reserve); `pending` is consulted only on the out-of-room path.
    pub fn reserve_with(
        &mut self,
        size: u64,
        pending: &mut impl PendingRelease,
    ) -> Result<ManagedMemoryHandle, ReserveError> {
        self.reserve_making_room(size, pending, &mut NoRoom)
    }

    /// [`reserve_with`](Self::reserve_with), for an owner that can also make room by
    /// moving live slices ([`MakeRoom`]): asked with [`RoomFor::Gather`] before a pool
    /// that holds enough free bytes in holes would add a page, and with
    /// [`RoomFor::OutOfRoom`] when the reservation is out of room after the first
    /// cleanup (a capped pool full, the device or the budget refusing a page). After
    /// either, the reservation is tried again.
    ///
    /// # Errors
    /// As [`reserve_with`](Self::reserve_with).
    ///
    /// # Complexity
    /// As [`reserve`](Self::reserve) while free blocks serve it; `room` is asked only on
    /// the paths that would otherwise make a page or fail.
    pub fn reserve_making_room(
        &mut self,
        size: u64,
        pending: &mut impl PendingRelease,
        room: &mut dyn MakeRoom<S>,
    ) -> Result<ManagedMemoryHandle, ReserveError> {
        self.reservations += 1;
        // Nothing to release on a timer in most layouts: skip the walk over the pools.
        if self.timed_release || self.dedicated.holds_pages() {
            self.cleanup(Cleanup::Periodic);
        }
        let result = match self.reserve_routed(size, room) {
            Err(error) if error.is_out_of_room() => {
                self.reserve_after_cleanup(size, error, pending, room)
            }
            result => result,
        };
        self.trace_reserve(size, &result);
        result
    }

    /// A `tracing` event per reservation: `memory`, `size`, the `pool` that served it and
    /// the `outcome` ("reserved" or the error). Out of memory is a warning; the rest are
    /// at trace level, so a program without a subscriber pays only the level check.
    pub(super) fn trace_reserve(
        &self,
        size: u64,
        result: &Result<ManagedMemoryHandle, ReserveError>,
    ) {
        match result {
            Ok(handle) => tracing::trace!(
                memory = %self.name,
                size,
                pool = self.place(handle.descriptor().location().pool),
                outcome = "reserved",
                "reserve"
            ),
            Err(error) if error.is_out_of_room() => {
                let usage = self.memory_usage();
                tracing::warn!(
                    memory = %self.name,
                    size,
                    outcome = %error,
                    bytes_in_use = usage.bytes_in_use,
                    bytes_reserved = usage.bytes_reserved,
                    largest_free_slice = self.largest_free_slice(),
                    "out of memory"
                )
            }
            Err(error) => tracing::debug!(memory = %self.name, size, outcome = %error, "reserve"),
        }
    }

    /// The out-of-room path: an explicit cleanup (it also sweeps every dropped handle the
    /// bounded sweeps have not seen yet) and a retry; then, if the owner has bytes pending
    /// release, a wait for them, another cleanup and a last retry.
    #[cold]
    pub(super) fn reserve_after_cleanup(
        &mut self,
        size: u64,
        error: ReserveError,
        pending: &mut impl PendingRelease,
        room: &mut dyn MakeRoom<S>,
    ) -> Result<ManagedMemoryHandle, ReserveError> {
        tracing::debug!(memory = %self.name, size, %error, "out of room: cleaning up and retrying");
        self.cleanup(Cleanup::Explicit);
        let mut result = self.reserve_routed(size, room);
        if matches!(&result, Err(error) if error.is_out_of_room())
            && room.make_room(self, size, RoomFor::OutOfRoom)
        {
            tracing::debug!(memory = %self.name, size, "still out of room: compacted; retrying");
            self.cleanup(Cleanup::Explicit);
            result = self.reserve_routed(size, room);
        }
        if matches!(&result, Err(error) if error.is_out_of_room())
            && pending.bytes_pending_release() > 0
        {
            tracing::debug!(
                memory = %self.name,
                size,
                pending = pending.bytes_pending_release(),
                "still out of room: waiting for the bytes pending release"
            );
            pending.release_pending();
            self.cleanup(Cleanup::Explicit);
            result = self.reserve_routed(size, room);
        }
        result.map_err(|error| self.explain(error, pending.bytes_pending_release()))
    }

    pub(super) fn reserve_routed(
        &mut self,
        size: u64,
        room: &mut dyn MakeRoom<S>,
    ) -> Result<ManagedMemoryHandle, ReserveError> {
        let now = self.reservations;
        let largest = self.largest_page();
        let (persistent, dedicated) = self.whole_page_places();
        let (pool, position, place) = match self.current_mode() {
            MemoryAllocationMode::Persistent => {
                (&mut self.persistent, PERSISTENT_POOL_POS, persistent)
            }
            MemoryAllocationMode::Dedicated => (&mut self.dedicated, DEDICATED_POOL_POS, dedicated),
            MemoryAllocationMode::Auto => return self.reserve_dynamic(size, room),
        };
        if align_up(size.max(1), self.properties.alignment.max(1)) > largest {
            return Err(ReserveError::BufferTooBig {
                requested: size,
                limit: largest,
            });
        }
        if let Some(handle) = pool.try_reserve(size, now) {
            return Ok(handle);
        }
        let mut storage = Observed {
            storage: &mut self.storage,
            log: &mut self.log,
            pool: place,
        };
        pool.grow(&mut storage, size, now)
            .map_err(|error| grow_error(error, size, position, None))
    }

    /// The first accepting pool that holds room serves; otherwise the first accepting
    /// pool that can grow does (a capped full pool spills to the next accepting one).
    pub(super) fn reserve_dynamic(
        &mut self,
        size: u64,
        room: &mut dyn MakeRoom<S>,
    ) -> Result<ManagedMemoryHandle, ReserveError> {
        // Over what the layout takes (field failure: a layout of 1 MiB pages named the
        // device's 128 MiB page as the limit), or over the largest page once aligned.
        let limit = self.dynamic_limit;
        if size > limit
            || align_up(size.max(1), self.properties.alignment.max(1)) > self.largest_page
        {
            return Err(ReserveError::BufferTooBig {
                requested: size,
                limit,
            });
        }
        if let Some(handle) = self.reserve_held(size) {
            return Ok(handle);
        }
        // Enough free bytes lie in holes of an accepting pool: gathering them is cheaper
        // than a page that would stay reserved after this burst. Only at the memory's
        // high-water mark, where a page would raise it: below it the page costs no new
        // peak, and a repeating workload would otherwise move the same bytes every pass
        // (the allocator bench's warm traces ran up to 30 times slower).
        if self.storage.bytes_allocated() >= self.reserved_peak
            && self.could_gather(size)
            && room.make_room(self, size, RoomFor::Gather)
            && let Some(handle) = self.reserve_held(size)
        {
            return Ok(handle);
        }
        if self.storage.bytes_allocated() >= self.reserved_peak {
            self.release_empty_elsewhere(size);
        }
        let now = self.reservations;
        let mut spilled = None;
        let mut spilled_cap = None;
        let mut spilled_from = None;
        for position in 0..self.dynamic.len() {
            let pool = &mut self.dynamic[position];
            if !pool.accept(size) {
                continue;
            }
            // A pool the reservation spilled to reports the cap that made it spill.
            let cap = pool.cap().or(spilled_cap);
            let mut storage = Observed {
                storage: &mut self.storage,
                log: &mut self.log,
                pool: position,
            };
            match pool.grow(&mut storage, size, now) {
                Ok(handle) => {
                    self.reserved_peak = self.reserved_peak.max(self.storage.bytes_allocated());
                    if let Some(from) = spilled_from {
                        self.log.push(MemoryEvent::Spill {
                            from,
                            to: position,
                            bytes: size,
                        });
                    }
                    return Ok(handle);
                }
                Err(GrowError::Capacity { .. }) if spilled.is_some() => {}
                Err(error @ GrowError::Capacity { .. }) => {
                    spilled_cap = cap;
                    spilled_from = Some(position);
                    self.warn_spill(position, size);
                    spilled = Some(grow_error(error, size, position as u8, cap));
                }
                Err(error) => {
                    let error = grow_error(error, size, position as u8, cap);
                    // Out of memory must surface as such, so `reserve` cleans up and
                    // retries; other errors defer to an earlier pool's capacity error.
                    return Err(match spilled {
                        Some(spilled) if !error.is_out_of_memory() => spilled,
                        _ => error,
                    });
                }
            }
        }
        if let Some(spilled) = spilled {
            return Err(spilled);
        }
        // Under the largest accepted size, yet refused: the accepted sizes have a gap.
        Err(ReserveError::NoPoolAccepts {
            requested: size,
            accepted: self.accepted_ranges(),
        })
    }

    /// Before a page that would raise the memory's high-water mark: gives back the
    /// empty pages of the sliced and adaptive pools that do not take `size` (none of
    /// them could serve it; whole-page pools follow their own idle rule),
    /// so the memory trades idle capacity for the new page instead of adding to it (the
    /// main job's chain grew its large-slice pool beside a small-slice page its warm-up
    /// had left empty). Only pages already known empty go, without a sweep: O(pages).
    /// Below the mark nothing goes, so a warm loop never gives back what it re-makes.
    fn release_empty_elsewhere(&mut self, size: u64) {
        let mut released = false;
        for (place, pool) in self.dynamic.iter_mut().enumerate() {
            if pool.accept(size) {
                continue;
            }
            let mut storage = Observed {
                storage: &mut self.storage,
                log: &mut self.log,
                pool: place,
            };
            released |= pool.release_empty_pages(&mut storage);
        }
        if released {
            tracing::debug!(
                memory = self.name.as_str(),
                requested = size,
                "empty pages given back before a page past the high-water mark"
            );
            self.storage.flush();
        }
    }

    /// A slice from the free blocks an accepting dynamic pool already holds.
    pub(super) fn reserve_held(&mut self, size: u64) -> Option<ManagedMemoryHandle> {
        let now = self.reservations;
        // Room already held in any accepting pool comes before a new page anywhere
        // (upstream grew the first accepting pool while a later one had room).
        for (place, pool) in self.dynamic.iter_mut().enumerate() {
            let mut storage = Observed {
                storage: &mut self.storage,
                log: &mut self.log,
                pool: place,
            };
            if pool.accept(size)
                && let Some(handle) = pool.try_reserve(&mut storage, size, now)
            {
                return Some(handle);
            }
        }
        None
    }

    /// Whether some accepting dynamic pool holds enough free bytes in holes to serve
    /// `size` once they are gathered.
    pub fn could_gather(&self, size: u64) -> bool {
        self.dynamic
            .iter()
            .any(|pool| pool.accept(size) && pool.could_gather(size))
    }

    /// The sizes some dynamic pool accepts and the largest page allows, as inclusive
    /// ranges, ascending, merged where they overlap or touch.
    pub(super) fn accepted_ranges(&self) -> Vec<(u64, u64)> {
        let largest = self.largest_page;
        let mut ranges: Vec<(u64, u64)> = self
            .dynamic
            .iter()
            .flat_map(DynamicPool::accepted_ranges)
            .filter(|&(low, _)| low <= largest)
            .map(|(low, high)| (low, high.min(largest)))
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (low, high) in ranges {
            match merged.last_mut() {
                Some(last) if low <= last.1.saturating_add(1) => last.1 = last.1.max(high),
                _ => merged.push((low, high)),
            }
        }
        merged
    }

    pub(super) fn warn_spill(&mut self, position: usize, size: u64) {
        if !std::mem::replace(&mut self.warned_full[position], true) {
            tracing::warn!(
                memory = %self.name,
                pool = position,
                size,
                "pool at capacity: spilling to the next pool that accepts the size"
            );
        }
    }

    /// Restates an out-of-memory error with the whole memory's numbers and the bytes its
    /// owner still reports as pending release.
    pub(super) fn explain(&self, error: ReserveError, bytes_pending_release: u64) -> ReserveError {
        match error {
            ReserveError::OutOfMemory {
                requested,
                cap,
                source,
                ..
            } => {
                let usage = self.memory_usage();
                ReserveError::OutOfMemory {
                    requested,
                    bytes_in_use: usage.bytes_in_use,
                    bytes_reserved: usage.bytes_reserved,
                    largest_free_slice: self.largest_free_slice(),
                    cap,
                    bytes_pending_release,
                    source,
                }
            }
            other => other,
        }
    }
}

fn grow_error(error: GrowError, requested: u64, pool: u8, cap: Option<u64>) -> ReserveError {
    match error {
        GrowError::Capacity {
            capacity,
            bytes_in_use,
            bytes_reserved,
            largest_free_slice,
        } => ReserveError::PoolCapacityExceeded {
            requested,
            pool,
            capacity,
            bytes_in_use,
            bytes_reserved,
            largest_free_slice,
        },
        GrowError::TooManyPages { limit } => ReserveError::TooManyPages {
            requested,
            pool,
            limit,
        },
        GrowError::Storage(source @ IoError::OutOfMemory { .. }) => ReserveError::OutOfMemory {
            requested,
            bytes_in_use: 0,
            bytes_reserved: 0,
            largest_free_slice: 0,
            cap,
            bytes_pending_release: 0,
            source,
        },
        GrowError::Storage(source) => ReserveError::Storage { requested, source },
    }
}
