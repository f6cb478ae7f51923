//! wgpu-memory in the browser: the example page's entry points.
