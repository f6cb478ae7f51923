// Tiled f32 matrix product C = A * B, row-major: A is M x K, B is K x N, C is M x N.
//
// The host prepends the sizes as constants (`const M: u32 = ...;` and so on), so loop
// bounds are uniform and every workgroup barrier is reached by the whole workgroup.
//
// Each workgroup of 16 x 16 threads computes one 64 x 64 block of C, each thread a 4 x 4
// block held in registers. The K dimension is walked 16 at a time: the workgroup stages a
// 64 x 16 block of A and a 16 x 64 block of B in workgroup memory, then every thread
// multiplies its 4 rows of A by its 4 columns of B from there. Elements outside the
// matrices load as zeros and are never stored, so any size works.
//
// All bindings are read_write: slices of one page may be bound together, and wgpu
// refuses one buffer bound both read-only and writable in one dispatch.

const BLOCK: u32 = 64u;
const STEP: u32 = 16u;
const THREADS: u32 = 256u;

@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

var<workgroup> tile_a: array<array<f32, 16>, 64>;
var<workgroup> tile_b: array<array<f32, 64>, 16>;

@compute @workgroup_size(16, 16, 1)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_id) local: vec3<u32>,
    @builtin(local_invocation_index) thread: u32,
) {
    let block_row = group.y * BLOCK;
    let block_col = group.x * BLOCK;
    var acc: array<array<f32, 4>, 4>;
    let steps = (K + STEP - 1u) / STEP;
    for (var t = 0u; t < steps; t = t + 1u) {
        // 1024 elements of each block, four per thread.
        for (var i = 0u; i < 4u; i = i + 1u) {
            let e = thread + i * THREADS;
            let a_row = block_row + e / STEP;
            let a_col = t * STEP + e % STEP;
            var a_value = 0.0;
            if (a_row < M && a_col < K) {
                a_value = a[a_row * K + a_col];
            }
            tile_a[e / STEP][e % STEP] = a_value;
            let b_row = t * STEP + e / BLOCK;
            let b_col = block_col + e % BLOCK;
            var b_value = 0.0;
            if (b_row < K && b_col < N) {
                b_value = b[b_row * N + b_col];
            }
            tile_b[e / BLOCK][e % BLOCK] = b_value;
        }
        workgroupBarrier();
        for (var k = 0u; k < STEP; k = k + 1u) {
            var lhs: array<f32, 4>;
            var rhs: array<f32, 4>;
            for (var i = 0u; i < 4u; i = i + 1u) {
                lhs[i] = tile_a[local.y * 4u + i][k];
                rhs[i] = tile_b[k][local.x * 4u + i];
            }
            for (var i = 0u; i < 4u; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i][j] = acc[i][j] + lhs[i] * rhs[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i = i + 1u) {
        let row = block_row + local.y * 4u + i;
        for (var j = 0u; j < 4u; j = j + 1u) {
            let col = block_col + local.x * 4u + j;
            if (row < M && col < N) {
                c[row * N + col] = acc[i][j];
            }
        }
    }
}
