//! Launching kernels: a kernel and what its WGSL says about its bindings, the dispatch
//! into the pending batch, and the pipelines and bind groups reused across launches.

pub(super) mod caches;
pub(super) mod kernel;
pub(super) mod launch;
pub(super) mod reflection;
