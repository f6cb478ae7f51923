// Loads the wasm module built by `wasm-bindgen --target web` (scripts/web-example.sh puts it
// in pkg/), runs the product (and the bench with ?bench), and fills the page. The status
// element ends as "done" or "failed: <message>"; scripts/web-example-test.sh waits for it.
import init, { run_matmul, run_bench, last_panic } from "./pkg/wgpu_memory_web.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const size = (name, fallback) => {
  const value = Number.parseInt(params.get(name) ?? "", 10);
  return Number.isFinite(value) && value > 0 ? value : fallback;
};
for (const name of ["m", "k", "n"]) $(name).value = size(name, 256);

function setStatus(text, kind) {
  $("status").textContent = text;
  $("status").className = kind ?? "";
}

// A panic's message is better than wasm's "unreachable".
function failure(error) {
  let panic = null;
  try { panic = last_panic(); } catch (_) { /* the module did not load */ }
  return panic ?? (error instanceof Error ? error.message : String(error));
}

function benchTable(markdown) {
  const rows = markdown.trim().split("\n").filter((line, i) => i !== 1)
    .map((line) => line.split("|").slice(1, -1).map((cell) => cell.trim()));
  const table = document.createElement("table");
  rows.forEach((cells, i) => {
    const tr = table.insertRow();
    cells.forEach((cell, j) => {
      const td = document.createElement(i === 0 ? "th" : "td");
      td.textContent = cell;
      if (i > 0 && j > 0) td.className = "num";
      tr.appendChild(td);
    });
  });
  return table;
}

// What the browser tells of its adapter (wgpu's AdapterInfo has no room for it on the web).
async function browserAdapter() {
  try {
    const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
    const info = adapter?.info;
    if (!info) return "";
    const words = [info.vendor, info.architecture, info.description].filter((word) => word);
    return words.length ? `; the browser says: ${words.join(", ")}` : "";
  } catch (_) {
    return "";
  }
}

async function product() {
  const [m, k, n] = ["m", "k", "n"].map((name) => Number.parseInt($(name).value, 10));
  setStatus(`running ${m} x ${k} times ${k} x ${n}`);
  const result = await run_matmul(m, k, n);
  $("adapter").textContent = `adapter: ${result.adapter}${await browserAdapter()}`;
  $("check").textContent = result.check;
  $("timing").textContent = result.timing;
  $("summary").textContent = result.summary;
  $("timeline").innerHTML = result.timeline_svg;
  $("pages").innerHTML = result.pages_svg;
}

async function bench() {
  setStatus("running the bench (10-20 s on a software adapter)");
  const result = await run_bench();
  $("bench-section").hidden = false;
  $("bench-table").replaceChildren(benchTable(result.table));
  $("bench-note").textContent = `adapter: ${result.adapter}; medians of ${result.reps} runs per side after a ` +
    `warm-up; bare / ours above 1 means wgpu-memory is faster; whole bench ${(result.total_ms / 1000).toFixed(1)} s`;
  $("bench-markdown").textContent = result.table;
}

async function run(steps) {
  for (const button of [$("run"), $("bench-run")]) button.disabled = true;
  try {
    for (const step of steps) await step();
    if (!panicked) setStatus("done", "done");
  } catch (error) {
    if (!panicked) setStatus(`failed: ${failure(error)}`, "failed");
  } finally {
    for (const button of [$("run"), $("bench-run")]) button.disabled = false;
  }
}

// A panic anywhere in the module (inside a browser callback too) ends the run: the module
// is unusable after it, and the first panic is the cause.
let panicked = false;
window.addEventListener("wasm-panic", (event) => {
  if (!panicked) setStatus(`failed: ${event.detail}`, "failed");
  panicked = true;
});

window.addEventListener("wasm-progress", (event) => {
  if (!panicked) setStatus(event.detail);
});

$("form").addEventListener("submit", (event) => { event.preventDefault(); run([product]); });
$("bench-run").addEventListener("click", () => run([bench]));

try {
  if (!navigator.gpu) {
    throw new Error("this browser has no WebGPU (navigator.gpu is missing): open the page in " +
      "Chrome or Edge 113+ over http://localhost (headless Chromium needs --enable-unsafe-webgpu)");
  }
  await init();
  await run(params.has("bench") ? [product, bench] : [product]);
} catch (error) {
  setStatus(`failed: ${failure(error)}`, "failed");
}
