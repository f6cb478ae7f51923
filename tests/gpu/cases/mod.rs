//! Field scenarios from `cases/field-scenarios.md`, one file each.

mod c04_writes_keep_their_order;
mod c05_padded_upload;
mod c07_zero_size_binding;
mod c08_zero_size_reads_in_a_batch;
mod c09_device_limits;
mod c10_staging_bounded_when_reads_grow;
mod c11_pending_uploads_bounded;
mod c12_reads_with_nobody_polling;
mod c13_mapped_staging_not_reused;
