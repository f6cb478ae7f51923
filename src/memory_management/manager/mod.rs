//! [`MemoryManagement`]: routes reservations to pools and bindings to slices.
//!
//! - `reserve`: where a reservation goes, and the out-of-room path.
//! - `bindings`: the slice, range and failures behind a binding.
//! - `compact`: moving live slices to gather free bytes and empty pages.

mod bindings;
mod compact;
#[cfg(test)]
mod compact_rules_tests;
#[cfg(test)]
mod compact_tests;
#[cfg(test)]
mod compact_workload_tests;
mod fill;
#[cfg(test)]
mod growth_tests;
mod reserve;
#[cfg(test)]
pub(crate) mod test_memory;

use super::MemoryDeviceProperties;
use super::config::MemoryPoolOptions;
use super::error_graph::ErrorGraph;
use super::install_error::InstallMemoryPoolsError;
use super::layout::{self, MAX_POOLS, PoolSpec};
use super::options::MemoryManagementOptions;
use super::page_events::{MemoryEvent, Observed, PageLog};
use super::pool::page_map::page_id;
use super::pool::slices::Sweep;
use super::pool::whole_page::{Release, Reuse, WholePagePool};
use super::pool::{DynamicPool, align_down};
use super::usage::format_bytes;
use crate::storage::ComputeStorage;
use cubecl_runtime::memory_management::{
    DEDICATED_POOL_POS, ManagedMemoryBinding, ManagedMemoryId, MemoryAllocationMode,
    MemoryConfiguration, MemoryLocation, MemoryPoolKind, MemoryPoolsReport, MemoryUsage,
    PERSISTENT_POOL_POS,
};
use cubecl_runtime::server::IoError;

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
/// The returned [`ManagedMemoryHandle`](cubecl_runtime::memory_management::ManagedMemoryHandle) keeps the slice alive; once every clone of it and
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
    /// Ranges moved slices left, until the owner releases them (at most
    /// [`MAX_MOVES_PENDING`](super::MAX_MOVES_PENDING)).
    moved: Vec<compact::Left>,
    /// The most bytes the storage held after a dynamic pool grew: reservations gather
    /// holes only at this high-water mark.
    reserved_peak: u64,
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
            moved: Vec::new(),
            reserved_peak: 0,
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
        // The ranges moved slices left lie in the pools being replaced.
        self.moved.clear();
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

    /// The storage the pages live in, for lookups that change nothing (a read finding
    /// the buffers of its copies while it holds other borrows of the memory's owner).
    pub fn storage_ref(&self) -> &S {
        &self.storage
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

    /// As [`take_events`](Self::take_events), each event with its sequence number: one
    /// counter for every memory of the process, so the events of several memories sort
    /// into the order they happened.
    pub fn take_sequenced_events(&mut self) -> (Vec<(u64, MemoryEvent)>, u64) {
        self.log.take_sequenced()
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

    /// The largest page this memory makes, in bytes: the device's largest page rounded
    /// down to the alignment. No reservation whose aligned size exceeds it can succeed.
    pub fn largest_page(&self) -> u64 {
        self.largest_page
    }

    /// The smallest page a dynamic pool of this memory would make now, in bytes: a
    /// budget below it refuses every page these pools make (the persistent and dedicated
    /// pools serve only the explicit modes). `u64::MAX` for a layout of no pool.
    ///
    /// # Complexity
    /// O(pools).
    pub fn smallest_page(&self) -> u64 {
        self.dynamic
            .iter()
            .map(DynamicPool::smallest_page)
            .min()
            .unwrap_or(u64::MAX)
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
            writeln!(
                f,
                "  {name}: {}",
                super::pool_line_on(pool, Some(self.largest_page))
            )?;
        }
        Ok(())
    }
}
