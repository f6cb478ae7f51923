//! [`MemoryManagement`]: routes reservations to pools and bindings to slices.

use super::MemoryDeviceProperties;
use super::config::MemoryPoolOptions;
use super::error::ReserveError;
use super::error_graph::{Claim, ErrorGraph, FailureId};
use super::install_error::InstallMemoryPoolsError;
use super::layout::{self, MAX_POOLS, PoolSpec};
use super::options::MemoryManagementOptions;
use super::page_events::{MemoryEvent, Observed, PageLog};
use super::pending::{NothingPending, PendingRelease};
use super::pool::page_map::page_id;
use super::pool::slices::{SliceTable, Sweep, not_found};
use super::pool::whole_page::{Release, Reuse, WholePagePool};
use super::pool::{DynamicPool, GrowError, align_down, align_up};
use super::taint::Taint;
use super::usage::format_bytes;
use crate::storage::{ComputeStorage, StorageHandle};
use cubecl_runtime::memory_management::{
    DEDICATED_POOL_POS, ManagedMemoryBinding, ManagedMemoryHandle, ManagedMemoryId,
    MemoryAllocationMode, MemoryConfiguration, MemoryLocation, MemoryPoolKind, MemoryPoolsReport,
    MemoryUsage, PERSISTENT_POOL_POS,
};
use cubecl_runtime::server::IoError;
use std::ops::Range;

/// Which pages a cleanup gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// What each pool's own policy says is unused: exclusive pages idle for their
    /// `dealloc_period`, freed dedicated allocations. Runs at the start of every
    /// reservation; cheap.
    Periodic,
    /// Every page that holds no live slice, in every pool; then the storage is flushed.
    Explicit,
}

/// Reserves slices of storage pages and keeps track of them: one memory (the main
/// device memory, or the staging memory) of one device.
///
/// A reservation goes, by the allocation mode in force, to the persistent pool, to a
/// dedicated allocation, or to the first dynamic pool of the layout that accepts its size.
/// The returned [`ManagedMemoryHandle`] keeps the slice alive; once every clone of it and
/// every binding made from it is dropped, the slice is free for reuse.
pub struct MemoryManagement<S: ComputeStorage> {
    name: String,
    storage: S,
    properties: MemoryDeviceProperties,
    /// [`largest_page`](Self::largest_page), computed once: every reservation checks it.
    largest_page: u64,
    /// The largest reservation some dynamic pool accepts, at most `largest_page`: what a
    /// [`ReserveError::BufferTooBig`] of the dynamic pools names. Set with the layout.
    dynamic_limit: u64,
    /// Whether some dynamic pool releases pages on a timer (exclusive pages with a
    /// period): only then, or while dedicated pages are held, does a reservation run
    /// the periodic cleanup. Set with the layout.
    timed_release: bool,
    dynamic: Vec<DynamicPool>,
    persistent: WholePagePool,
    dedicated: WholePagePool,
    base_mode: MemoryAllocationMode,
    windows: Vec<MemoryAllocationMode>,
    /// Reservations so far: the clock of `dealloc_period`.
    reservations: u64,
    /// Pools that already logged a spill (one warning per pool per layout).
    warned_full: Vec<bool>,
    /// The failures the slices of this memory carry.
    graph: ErrorGraph,
    /// See [`MemoryManagementOptions::transient`].
    transient: bool,
    /// Page sizes, and the page and spill events an owner observes
    /// ([`observe_pages`](Self::observe_pages)).
    log: PageLog,
}

impl<S: ComputeStorage> core::fmt::Debug for MemoryManagement<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemoryManagement")
            .field("name", &self.name)
            .field("pools", &self.dynamic.len())
            .finish_non_exhaustive()
    }
}

