#!/usr/bin/env bash
# Prepares the one cubecl-runtime patch a wasm32 build needs, from cargo's own download.
#
# cubecl-runtime =0.12.0-pre.1 imports `tune::sampler::measured` on every target, but its
# `tune::sampler` module exists only off the web, so the crate does not compile for
# wasm32-unknown-unknown. This script copies the crate out of cargo's registry into
# `web/patched/cubecl-runtime` and gives the tuner a web copy of that two-line function.
# `web/Cargo.toml` points `[patch.crates-io]` there. Native builds never see it.
#
# Downstream web apps do the same: run this script (or make the same edit) and add to
# their own workspace's Cargo.toml:
#   [patch.crates-io]
#   cubecl-runtime = { path = "<where this script wrote it>" }
#
# Usage: scripts/web-patch.sh [OUT_DIR]   (default: web/patched/cubecl-runtime)
set -euo pipefail
cd "$(dirname "$0")/.."
version="0.12.0-pre.1"
out="${1:-web/patched/cubecl-runtime}"
stamp="$out/.wgpu-memory-web-patch"
if [ -f "$stamp" ]; then
  echo "web-patch: $out is already patched"
  exit 0
fi
cargo fetch --quiet
src=$(cargo metadata --format-version 1 --locked 2>/dev/null | python3 -c '
import json, sys
meta = json.load(sys.stdin)
for p in meta["packages"]:
    if p["name"] == "cubecl-runtime" and p["version"] == sys.argv[1]:
        print(p["manifest_path"].rsplit("/", 1)[0]); break
' "$version")
if [ -z "$src" ] || [ ! -f "$src/src/tune/tuner.rs" ]; then
  echo "web-patch: cubecl-runtime $version not found in cargo's registry" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$(dirname "$out")"
cp -r "$src" "$out"
chmod -R u+w "$out"
python3 - "$out/src/tune/tuner.rs" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
anchor = "use crate::tune::sampler::measured;\n"
if text.count(anchor) != 1:
    sys.exit("web-patch: the import this patch replaces is not in tuner.rs; is the version right?")
text = text.replace(anchor, '#[cfg(not(target_family = "wasm"))]\n' + anchor)
text += '''
// Added by wgpu-memory's scripts/web-patch.sh: the tuner turns resolved profiles into
// durations on every target, but the module holding that conversion is native-only.
#[cfg(target_family = "wasm")]
fn measured(ticks: Option<cubecl_common::profile::ProfileTicks>) -> Option<Duration> {
    ticks.map(|ticks| ticks.duration()).filter(|duration| !duration.is_zero())
}
'''
open(path, "w").write(text)
PY
touch "$stamp"
echo "web-patch: wrote $out"
