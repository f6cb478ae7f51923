#!/usr/bin/env bash
# The main job: `cargo run --release --example matmul`. When wgpu finds no adapter (the
# example exits with status 3), installs the software Vulkan driver (lavapipe, Debian
# package mesa-vulkan-drivers) and runs it again. Arguments go to the example (M K N).
set -u
cd "$(dirname "$0")/.."
cargo run --release --example matmul -- "$@"
status=$?
if [ "$status" -eq 3 ]; then
  echo "matmul: no GPU adapter found; installing the software Vulkan driver (mesa-vulkan-drivers)" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq && $sudo apt-get install -y -qq mesa-vulkan-drivers >/dev/null || exit 2
  cargo run --release --example matmul -- "$@"
  status=$?
fi
exit "$status"
