#!/usr/bin/env bash
# Runs wasm tests in headless Chromium with WebGPU (SwiftShader, Chromium's CPU WebGPU):
#   scripts/web-test.sh [cargo test args...]       e.g. scripts/web-test.sh --test web
# is `cargo test --target wasm32-unknown-unknown [args...]` with wasm-bindgen-test-runner
# as the runner, through scripts/web-runner.sh: each test binary's browser run gets a
# session of its own and a time bound, and its processes are killed when it ends.
# Another crate's tests run with `--manifest-path DIR/Cargo.toml`; its Cargo.lock must
# hold the same wasm-bindgen version as this one's.
# Needs the tools of scripts/web-tools.sh. Environment (each optional):
#   WEB_TEST_TIMEOUT            seconds one browser run may take, start-up included (180)
#   WASM_BINDGEN_TEST_TIMEOUT   the runner's own wait for the tests' output, seconds
#                               (default WEB_TEST_TIMEOUT - 30, so that on a hang the
#                               runner reports first and prints the browser console)
#   CHROMEDRIVER                the chromedriver binary (/usr/bin/chromedriver)
#   WEB_TOOLS_DIR               where web-tools.sh installed wasm-bindgen-cli
#   WASM_BINDGEN_TEST_WEBDRIVER_JSON  Chromium's flags (this repository's webdriver.json)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$repo/Cargo.lock")"
tools_dir="${WEB_TOOLS_DIR:-${CARGO_HOME:-$HOME/.cargo}/web-tools}"
bin="$tools_dir/wasm-bindgen-cli-$version/bin"
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
if [ ! -x "$bin/wasm-bindgen-test-runner" ] || [ ! -x "$CHROMEDRIVER" ]; then
  echo "web-test: wasm-bindgen-test-runner $version or chromedriver missing; run scripts/web-tools.sh" >&2
  exit 2
fi

export WEB_TEST_RUNNER="$bin/wasm-bindgen-test-runner"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER="$repo/scripts/web-runner.sh"
export WEB_TEST_TIMEOUT="${WEB_TEST_TIMEOUT:-180}"
inner=$((WEB_TEST_TIMEOUT - 30))
[ "$inner" -ge 10 ] || inner=10
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-$inner}"
# The runner reads Chromium's flags from ./webdriver.json (cargo runs it in the tested
# package's root) unless this names the file: one set of flags for any crate tested.
export WASM_BINDGEN_TEST_WEBDRIVER_JSON="${WASM_BINDGEN_TEST_WEBDRIVER_JSON:-$repo/webdriver.json}"

echo "web-test: cargo test --target wasm32-unknown-unknown $* (each browser run bounded to ${WEB_TEST_TIMEOUT} s)"
exec cargo test --target wasm32-unknown-unknown "$@"