impl<S: ComputeStorage> MemoryManagement<S> {
    /// A memory over `storage`, laid out by `config` for a device with `properties`
    /// (largest page and alignment, in bytes), unless `options` carries an explicit layout.
    ///
    /// An explicit layout of more than 254 pools cannot be addressed by a handle, and one
    /// of no pool would refuse every reservation; either is refused with an error log and
    /// the configuration's preset is used instead
    /// ([`install_memory_pools`](Self::install_memory_pools) returns an error instead).
    pub fn from_configuration(
        storage: S,
        properties: &MemoryDeviceProperties,
        config: MemoryConfiguration,
        options: MemoryManagementOptions,
    ) -> Self {
        let specs = match options.pools {
            Some(pools) if (1..=MAX_POOLS).contains(&pools.len()) => explicit_specs(pools),
            Some(pools) => {
                tracing::error!(
                    pools = pools.len(),
                    limit = MAX_POOLS,
                    "explicit layout refused: it needs 1 to {MAX_POOLS} pools; using the preset"
                );
                layout::preset(&config, properties)
            }
            None => layout::preset(&config, properties),
        };
        let alignment = properties.alignment.max(1);
        let max_page = properties.max_page_size;
        let largest_page = align_down(max_page, alignment);
        let dynamic = layout::instantiate(&specs, properties, options.transient);
        Self {
            log: PageLog::new(&options.name),
            name: options.name,
            storage,
            properties: properties.clone(),
            largest_page,
            dynamic_limit: dynamic_limit(&dynamic, largest_page),
            timed_release: dynamic.iter().any(DynamicPool::releases_on_a_timer),
            warned_full: vec![false; specs.len()],
            dynamic,
            transient: options.transient,
            persistent: WholePagePool::new(
                PERSISTENT_POOL_POS,
                MemoryPoolKind::Persistent,
                max_page,
                alignment,
                Reuse::Exact,
                Release::Explicit,
            ),
            dedicated: WholePagePool::new(
                DEDICATED_POOL_POS,
                MemoryPoolKind::Direct,
                max_page,
                alignment,
                Reuse::Exact,
                Release::Immediately,
            ),
            base_mode: options.mode,
            windows: Vec::new(),
            reservations: 0,
            graph: ErrorGraph::default(),
        }
    }

    /// Replaces the dynamic pools by `pools` (an explicit layout; see
    /// [`install_configuration`](Self::install_configuration) for a preset).
    ///
    /// Runs an explicit cleanup first (every free page goes back to the driver). The new
    /// pools start with fresh high-water marks. The persistent and dedicated pools are
    /// untouched.
    ///
    /// # Errors
    /// - [`InstallMemoryPoolsError::PoolsInUse`] when live slices remain in the dynamic
    ///   pools; the old layout stays in place, untouched.
    /// - [`InstallMemoryPoolsError::TooManyPools`] for more than 254 pools.
    /// - [`InstallMemoryPoolsError::EmptyLayout`] for no pool at all.
    pub fn install_memory_pools(
        &mut self,
        pools: Vec<MemoryPoolOptions>,
    ) -> Result<(), InstallMemoryPoolsError> {
        if pools.is_empty() {
            return Err(InstallMemoryPoolsError::EmptyLayout);
        }
        if pools.len() > MAX_POOLS {
            return Err(InstallMemoryPoolsError::TooManyPools {
                count: pools.len(),
                limit: MAX_POOLS,
            });
        }
        self.install(explicit_specs(pools))
    }

    /// Replaces the dynamic pools by the preset layout of `config`, as
    /// [`install_memory_pools`](Self::install_memory_pools) does.
    ///
    /// # Errors
    /// [`InstallMemoryPoolsError::PoolsInUse`] when live slices remain.
    pub fn install_configuration(
        &mut self,
        config: MemoryConfiguration,
    ) -> Result<(), InstallMemoryPoolsError> {
        let specs = layout::preset(&config, &self.properties);
        self.install(specs)
    }

    fn install(&mut self, specs: Vec<PoolSpec>) -> Result<(), InstallMemoryPoolsError> {
        self.cleanup(Cleanup::Explicit);
        let usage = self
            .dynamic
            .iter()
            .fold(MemoryUsage::default(), |usage, pool| {
                usage.combine(pool.report().usage)
            });
        // A live zero-size slice blocks too, though it counts no bytes.
        if usage.number_allocs > 0 {
            let bytes_in_use = usage.bytes_in_use;
            return Err(InstallMemoryPoolsError::PoolsInUse {
                bytes_in_use,
                allocations: usage.number_allocs,
            });
        }
        self.warned_full = vec![false; specs.len()];
        self.dynamic = layout::instantiate(&specs, &self.properties, self.transient);
        self.dynamic_limit = dynamic_limit(&self.dynamic, self.largest_page);
        self.timed_release = self.dynamic.iter().any(DynamicPool::releases_on_a_timer);
        Ok(())
    }

