//! WGSL kernels over `u32` words shared by the issue 11 tests, with their host models.

use wgpu_memory::Kernel;

/// Threads per workgroup of every kernel here.
pub const WORKGROUP: u64 = 64;

/// `y[i] = x[i] * 3 + 1` over the words both handles have.
pub const AFFINE: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < min(arrayLength(&x), arrayLength(&y))) { y[id.x] = x[id.x] * 3u + 1u; }
}
";

/// `x[i] = x[i] * 3 + 1` in place.
pub const AFFINE_IN_PLACE: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] * 3u + 1u; }
}
";

/// `y[i] = x[i]` over the words both handles have.
pub const COPY: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < min(arrayLength(&x), arrayLength(&y))) { y[id.x] = x[id.x]; }
}
";

/// `x[i] = x[i] + 1` in place.
pub const ADD_ONE: &str = "
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&x)) { x[id.x] = x[id.x] + 1u; }
}
";

/// A kernel that keeps the device busy: each word goes through `rounds` steps of a linear
/// congruential generator. Its run time grows with `rounds` (a constant in the source, so
/// no uniform is needed).
pub fn busy(rounds: u32) -> Kernel {
    let source = format!(
        "
const ROUNDS: u32 = {rounds}u;
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    if (id.x >= arrayLength(&x)) {{ return; }}
    var v = x[id.x];
    for (var round = 0u; round < ROUNDS; round = round + 1u) {{
        v = v * 1664525u + 1013904223u;
    }}
    x[id.x] = v;
}}
"
    );
    Kernel::new(format!("busy x{rounds}"), source, "main")
}

/// Workgroups that cover a handle of `bytes` bytes, one thread per word.
pub fn groups_for(bytes: u64) -> [u32; 3] {
    [(bytes / 4).div_ceil(WORKGROUP).max(1) as u32, 1, 1]
}

/// The words of `bytes` (a multiple of 4 long), little-endian.
pub fn words(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes(word.try_into().unwrap()))
}

/// The host model of `y[i] = f(x[i])` over the words both have: `y` changed in place.
pub fn map_words(x: &[u8], y: &mut [u8], f: impl Fn(u32) -> u32) {
    let results: Vec<u32> = words(x).map(f).collect();
    for (word, value) in y.chunks_exact_mut(4).zip(results) {
        word.copy_from_slice(&value.to_le_bytes());
    }
}
