//! Field scenarios (`/work/shared/cases/field-scenarios.md`), one module per scenario,
//! each test named by its id. They run the `memory_management` layer on host memory
//! ([`fake::FakeStorage`] or `BytesStorage`) and assert the outcome a correct library
//! gives.

mod fake;

mod c01_drifting_sizes;
mod c02_stale_location_after_cleanup;
mod c03_cached_pages_block_a_fitting_allocation;
mod c17_small_live_slices_pin_a_big_free_region;
mod c20_useful_out_of_memory_text;
mod c23_odd_alignments;
mod c25_failed_placement_stays_cheap;
mod c29_free_order_does_not_matter;
mod c31_device_allocation_failure_is_a_result;

// Tests of `MemoryManagement::install_memory_pools`. To disable while src/ does not
// build it, put `#[cfg(any())]` on this line.
mod install_memory_pools;

mod adaptive_pages_under_pressure;

pub mod common;