    /// The name given in the options.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device properties the layout was derived from.
    pub fn properties(&self) -> &MemoryDeviceProperties {
        &self.properties
    }

    /// The storage the pages live in.
    pub fn storage(&mut self) -> &mut S {
        &mut self.storage
    }

    /// Opens or closes an allocation-mode window. Windows nest: `Persistent` and
    /// `Dedicated` open one, `Auto` closes the innermost (and does nothing when none is
    /// open); the innermost open window decides where reservations go.
    pub fn mode(&mut self, mode: MemoryAllocationMode) {
        match mode {
            MemoryAllocationMode::Auto => {
                self.windows.pop();
            }
            other => self.windows.push(other),
        }
    }

    /// The mode in force: the innermost window, else the base mode.
    pub fn current_mode(&self) -> MemoryAllocationMode {
        self.windows.last().copied().unwrap_or(self.base_mode)
    }

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
        self.reservations += 1;
        // Nothing to release on a timer in most layouts: skip the walk over the pools.
        if self.timed_release || self.dedicated.holds_pages() {
            self.cleanup(Cleanup::Periodic);
        }
        let result = match self.reserve_routed(size) {
            Err(error) if error.is_out_of_room() => {
                self.reserve_after_cleanup(size, error, pending)
            }
            result => result,
        };
        self.trace_reserve(size, &result);
        result
    }

    /// A `tracing` event per reservation: `memory`, `size`, the `pool` that served it and
    /// the `outcome` ("reserved" or the error). Out of memory is a warning; the rest are
    /// at trace level, so a program without a subscriber pays only the level check.
    fn trace_reserve(&self, size: u64, result: &Result<ManagedMemoryHandle, ReserveError>) {
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

    /// The place in [`page_map`](Self::page_map) of the pool a handle's location names
    /// (`pool` as `MemoryLocation` stores it).
    pub fn place(&self, pool: u8) -> usize {
        let (persistent, dedicated) = self.whole_page_places();
        match pool {
            PERSISTENT_POOL_POS => persistent,
            DEDICATED_POOL_POS => dedicated,
            position => usize::from(position),
        }
    }

    /// The number of pools in [`page_map`](Self::page_map): the dynamic pools, then the
    /// persistent and the dedicated pool.
    pub fn pool_count(&self) -> usize {
        self.dynamic.len() + 2
    }

    /// The kind of the pool at `place` in [`page_map`](Self::page_map) order (as its
    /// report states it), or `None` past the last pool.
    pub fn pool_kind(&self, place: usize) -> Option<MemoryPoolKind> {
        let (persistent, dedicated) = self.whole_page_places();
        match place {
            _ if place == persistent => Some(self.persistent.report().kind),
            _ if place == dedicated => Some(self.dedicated.report().kind),
            _ => self.dynamic.get(place).map(|pool| pool.report().kind),
        }
    }

    /// The places of the persistent and dedicated pools in [`page_map`](Self::page_map):
    /// right after the dynamic pools.
    fn whole_page_places(&self) -> (usize, usize) {
        (self.dynamic.len(), self.dynamic.len() + 1)
    }

    /// Starts (`true`) or stops keeping the [`MemoryEvent`]s of this memory (pages made
    /// and given back, spills) for [`take_events`](Self::take_events). Stopping drops the
    /// events kept. Off by default; a memory that keeps events still holds at most
    /// [`MAX_MEMORY_EVENTS`](super::MAX_MEMORY_EVENTS) between two takes.
    pub fn observe_pages(&mut self, on: bool) {
        self.log.observe(on);
    }

    /// The events kept since the last call, oldest first, and how many older ones were
    /// dropped because the log was full.
    pub fn take_events(&mut self) -> (Vec<MemoryEvent>, u64) {
        self.log.take()
    }

    /// Where the slice of `binding` lies: its pool's place in [`page_map`](Self::page_map),
    /// the page id and the offset in bytes.
    ///
    /// # Errors
    /// [`IoError::NotFound`] for a binding whose slice is gone.
    pub fn locate(&self, binding: &ManagedMemoryBinding) -> Result<(usize, u64, u64), IoError> {
        let storage = self.get_storage(binding)?;
        let place = self.place(binding.descriptor().location().pool);
        Ok((place, page_id(&storage.id), storage.utilization.offset))
    }

    /// The out-of-room path: an explicit cleanup (it also sweeps every dropped handle the
    /// bounded sweeps have not seen yet) and a retry; then, if the owner has bytes pending
    /// release, a wait for them, another cleanup and a last retry.
    #[cold]
    fn reserve_after_cleanup(
        &mut self,
        size: u64,
        error: ReserveError,
        pending: &mut impl PendingRelease,
    ) -> Result<ManagedMemoryHandle, ReserveError> {
        tracing::debug!(memory = %self.name, size, %error, "out of room: cleaning up and retrying");
        self.cleanup(Cleanup::Explicit);
        let mut result = self.reserve_routed(size);
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
            result = self.reserve_routed(size);
        }
        result.map_err(|error| self.explain(error, pending.bytes_pending_release()))
    }

    fn reserve_routed(&mut self, size: u64) -> Result<ManagedMemoryHandle, ReserveError> {
        let now = self.reservations;
        let largest = self.largest_page();
        let (persistent, dedicated) = self.whole_page_places();
        let (pool, position, place) = match self.current_mode() {
            MemoryAllocationMode::Persistent => {
                (&mut self.persistent, PERSISTENT_POOL_POS, persistent)
            }
            MemoryAllocationMode::Dedicated => (&mut self.dedicated, DEDICATED_POOL_POS, dedicated),
            MemoryAllocationMode::Auto => return self.reserve_dynamic(size),
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
    fn reserve_dynamic(&mut self, size: u64) -> Result<ManagedMemoryHandle, ReserveError> {
        let now = self.reservations;
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
                return Ok(handle);
            }
        }
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

    /// The sizes some dynamic pool accepts and the largest page allows, as inclusive
    /// ranges, ascending, merged where they overlap or touch.
    fn accepted_ranges(&self) -> Vec<(u64, u64)> {
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

    fn warn_spill(&mut self, position: usize, size: u64) {
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
    fn explain(&self, error: ReserveError, bytes_pending_release: u64) -> ReserveError {
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

    /// The largest page this memory makes, in bytes: the device's largest page rounded
    /// down to the alignment. No reservation whose aligned size exceeds it can succeed.
    pub fn largest_page(&self) -> u64 {
        self.largest_page
    }

    /// The largest free slice of any page of any pool, in bytes.
    pub fn largest_free_slice(&self) -> u64 {
        self.dynamic
            .iter()
            .map(DynamicPool::largest_free)
            .chain([
                self.persistent.largest_free(),
                self.dedicated.largest_free(),
            ])
            .max()
            .unwrap_or(0)
    }

    /// Gives pages back to the storage: what each pool's policy says is unused
    /// ([`Cleanup::Periodic`]) or every page without a live slice ([`Cleanup::Explicit`],
    /// followed by a storage flush so the bytes really go back).
    pub fn cleanup(&mut self, cleanup: Cleanup) {
        let now = self.reservations;
        match cleanup {
            Cleanup::Periodic => {
                // Flushed only when it gave pages back: every other release flushes
                // where it happens, so there is nothing else pending.
                if self.cleanup_periodic() {
                    self.storage.flush();
                }
            }
            Cleanup::Explicit => {
                let (persistent, dedicated) = self.whole_page_places();
                for (place, pool) in self.dynamic.iter_mut().enumerate() {
                    let mut storage = Observed {
                        storage: &mut self.storage,
                        log: &mut self.log,
                        pool: place,
                    };
                    pool.release_free_pages(&mut storage, now);
                }
                let mut storage = Observed {
                    storage: &mut self.storage,
                    log: &mut self.log,
                    pool: persistent,
                };
                self.persistent.release_free_pages(&mut storage, now);
                storage.pool = dedicated;
                self.dedicated.release_free_pages(&mut storage, now);
                self.storage.flush();
            }
        }
        self.settle();
    }

    /// Frees the slice of allocation `id` at `location` now, if nothing but the memory
    /// holds it any more: the O(1) counterpart of the sweeps that otherwise find dropped
    /// handles a few at a time. For an owner that knows when it let go of an allocation
    /// (a wrapper handle whose last clone is being dropped: read `id` and `location` from
    /// its `ManagedMemoryHandle`'s descriptor, drop the handle, then call this). Returns
    /// whether the slice was freed: `false` when the location names no slice of this
    /// memory, the slot holds another allocation (a stale location), or some handle or
    /// binding of the allocation is still alive (in-flight work holding a binding: a
    /// later sweep frees it once that binding is dropped).
    ///
    /// # Complexity
    /// O(1): one slot is looked at, and its block returned to the placement index.
    pub fn release(&mut self, id: ManagedMemoryId, location: MemoryLocation) -> bool {
        if location.init == 0 {
            return false;
        }
        let now = self.reservations;
        let sweep = Sweep::Slot {
            index: location.slice,
            id,
        };
        let Ok(before) = self.table_mut(location.pool).map(|table| table.live()) else {
            return false;
        };
        match location.pool {
            PERSISTENT_POOL_POS => self.persistent.sweep(sweep, now),
            DEDICATED_POOL_POS => self.dedicated.sweep(sweep, now),
            position => {
                let mut storage = Observed {
                    storage: &mut self.storage,
                    log: &mut self.log,
                    pool: position as usize,
                };
                self.dynamic[position as usize].sweep(&mut storage, sweep, now)
            }
        }
        self.table_mut(location.pool)
            .is_ok_and(|table| table.live() < before)
    }

    /// Uncounts the failures of every slice released since the last call.
    fn settle(&mut self) {
        for pool in &mut self.dynamic {
            pool.slices_mut().settle(&mut self.graph);
        }
        self.persistent.slices_mut().settle(&mut self.graph);
        self.dedicated.slices_mut().settle(&mut self.graph);
    }

    /// The failures the slices of this memory carry. Slices released since the last
    /// cleanup or [`error_graph_mut`](Self::error_graph_mut) call still count; either
    /// settles them.
    pub fn error_graph(&self) -> &ErrorGraph {
        &self.graph
    }

    /// The error graph, to mint failures ([`ErrorGraph::insert`]) and record skipped
    /// launches ([`ErrorGraph::skipped`]).
    pub fn error_graph_mut(&mut self) -> &mut ErrorGraph {
        self.settle();
        &mut self.graph
    }

    /// Looks up whether `range` (offsets from the slice's start) of `binding`'s slice
    /// has a failure marked on it, and returns one such failure. `None` for clean bytes
    /// and for a binding that names no slice here.
    pub fn failure(&self, binding: &ManagedMemoryBinding, range: Range<u64>) -> Option<FailureId> {
        let table = self.table(binding).ok()?;
        table.find(binding).ok()?.taint.failure(&range)
    }

    /// Why the bytes `range` of `binding` cannot be trusted, if they cannot:
    /// [`Claim::Unallocated`] when the handle has no slice (its reservation failed, or
    /// the slice is gone), [`Claim::Failed`] when a failure claims any of the bytes.
    pub fn claim(&self, binding: &ManagedMemoryBinding, range: Range<u64>) -> Option<Claim> {
        let slice = self.table(binding).and_then(|table| table.find(binding));
        match slice {
            Err(_) => Some(Claim::Unallocated(binding.id())),
            Ok(slice) => slice
                .taint
                .failure(&range)
                .map(|failure| Claim::Failed(failure, binding.id())),
        }
    }

    /// Claims `range` of the allocation behind `binding` for `failure` (those bytes leave
    /// any other failure). Unknown bindings are ignored.
    pub fn taint(&mut self, binding: &ManagedMemoryBinding, range: Range<u64>, failure: FailureId) {
        self.with_taint(binding, |taint, graph| taint.taint(range, failure, graph));
    }

    /// Runs `change` on the taint of the slice behind `binding`, if it resolves.
    fn with_taint(
        &mut self,
        binding: &ManagedMemoryBinding,
        change: impl FnOnce(&mut Taint, &mut ErrorGraph),
    ) {
        // The graph is moved out for the call: the slice and the graph are both ours.
        let mut graph = std::mem::take(&mut self.graph);
        let location = binding.descriptor().location();
        if let Ok(table) = self.table_mut(location.pool)
            && let Ok(slice) = table.find_mut(binding)
        {
            change(&mut slice.taint, &mut graph);
        }
        self.graph = graph;
    }

    /// Clears the failure marks on `range` of `binding`'s slice, after work that
    /// succeeded wrote those bytes. Marks outside `range` stay. Does nothing for a
    /// binding that names no slice here.
    pub fn written(&mut self, binding: &ManagedMemoryBinding, range: Range<u64>) {
        self.with_taint(binding, |taint, graph| taint.written(range, graph));
    }

    /// Each pool's own release policy; returns whether any page went back (the caller
    /// flushes the storage).
    fn cleanup_periodic(&mut self) -> bool {
        let now = self.reservations;
        let (_, dedicated) = self.whole_page_places();
        let mut released = false;
        for (place, pool) in self.dynamic.iter_mut().enumerate() {
            let mut storage = Observed {
                storage: &mut self.storage,
                log: &mut self.log,
                pool: place,
            };
            released |= pool.cleanup_periodic(&mut storage, now);
        }
        let mut storage = Observed {
            storage: &mut self.storage,
            log: &mut self.log,
            pool: dedicated,
        };
        released | self.dedicated.cleanup_periodic(&mut storage, now)
    }

    fn table(&self, binding: &ManagedMemoryBinding) -> Result<&SliceTable, IoError> {
        let location = binding.descriptor().location();
        if location.init == 0 {
            return Err(not_found("the handle was never given a slice"));
        }
        match location.pool {
            PERSISTENT_POOL_POS => Ok(self.persistent.slices()),
            DEDICATED_POOL_POS => Ok(self.dedicated.slices()),
            position => self
                .dynamic
                .get(position as usize)
                .map(DynamicPool::slices)
                .ok_or_else(|| not_found("the handle names a pool this layout does not have")),
        }
    }

    fn table_mut(&mut self, location_pool: u8) -> Result<&mut SliceTable, IoError> {
        match location_pool {
            PERSISTENT_POOL_POS => Ok(self.persistent.slices_mut()),
            DEDICATED_POOL_POS => Ok(self.dedicated.slices_mut()),
            position => self
                .dynamic
                .get_mut(position as usize)
                .map(DynamicPool::slices_mut)
                .ok_or_else(|| not_found("the handle names a pool this layout does not have")),
        }
    }

    /// Gives the slice reserved under `reserved` to `assigned` (a handle minted up front
    /// by a client), with the stream `cursor`. `reserved` becomes stale.
    ///
    /// # Errors
    /// [`IoError::NotFound`] when `reserved` names no live slice, or when `assigned`
    /// already names another slice (a handle names one allocation: two slots holding it
    /// would keep each other alive for good). Binding a handle to its own slice only
    /// records the cursor.
    pub fn bind(
        &mut self,
        reserved: ManagedMemoryHandle,
        assigned: ManagedMemoryHandle,
        cursor: u64,
    ) -> Result<(), IoError> {
        let location = reserved.descriptor().location();
        if location.init == 0 {
            return Err(not_found("the reserved handle was never given a slice"));
        }
        // A handle minted for this reservation has no location yet.
        let rebind = assigned.descriptor().is_allocated();
        if rebind && assigned.descriptor().id != reserved.descriptor().id {
            return Err(not_found(
                "the assigned handle already names a slice: bind takes a handle minted for \
                 this reservation",
            ));
        }
        let binding = assigned.clone().binding();
        self.table_mut(location.pool)?
            .bind(reserved, assigned, cursor)?;
        if !rebind {
            // A new allocation on the slice: the old one's claims are not its bytes' story.
            self.with_taint(&binding, |taint, graph| taint.clear(graph));
        }
        Ok(())
    }

    /// The stream cursor recorded at bind time.
    ///
    /// # Errors
    /// [`IoError::NotFound`] when the binding names no live slice.
    pub fn get_cursor(&self, binding: &ManagedMemoryBinding) -> Result<u64, IoError> {
        Ok(self.table(binding)?.find(binding)?.cursor)
    }

    /// The page and range of the slice behind `binding`: the page's storage id, the
    /// slice's byte offset in the page, and its requested size in bytes.
    ///
    /// # Errors
    /// [`IoError::NotFound`] when the binding was never placed, its slice was released,
    /// or its location now holds another allocation (never another allocation's bytes).
    pub fn get_storage(&self, binding: &ManagedMemoryBinding) -> Result<StorageHandle, IoError> {
        Ok(self.table(binding)?.find(binding)?.storage.clone())
    }

    /// The storage resource of the slice behind `binding`, narrowed by `offset_start`
    /// bytes from its start and `offset_end` bytes from its end.
    ///
    /// # Errors
    /// [`IoError::NotFound`] as [`get_storage`](Self::get_storage);
    /// [`IoError::Unknown`] when the offsets exceed the slice's size.
    pub fn get_resource(
        &mut self,
        binding: &ManagedMemoryBinding,
        offset_start: Option<u64>,
        offset_end: Option<u64>,
    ) -> Result<S::Resource, IoError> {
        let handle = self.get_storage(binding)?;
        let (start, end) = (offset_start.unwrap_or(0), offset_end.unwrap_or(0));
        if start.saturating_add(end) > handle.size() {
            return Err(IoError::Unknown {
                description: format!(
                    "offsets {start} + {end} bytes exceed the slice's {} bytes",
                    handle.size()
                ),
                backtrace: Default::default(),
            });
        }
        self.storage
            .get(&handle.offset_start(start).offset_end(end))
    }

    /// Per-pool usage and high-water marks. Exact: slices whose handles were dropped
    /// since the last reservation already count as free.
    pub fn memory_report(&self) -> MemoryPoolsReport {
        MemoryPoolsReport {
            dynamic: self.dynamic.iter().map(DynamicPool::report).collect(),
            persistent: self.persistent.report(),
            dedicated: self.dedicated.report(),
        }
    }

    /// The usage of every pool together.
    pub fn memory_usage(&self) -> MemoryUsage {
        self.memory_report().usage()
    }

    /// The size of every page the storage has not yet given back, in bytes (what the
    /// storage's own `bytes_allocated` reports: a page released but not flushed counts).
    pub fn bytes_allocated(&self) -> u64 {
        self.storage.bytes_allocated()
    }
}

impl<S: ComputeStorage> MemoryManagement<S> {
    /// Every page of every pool and the live slices in each: the dynamic pools in layout
    /// order (`index` 0, 1, ...), then the persistent pool and the dedicated pool (the
    /// next two indices). Pools that hold no page are listed too.
    ///
    /// Read-only: it sweeps nothing and gives nothing back. A slice is live exactly when
    /// [`memory_report`](Self::memory_report) counts it, so the sums of a page map equal
    /// a report taken with no handle dropped in between (a handle dropped on another
    /// thread meanwhile can make them differ by that one allocation).
    ///
    /// # Complexity
    /// O(pages + slots of every pool's slice table).
    pub fn page_map(&self) -> Vec<super::PoolPages> {
        let dynamic = self.dynamic.len();
        self.dynamic
            .iter()
            .enumerate()
            .map(|(index, pool)| super::PoolPages {
                index,
                kind: pool.report().kind,
                pages: pool.page_map(),
            })
            .chain([
                super::PoolPages {
                    index: dynamic,
                    kind: self.persistent.report().kind,
                    pages: self.persistent.page_map(),
                },
                super::PoolPages {
                    index: dynamic + 1,
                    kind: self.dedicated.report().kind,
                    pages: self.dedicated.page_map(),
                },
            ])
            .collect()
    }
}

/// The largest reservation some pool of `dynamic` accepts, at most `largest_page` bytes.
fn dynamic_limit(dynamic: &[DynamicPool], largest_page: u64) -> u64 {
    dynamic
        .iter()
        .map(DynamicPool::max_accepted)
        .max()
        .unwrap_or(0)
        .min(largest_page)
}

fn explicit_specs(pools: Vec<MemoryPoolOptions>) -> Vec<PoolSpec> {
    pools.into_iter().map(PoolSpec::Options).collect()
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

impl<S: ComputeStorage> core::fmt::Display for MemoryManagement<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let report = self.memory_report();
        let usage = report.usage();
        writeln!(
            f,
            "{}: {} in use ({} allocations, {} padding) of {} reserved",
            self.name,
            format_bytes(usage.bytes_in_use),
            usage.number_allocs,
            format_bytes(usage.bytes_padding),
            format_bytes(usage.bytes_reserved)
        )?;
        let pools = report
            .dynamic
            .iter()
            .enumerate()
            .map(|(i, pool)| (format!("pool {i}"), pool))
            .chain([
                ("persistent".to_string(), &report.persistent),
                ("dedicated".to_string(), &report.dedicated),
            ]);
        for (name, pool) in pools {
            writeln!(f, "  {name}: {}", super::pool_line(pool))?;
        }
        Ok(())
    }
}
