// Tiled f32 matrix product C = A * B, row-major: A is M x K, B is K x N, C is M x N.
//
// The host prepends the sizes as constants (`const M: u32 = ...;` and so on), so loop
// bounds are uniform and every workgroup barrier is reached by the whole workgroup.
// Each workgroup computes one TILE x TILE block of C, staging TILE x TILE blocks of A and
// B through workgroup memory; edges outside the matrices load zeros, so any size works.
//
// All bindings are read_write: slices of one page may be bound together, and wgpu
// refuses one buffer bound both read-only and writable in one dispatch.

const TILE: u32 = 16u;

@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

var<workgroup> tile_a: array<array<f32, 16>, 16>;
var<workgroup> tile_b: array<array<f32, 16>, 16>;

@compute @workgroup_size(16, 16, 1)
fn main(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_id) local: vec3<u32>,
) {
    let row = group.y * TILE + local.y;
    let col = group.x * TILE + local.x;
    var acc = 0.0;
    let tiles = (K + TILE - 1u) / TILE;
    for (var t = 0u; t < tiles; t = t + 1u) {
        let a_col = t * TILE + local.x;
        let b_row = t * TILE + local.y;
        var a_value = 0.0;
        if (row < M && a_col < K) {
            a_value = a[row * K + a_col];
        }
        var b_value = 0.0;
        if (b_row < K && col < N) {
            b_value = b[b_row * N + col];
        }
        tile_a[local.y][local.x] = a_value;
        tile_b[local.y][local.x] = b_value;
        workgroupBarrier();
        for (var i = 0u; i < TILE; i = i + 1u) {
            acc = acc + tile_a[local.y][i] * tile_b[i][local.x];
        }
        workgroupBarrier();
    }
    if (row < M && col < N) {
        c[row * N + col] = acc;
    }
}
