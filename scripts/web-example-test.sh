#!/usr/bin/env bash
# Tests the example page in headless Chromium (WebGPU on SwiftShader):
#   scripts/web-example-test.sh [--bench] [--no-build]
# Builds the page (scripts/web-example.sh --build-only), then runs
# scripts/web-example-driver.py under scripts/web-runner.sh: the page is served on a free
# localhost port, chromedriver starts on another, Chromium opens it with the flags of
# webdriver.json, and the driver waits until the page's status says "done", checks that
# it shows "all ... elements match", the memory summary and the timeline and page-map
# SVGs, and saves a screenshot to docs/web-example.png. The whole browser run gets a
# session of its own and a time bound; every process it leaves is killed after.
# --bench also runs the web bench (wgpu-memory against bare wgpu, 10-20 s on SwiftShader)
# and prints its table in markdown (docs/web-memory.md, "Web bench", says what it runs);
# the screenshot is then left alone unless WEB_EXAMPLE_SCREENSHOT names a file.
# Exits 0 when every check passes; non-zero with a message on a failure or a timeout.
# Environment (each optional):
#   WEB_EXAMPLE_PAGE_TIMEOUT  seconds the page may take to finish (120; 180 with --bench)
#   WEB_TEST_TIMEOUT          seconds the whole browser run may take (page timeout + 60)
#   WEB_EXAMPLE_SCREENSHOT    where the screenshot goes (docs/web-example.png)
#   WEB_EXAMPLE_QUERY         the page address's query, e.g. m=512&k=512&n=512
#   CHROMEDRIVER              the chromedriver binary (/usr/bin/chromedriver)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

bench=()
build=1
for arg in "$@"; do
  case "$arg" in
    --bench) bench=(--bench) ;;
    --no-build) build=0 ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
      exit 0
      ;;
    *)
      echo "web-example-test: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

started=$SECONDS
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
if [ ! -x "$CHROMEDRIVER" ] || ! command -v chromium >/dev/null; then
  echo "web-example-test: FAILED: chromium or chromedriver missing; run scripts/web-tools.sh" >&2
  exit 2
fi
if [ "$build" -eq 1 ]; then
  scripts/web-example.sh --build-only
fi

if [ ${#bench[@]} -gt 0 ]; then
  page_timeout="${WEB_EXAMPLE_PAGE_TIMEOUT:-180}"
  screenshot=()
  [ -z "${WEB_EXAMPLE_SCREENSHOT:-}" ] || screenshot=(--screenshot "$WEB_EXAMPLE_SCREENSHOT")
else
  page_timeout="${WEB_EXAMPLE_PAGE_TIMEOUT:-120}"
  screenshot=(--screenshot "${WEB_EXAMPLE_SCREENSHOT:-docs/web-example.png}")
fi
export WEB_TEST_TIMEOUT="${WEB_TEST_TIMEOUT:-$((page_timeout + 60))}"
export WEB_TEST_RUNNER=python3
unset WASM_BINDGEN_TEST_TIMEOUT
status=0
scripts/web-runner.sh scripts/web-example-driver.py --root web/www --flags webdriver.json \
  --page-timeout "$page_timeout" --query "${WEB_EXAMPLE_QUERY:-}" "${screenshot[@]}" "${bench[@]}" ||
  status=$?
if [ "$status" -ne 0 ]; then
  echo "web-example-test: FAILED (exit $status) after $((SECONDS - started)) s" >&2
  exit "$status"
fi
echo "web-example-test: passed in $((SECONDS - started)) s, build included"
