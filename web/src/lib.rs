//! wgpu-memory in the browser: the example page's entry points, for `web/www/index.html`
//! (built and served by `scripts/web-example.sh`).
//!
//! - [`run_matmul`]: multiplies two f32 matrices on the browser's WebGPU device through
//!   a client's pools with the tiled kernel of `shaders/matmul.wgsl`, checks every
//!   element against the CPU, and returns the memory summary and the memory timeline and
//!   page map as `examples/memory_viz` draws them.
//! - [`run_bench`]: wgpu-memory against bare wgpu on the same device (see `bench`).
//! - [`last_panic`]: the message of the first panic, which the page shows instead of wasm's
//!   "unreachable".

mod bench;
mod gpu;
mod matmul;

// The pictures are drawn by the code of `examples/memory_viz`, shared rather than copied.
// Its modules name each other from the crate's root (`crate::svg`), so they sit here; the
// parts the page does not draw (the command line's helpers) are unused.
#[allow(dead_code)]
#[path = "../../examples/memory_viz/axis.rs"]
mod axis;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/cvd.rs"]
mod cvd;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/legend.rs"]
mod legend;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/pages_svg.rs"]
mod pages_svg;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/peak_svg.rs"]
mod peak_svg;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/style.rs"]
mod style;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/svg.rs"]
mod svg;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/time_axis_svg.rs"]
mod time_axis_svg;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/timeline_key.rs"]
mod timeline_key;
#[allow(dead_code)]
#[path = "../../examples/memory_viz/timeline_svg.rs"]
mod timeline_svg;

use std::sync::Mutex;
use wasm_bindgen::prelude::*;

/// The message of the first panic (bounded: one message).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

// A panic inside a callback of the browser's (a map or an error scope answering) rejects
// no promise of ours, so the page would wait for ever: the hook tells the page itself.
#[wasm_bindgen(inline_js = "export function report_panic(message) {
    console.error(message);
    globalThis.dispatchEvent?.(new CustomEvent('wasm-panic', { detail: message }));
}")]
extern "C" {
    fn report_panic(message: &str);
}

// Where a long run stands, for the page's status line and the console.
#[wasm_bindgen(inline_js = "export function report_progress(message) {
    console.log(message);
    globalThis.dispatchEvent?.(new CustomEvent('wasm-progress', { detail: message }));
}")]
extern "C" {
    fn report_progress(message: &str);
}

/// Tells the page where a long run stands (a `wasm-progress` event, and the console).
pub(crate) fn progress(message: &str) {
    report_progress(message);
}

// The static constructors of the module, which wasm-ld gathers into this function.
// Dependencies register types with `inventory` (cubecl-ir's dialects, through pliron).
// A module that never calls this itself is linked "command-style": wasm-ld then wraps
// every export to run all constructors first, and on the web every call into the module
// (each promise callback, each JS object handed over) is an export call. Calling it once
// here turns that off; without it each read took about 20 ms more on SwiftShader.
unsafe extern "C" {
    fn __wasm_call_ctors();
}

/// Runs once when the module is instantiated: runs the static constructors (see
/// `__wasm_call_ctors` above); then the first panic's message is kept for [`last_panic`],
/// written to the console and sent to the page as a `wasm-panic` event (a panic in wasm
/// aborts with "unreachable", which names nothing).
#[wasm_bindgen(start)]
pub fn start() {
    // SAFETY: the linker's function running the constructors, called once, before any
    // other code of the module runs.
    unsafe { __wasm_call_ctors() };
    std::panic::set_hook(Box::new(|info| {
        let message = format!("panic: {info}");
        // The first panic is the cause; the module is broken after it, so later ones are
        // its consequences.
        LAST_PANIC
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| message.clone());
        report_panic(&message);
    }));
}

/// The message of this module's first panic, if one happened.
#[wasm_bindgen]
pub fn last_panic() -> Option<String> {
    LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// What [`run_matmul`] found, for the page.
#[wasm_bindgen(getter_with_clone)]
pub struct MatmulResult {
    /// The adapter: name, device type, backend.
    pub adapter: String,
    /// "check: all N elements match the CPU reference ...".
    pub check: String,
    /// The times of both runs and of the CPU reference, in words.
    pub timing: String,
    /// `client.memory_summary()` while the matrices were live.
    pub summary: String,
    /// The memory timeline (SVG text) of the whole run.
    pub timeline_svg: String,
    /// The page map (SVG text) while the matrices were live.
    pub pages_svg: String,
}

/// Multiplies an `m x k` by a `k x n` f32 matrix on the browser's WebGPU device through
/// wgpu-memory's pools, twice, and checks every element against a CPU reference.
///
/// # Errors
/// A message (as a JS string) when the browser has no WebGPU adapter, a size is 0 or
/// above 4096, a step of the client fails, or an element does not match.
#[wasm_bindgen]
pub async fn run_matmul(m: u32, k: u32, n: u32) -> Result<MatmulResult, JsValue> {
    let gpu = gpu::Gpu::open().await?;
    let outcome = matmul::run(gpu, matmul::Dims { m, k, n }).await?;
    Ok(MatmulResult {
        adapter: outcome.adapter,
        check: outcome.check,
        timing: outcome.timing,
        summary: outcome.summary,
        timeline_svg: outcome.timeline_svg,
        pages_svg: outcome.pages_svg,
    })
}

/// What [`run_bench`] measured, for the page.
#[wasm_bindgen(getter_with_clone)]
pub struct BenchResult {
    /// The adapter: name, device type, backend.
    pub adapter: String,
    /// The table in markdown: median ms per case for both sides, and bare / ours.
    pub table: String,
    /// Wall time of the whole bench in ms, set-up included.
    pub total_ms: f64,
    /// Timed runs per case and side (after one warm-up each).
    pub reps: u32,
}

/// The web bench: wgpu-memory against bare wgpu on a fresh WebGPU device (small reads
/// at once and one by one, a create/drop churn, a 64 MiB round trip), the median of each side's runs.
///
/// # Errors
/// A message (as a JS string) when the browser has no WebGPU adapter, or a step of
/// either side fails or reads wrong bytes.
#[wasm_bindgen]
pub async fn run_bench() -> Result<BenchResult, JsValue> {
    let gpu = gpu::Gpu::open().await?;
    let outcome = bench::run(gpu).await?;
    Ok(BenchResult {
        table: outcome.markdown(),
        adapter: outcome.adapter,
        total_ms: outcome.total_ms,
        reps: bench::REPS as u32,
    })
}
