//! The `model_churn` trace: text generation with a small transformer, as a web page
//! running a language model does it. Every step's sequence length is new, so most tensor
//! sizes are never seen twice: the pattern where a cache that reuses only one exact size
//! keeps making buffers, and a cache by size class earns its keep.

use crate::traces::{Builder, KIB, Rng, Trace};

/// Hidden width of the model (f32 values: 4 bytes each).
const HIDDEN: u64 = 768;
/// Transformer layers.
const LAYERS: usize = 12;
/// Attention heads.
const HEADS: u64 = 12;
/// Vocabulary: logits per token.
const VOCAB: u64 = 50_257;
/// Bytes of one f32.
const F32: u64 = 4;

/// How much of the trace to build.
#[derive(Clone, Copy)]
pub struct ChurnScale {
    /// Requests (prompts) served one after the other.
    pub requests: usize,
    /// Tokens generated per request after its prompt.
    pub tokens: usize,
}

pub const FULL: ChurnScale = ChurnScale {
    requests: 16,
    tokens: 48,
};

pub const TEST: ChurnScale = ChurnScale {
    requests: 2,
    tokens: 8,
};

/// Per request: a prompt of 8..=200 tokens (uniform), then `tokens` steps of one token.
/// A step that processes `q` tokens over `s` tokens in all (past + new) makes, per layer:
/// the fused query/key/value projection (`q * 3 * hidden`), the layer's key and value
/// cache (`s * hidden` each, kept until the next step makes the longer one, then the old
/// one is dropped), the attention scores (`heads * q * s`), the attention output
/// (`q * hidden`), the MLP's inner activation (`q * 4 * hidden`) and the layer's output
/// (`q * hidden`, which replaces the previous hidden state); then the logits
/// (`q * vocab`), read back and dropped. All in f32. The key/value caches go when the
/// request ends.
pub fn model_churn(scale: ChurnScale) -> Trace {
    let mut rng = Rng::new(0x5EED_00C4);
    let mut trace = Builder::new();
    for _ in 0..scale.requests {
        let prompt = rng.uniform(8, 200);
        // Per layer: the key and value caches of the previous step.
        let mut caches: Vec<Option<(u32, u32)>> = vec![None; LAYERS];
        let mut past = 0;
        for step in 0..=scale.tokens {
            let q = if step == 0 { prompt } else { 1 };
            let s = past + q;
            let mut hidden = trace.reserve(q * HIDDEN * F32);
            for cache in caches.iter_mut() {
                let qkv = trace.reserve(q * 3 * HIDDEN * F32);
                let key = trace.reserve(s * HIDDEN * F32);
                let value = trace.reserve(s * HIDDEN * F32);
                if let Some((old_key, old_value)) = cache.replace((key, value)) {
                    trace.release(old_key);
                    trace.release(old_value);
                }
                let scores = trace.reserve(HEADS * q * s * F32);
                let attention = trace.reserve(q * HIDDEN * F32);
                trace.release(qkv);
                trace.release(scores);
                let inner = trace.reserve(q * 4 * HIDDEN * F32);
                let out = trace.reserve(q * HIDDEN * F32);
                trace.release(inner);
                trace.release(attention);
                trace.release(hidden);
                hidden = out;
            }
            let logits = trace.reserve(q * VOCAB * F32);
            trace.release(hidden);
            trace.release(logits);
            past = s;
        }
        for (key, value) in caches.into_iter().flatten() {
            trace.release(key);
            trace.release(value);
        }
    }
    trace.finish(
        "model_churn",
        format!(
            "text generation, {LAYERS} layers of width {HIDDEN}: {} prompts of 8..200 \
             tokens, {} tokens each; key/value caches grow by {} KiB a token",
            scale.requests,
            scale.tokens,
            2 * LAYERS as u64 * HIDDEN * F32 / KIB
        ),
    )
}
