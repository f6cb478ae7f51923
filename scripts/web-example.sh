#!/usr/bin/env bash
# The example page: wgpu-memory in a browser, on WebGPU.
#   scripts/web-example.sh [--build-only] [--port PORT]
# Builds web/ for wasm32-unknown-unknown (release), runs wasm-bindgen --target web into
# web/www/pkg (ignored by git), and serves web/www on http://localhost:PORT (8000 unless
# given; python3 -m http.server, on 127.0.0.1 only) until Ctrl-C. --build-only stops
# after the build.
#
# To see it, open http://localhost:8000/ in Chrome or Edge 113 or later: the page
# multiplies two matrices through the pools, checks every element and shows the memory
# summary, the memory timeline and the page map; its status line ends as "done".
# Sizes go in the form or the address (http://localhost:8000/?m=1024&k=1024&n=1024);
# http://localhost:8000/?bench also runs the bench against bare wgpu (10-20 s on a
# software adapter). WebGPU needs a secure context: localhost is one, a LAN address is
# not. Where the page says this browser has no WebGPU (Linux Chrome on many GPUs), start
# Chrome with --enable-unsafe-webgpu (and --enable-features=Vulkan on Linux); Firefox and
# Safari work where their WebGPU is on.
#
# Needs the wasm32 target and wasm-bindgen-cli at web/Cargo.lock's wasm-bindgen version
# (scripts/web-tools.sh installs both; WEB_TOOLS_DIR as there). The build honours
# CARGO_TARGET_DIR (default web/target).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

port=8000
serve=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-only) serve=0 ;;
    --port)
      [ $# -ge 2 ] || { echo "web-example: --port needs a number" >&2; exit 2; }
      port="$2"
      shift
      ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
      exit 0
      ;;
    *)
      echo "web-example: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done

version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' web/Cargo.lock)"
tools_dir="${WEB_TOOLS_DIR:-${CARGO_HOME:-$HOME/.cargo}/web-tools}"
bindgen="$tools_dir/wasm-bindgen-cli-$version/bin/wasm-bindgen"
if [ ! -x "$bindgen" ]; then
  echo "web-example: wasm-bindgen $version not found at $bindgen; run scripts/web-tools.sh" >&2
  exit 2
fi

scripts/web-patch.sh >/dev/null
echo "web-example: building web/ for wasm32-unknown-unknown (release)"
(cd web && cargo build --release --target wasm32-unknown-unknown --lib)
target_dir="$(cd web && cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
wasm="$target_dir/wasm32-unknown-unknown/release/wgpu_memory_web.wasm"
rm -rf web/www/pkg
"$bindgen" --target web --no-typescript --out-dir web/www/pkg "$wasm"
echo "web-example: wrote web/www/pkg ($(du -sh web/www/pkg | cut -f1))"

[ "$serve" -eq 1 ] || exit 0
echo "web-example: serving web/www: open http://localhost:$port/ in Chrome or Edge 113+ (Ctrl-C stops)"
exec python3 -m http.server "$port" --bind 127.0.0.1 --directory web/www
