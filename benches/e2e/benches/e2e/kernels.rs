//! The two WGSL kernels every side runs, as the same text: our `Kernel`, the peer's
//! precompiled kernel and bare wgpu's shader module all compile these strings.

/// Words in each ping-pong buffer (1 KiB).
pub const PING_WORDS: u32 = 256;

/// Bytes in each ping-pong buffer.
pub const PING_BYTES: usize = PING_WORDS as usize * 4;

/// One workgroup of 64 lanes: `dst[i] = src[i] + 1` over the 256 words of a 1 KiB buffer.
/// After `n` dispatches alternating between two zeroed buffers, the last one written holds
/// `n` in every word, which is how each side checks the chain ran.
///
/// `src` is declared `read_write` although the kernel only reads it: a pooled side may
/// place both handles in one page (one wgpu buffer), and wgpu refuses a buffer bound
/// read-only and read-write in the same dispatch.
pub const PING: &str = r#"
@group(0) @binding(0) var<storage, read_write> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn ping(@builtin(local_invocation_index) lane: u32) {
    for (var i = lane; i < 256u; i += 64u) {
        dst[i] = src[i] + 1u;
    }
}
"#;

/// Entry point of [`PING`].
pub const PING_ENTRY: &str = "ping";

/// Lanes per workgroup of [`FILL`].
pub const FILL_LANES: u32 = 256;

/// Writes a pattern into every word of its one binding (`arrayLength` bounds it, so a
/// binding larger than the dispatch is only partly written, never overrun).
pub const FILL: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&data)) {
        data[id.x] = id.x * 2654435761u;
    }
}
"#;

/// Entry point of [`FILL`].
pub const FILL_ENTRY: &str = "fill";

/// Workgroups (along x) that [`FILL`] needs to cover `size` bytes.
pub fn fill_workgroups(size: u64) -> u32 {
    let words = size.div_ceil(4);
    u32::try_from(words.div_ceil(u64::from(FILL_LANES))).expect("fill size fits one dimension")
}

/// The word [`FILL`] leaves at index `i`.
pub fn fill_word(i: u32) -> u32 {
    i.wrapping_mul(2_654_435_761)
}
