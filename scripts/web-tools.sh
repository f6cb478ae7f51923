#!/usr/bin/env bash
# Installs what scripts/web-test.sh needs to run the wasm tests in a headless browser:
#   - Debian's `chromium` and `chromium-driver` (apt-get; sudo only when not root),
#   - the rustup target `wasm32-unknown-unknown`,
#   - `wasm-bindgen-cli` (wasm-bindgen-test-runner) at exactly the `wasm-bindgen` version
#     in Cargo.lock: the runner refuses a test binary built by another version.
# Each step is skipped when its tool is already there: a second run takes well under a second.
# wasm-bindgen-cli goes to $WEB_TOOLS_DIR/wasm-bindgen-cli-<version>/bin (WEB_TOOLS_DIR
# defaults to ~/.cargo/web-tools, or $CARGO_HOME/web-tools: one install for every checkout,
# kept by `cargo clean`, one folder per version); scripts/web-test.sh looks for it there.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

say() { echo "web-tools: $*"; }
step_start=$SECONDS
took() { say "$* ($((SECONDS - step_start)) s)"; step_start=$SECONDS; }

# --- Chromium and chromedriver (Debian packages) ---
installed="$(dpkg-query -W -f='${Status}\n' chromium chromium-driver 2>/dev/null | grep -c '^install ok installed$' || true)"
if [ "$installed" -ne 2 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  say "installing chromium and chromium-driver (apt-get)"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
  took "installed chromium and chromium-driver"
else
  say "chromium and chromium-driver already installed"
fi
say "$(chromium --version 2>/dev/null || echo 'chromium: version unknown')"

# --- the wasm target ---
if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "rustup target wasm32-unknown-unknown already installed"
else
  say "adding rustup target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
  took "added rustup target wasm32-unknown-unknown"
fi

# --- wasm-bindgen-cli at the version in Cargo.lock ---
version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if [ -z "$version" ]; then
  echo "web-tools: no wasm-bindgen package in Cargo.lock" >&2
  exit 1
fi
tools_dir="${WEB_TOOLS_DIR:-${CARGO_HOME:-$HOME/.cargo}/web-tools}"
root="$tools_dir/wasm-bindgen-cli-$version"
runner="$root/bin/wasm-bindgen-test-runner"
if [ -x "$runner" ] && "$runner" --version 2>/dev/null | grep -q " $version\$"; then
  say "wasm-bindgen-cli $version already installed in $root"
else
  say "installing wasm-bindgen-cli $version into $root (a few CPU-minutes)"
  # A scratch target dir of its own, removed after: a CARGO_TARGET_DIR in the environment
  # would otherwise keep the tool's build (hundreds of MB) next to the crate's artifacts.
  build_dir="$(mktemp -d "${TMPDIR:-/tmp}/wasm-bindgen-cli-build.XXXXXX")"
  trap 'rm -rf "$build_dir"' EXIT
  cargo install wasm-bindgen-cli --version "$version" --root "$root" --target-dir "$build_dir" --quiet
  rm -rf "$build_dir"
  took "installed wasm-bindgen-cli $version"
fi
say "$("$runner" --version)"
