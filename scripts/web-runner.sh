#!/usr/bin/env bash
# cargo's runner for wasm32-unknown-unknown test binaries, set by scripts/web-test.sh:
#   web-runner.sh <test.wasm> [test args...]
# Runs wasm-bindgen-test-runner (which starts chromedriver and Chromium) in a session of
# its own under `timeout`, then kills every process left in that session: the runner
# leaves Chromium processes behind after every run, and a hung test leaves one spinning.
# Chromium's crash handler (chrome_crashpad_handler) puts itself in a session of its own;
# the run gets a private XDG_CONFIG_HOME, which the handler's command line names, so that
# those handlers are found and ended too.
# WEB_TEST_TIMEOUT (seconds) bounds the whole browser run, start-up included; past it the
# run is killed and this script exits non-zero (124) with a message that says so.
# shellcheck disable=SC2317  # (end_session and run_processes run from the EXIT trap)
set -u
limit="${WEB_TEST_TIMEOUT:-180}"
runner="${WEB_TEST_RUNNER:-wasm-bindgen-test-runner}"

run_dir="$(mktemp -d "${TMPDIR:-/tmp}/web-runner.XXXXXX")"
sid_file="$run_dir/sid"
sid=""
# The processes of this run, one "pid state" a line: those of its session, and the crash
# handlers, whose command line names run_dir (the bracket keeps grep from finding its own).
run_processes() {
  local pid
  {
    [ -z "$sid" ] || pgrep -s "$sid"
    grep -lsa -- "--databas[e]=$run_dir/" /proc/[0-9]*/cmdline | cut -d/ -f3
  } | while read -r pid; do
    ps -o pid=,stat= -p "$pid" 2>/dev/null
  done
}
end_session() {
  [ -n "$sid" ] || sid="$(cat "$sid_file" 2>/dev/null || true)"
  # Every process of the session we started, and only those: their session id is ours.
  [ -z "$sid" ] || pkill -KILL -s "$sid" 2>/dev/null
  # The crash handlers end by themselves once their browser is gone, and the killed
  # processes are zombies until init reaps them (within a second here): wait for both,
  # 3 s at most, then kill what still runs.
  local procs live=""
  for _ in $(seq 30); do
    procs="$(run_processes)"
    [ -n "$procs" ] || break
    sleep 0.1
  done
  live="$(echo "$procs" | awk '$2 !~ /^Z/ { print $1 }')"
  if [ -n "$live" ]; then
    # shellcheck disable=SC2086
    kill -KILL $live 2>/dev/null
    echo "web-runner: killed processes of this run still alive after it: ${live//$'\n'/ }" >&2
  fi
  rm -rf "$run_dir"
}
trap end_session EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# Temporary files of the run (the runner's build, chromedriver's browser profile, which a
# killed run would leave behind) go to run_dir too, and go with it.
export XDG_CONFIG_HOME="$run_dir/config" TMPDIR="$run_dir/tmp"
mkdir -p "$TMPDIR"
# The inner shell is the session leader, so its pid is the session id; it writes it down
# before it becomes `timeout`. (--wait: should setsid have to fork, it still waits.)
# shellcheck disable=SC2016  # ($$ and $@ are the inner shell's)
setsid --wait bash -c 'echo $$ >"$0"; exec timeout -k 5 "$@"' "$sid_file" "$limit" "$runner" "$@" &
wait $!
status=$?
name="$(basename "$1" .wasm)"
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "web-runner: FAILED: the browser run of $name did not finish within ${limit} s" \
    "(WEB_TEST_TIMEOUT); killed it and its browser (exit $status)" >&2
  status=124
elif [ "$status" -ne 0 ] && [ -n "${WASM_BINDGEN_TEST_TIMEOUT:-}" ] \
  && [ "$SECONDS" -ge "$WASM_BINDGEN_TEST_TIMEOUT" ]; then
  # The runner gave up waiting for the tests' output: a test hung (or the suite is slow).
  echo "web-runner: FAILED: the tests of $name did not finish within" \
    "${WASM_BINDGEN_TEST_TIMEOUT} s (WASM_BINDGEN_TEST_TIMEOUT): a test hung or the suite" \
    "is slower than that; where the console output above was read, its last" \
    "'Invoking test' line names the test that did not end" >&2
fi
exit "$status"
