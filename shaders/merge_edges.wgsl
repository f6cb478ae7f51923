// Merges the edge words of an unaligned write into its target, on the GPU and in queue
// order (wgpu copies whole 4-byte words only). Each edge is (word index in the target
// binding, mask of the bytes the write covers, the word as written): the covered bytes
// take the new value, the others keep what the target held.

struct Edge {
    word: u32,
    mask: u32,
    value: u32,
    unused: u32,
}

@group(0) @binding(0) var<storage, read_write> target_words: array<u32>;
@group(0) @binding(1) var<storage, read_write> edges: array<Edge>;

@compute @workgroup_size(1)
fn merge_edges() {
    for (var i = 0u; i < arrayLength(&edges); i = i + 1u) {
        let edge = edges[i];
        let old = target_words[edge.word];
        target_words[edge.word] = (old & ~edge.mask) | (edge.value & edge.mask);
    }
}
