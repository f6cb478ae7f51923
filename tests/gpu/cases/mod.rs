//! Field scenarios from `cases/field-scenarios.md`, one file each.

mod c07_zero_size_binding;
mod c09_device_limits;
