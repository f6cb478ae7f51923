#!/usr/bin/env python3
"""Drives the example page (web/www) in headless Chromium through chromedriver's W3C
WebDriver HTTP API; python3's standard library only. scripts/web-example-test.sh builds
the page and runs this under scripts/web-runner.sh, which bounds the whole run and kills
every process it leaves (chromedriver, Chromium).

    web-example-driver.py --root DIR --flags webdriver.json [--bench]
                          [--screenshot PNG] [--page-timeout S] [--query Q]

Serves DIR on a free localhost port (a thread of this process), starts chromedriver on
another, opens a Chromium session with the flags of webdriver.json, loads the page (with
the query Q, e.g. m=512&k=512&n=512, when given) and
waits (at most --page-timeout seconds) until its status says "done" or "failed: ...".
Then checks that the page shows "all ... elements match", the memory summary and the
timeline and page-map SVGs; with --bench, that the bench table is there, and prints it
as markdown with the browser's version, the adapter and the date. Saves a screenshot of
the whole page to PNG when asked. Exits 0 when every check passes, 1 with a message
naming what failed otherwise (the page's status and the browser's console included).
"""

import argparse
import base64
import datetime
import functools
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

WINDOW_WIDTH = 1000


class Failure(Exception):
    """A check failed or a step did not finish; the message says which."""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves files without a log line per request."""

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


def serve(root):
    handler = functools.partial(Quiet, directory=root)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class WebDriver:
    """The few W3C WebDriver commands this needs, over chromedriver's HTTP API."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"
        self.session = None

    def call(self, method, path, body=None, timeout=60):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method,
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.load(response).get("value")
        except urllib.error.HTTPError as error:
            try:
                value = json.load(error).get("value", {})
                message = f"{value.get('error')}: {value.get('message', '').splitlines()[0]}"
            except (ValueError, AttributeError, IndexError):
                message = str(error)
            raise Failure(f"webdriver {method} {path}: {message}") from None
        except (urllib.error.URLError, OSError) as error:
            raise Failure(f"webdriver {method} {path}: {error}") from None

    def wait_ready(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if (self.call("GET", "/status", timeout=2) or {}).get("ready"):
                    return
            except Failure:
                pass
            time.sleep(0.2)
        raise Failure(f"chromedriver did not answer within {seconds} s")

    def start(self, args):
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": {"args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        value = self.call("POST", "/session",
                          {"capabilities": {"alwaysMatch": capabilities}}, timeout=90)
        self.session = value["sessionId"]
        return value.get("capabilities", {})

    def command(self, method, path, body=None, timeout=60):
        return self.call(method, f"/session/{self.session}{path}", body, timeout)

    def script(self, source):
        return self.command("POST", "/execute/sync", {"script": source, "args": []}, timeout=30)

    def console(self):
        """The browser console's lines so far (chromedriver's log extension)."""
        try:
            entries = self.command("POST", "/se/log", {"type": "browser"}, timeout=15) or []
        except Failure:
            return []
        return [f"{e.get('level')}: {e.get('message')}" for e in entries]

    def quit(self):
        if self.session:
            try:
                self.call("DELETE", f"/session/{self.session}", timeout=10)
            except Failure:
                pass
            self.session = None


PAGE_STATE = """
const text = (id) => document.getElementById(id)?.textContent ?? null;
return {
  status: text("status"),
  adapter: text("adapter"),
  check: text("check"),
  timing: text("timing"),
  summary: text("summary"),
  timeline: document.querySelectorAll("#timeline svg *").length,
  pages: document.querySelectorAll("#pages svg *").length,
  bench: text("bench-markdown"),
  benchNote: text("bench-note"),
  height: document.documentElement.scrollHeight,
};
"""


def wait_for_page(driver, seconds, bench):
    deadline = time.monotonic() + seconds
    state = {}
    while time.monotonic() < deadline:
        try:
            state = driver.script(PAGE_STATE) or {}
        except Failure as failure:
            # A page busy with a long synchronous step answers late: ask again until the
            # deadline.
            if "timed out" not in str(failure):
                raise
            state = {"status": f"(busy: {failure})"}
            continue
        status = state.get("status") or ""
        if status == "done" or status.startswith("failed"):
            return state
        time.sleep(0.5)
    what = "the product and the bench" if bench else "the product"
    raise Failure(f"the page did not finish {what} within {seconds} s "
                  f"(--page-timeout); its status says: {state.get('status')!r}")


def check_page(state, bench):
    status = state.get("status") or ""
    if status != "done":
        raise Failure(f"the page's status: {status}")
    check = state.get("check") or ""
    if not (check.startswith("check: all ") and "elements match" in check):
        raise Failure(f"the page does not say that all elements match: {check!r}")
    summary = state.get("summary") or ""
    if "in use" not in summary and "reserved" not in summary:
        raise Failure(f"the page shows no memory summary: {summary[:200]!r}")
    if not state.get("timeline"):
        raise Failure("the page shows no memory timeline <svg> (or an empty one)")
    if not state.get("pages"):
        raise Failure("the page shows no page map <svg> (or an empty one)")
    if bench and "| bare / ours |" not in (state.get("bench") or ""):
        raise Failure(f"the page shows no bench table: {state.get('bench')!r}")


def screenshot(driver, state, path):
    """Saves the whole page: the window grows (to 8000 px at most) until it shows it all."""
    height = int(state.get("height") or 0)
    for _ in range(4):
        window = driver.command("GET", "/window/rect")
        seen = driver.script("return [window.innerHeight, document.documentElement.scrollHeight];")
        missing = seen[1] - seen[0]
        if missing <= 0:
            break
        height = min(window["height"] + missing + 8, 8000)
        driver.command("POST", "/window/rect", {"width": WINDOW_WIDTH, "height": height})
        time.sleep(0.3)
    png = base64.b64decode(driver.command("GET", "/screenshot"))
    if not png.startswith(b"\x89PNG"):
        raise Failure("the screenshot is not a PNG")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as out:
        out.write(png)
    return len(png)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="the page's folder (web/www)")
    parser.add_argument("--flags", required=True, help="webdriver.json (Chromium's flags)")
    parser.add_argument("--chromedriver", default=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    parser.add_argument("--bench", action="store_true", help="also run the bench")
    parser.add_argument("--screenshot", help="save a screenshot of the page here (PNG)")
    parser.add_argument("--page-timeout", type=float, default=120.0)
    parser.add_argument("--query", default="",
                        help="the page address's query, e.g. m=512&k=512&n=512")
    args = parser.parse_args()
    started = time.monotonic()

    with open(args.flags) as flags_file:
        flags = json.load(flags_file)["goog:chromeOptions"]["args"]
    flags = [*flags, f"--window-size={WINDOW_WIDTH},1200"]
    if not os.path.exists(os.path.join(args.root, "pkg", "wgpu_memory_web.js")):
        raise Failure(f"{args.root}/pkg holds no build; run scripts/web-example.sh --build-only")

    server = serve(args.root)
    page_port = server.server_address[1]
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="chromedriver.", suffix=".log", delete=False)
    chromedriver = subprocess.Popen([args.chromedriver, f"--port={port}"],
                                    stdout=log, stderr=subprocess.STDOUT)
    driver = WebDriver(port)
    try:
        driver.wait_ready(20)
        capabilities = driver.start(flags)
        browser = f"{capabilities.get('browserName', 'chrome')} {capabilities.get('browserVersion', '?')}"
        query = "&".join(q for q in [args.query, "bench" if args.bench else ""] if q)
        url = f"http://127.0.0.1:{page_port}/" + (f"?{query}" if query else "")
        print(f"web-example: {browser}, headless; loading {url}", flush=True)
        driver.command("POST", "/url", {"url": url}, timeout=120)
        try:
            state = wait_for_page(driver, args.page_timeout, args.bench)
            check_page(state, args.bench)
        except Failure:
            console = driver.console()
            if console:
                print("web-example: the browser console (last 30 lines):\n  "
                      + "\n  ".join(console[-30:]), file=sys.stderr)
            raise
        print(f"web-example: {state.get('adapter')}")
        print(f"web-example: {state.get('check')}")
        print(f"web-example: {state.get('timing')}")
        print(f"web-example: the memory summary ({len(state['summary'].splitlines())} lines), "
              f"the timeline ({state['timeline']} SVG elements) and the page map "
              f"({state['pages']} SVG elements) are on the page")
        if args.screenshot:
            size = screenshot(driver, state, args.screenshot)
            print(f"web-example: screenshot {args.screenshot} ({size // 1024} KiB)")
        if args.bench:
            date = datetime.date.today().isoformat()
            print(f"\nweb bench, {date}: {browser} headless "
                  f"({' '.join(f for f in flags if f.startswith('--enable-unsafe'))}), "
                  f"{state.get('adapter')}")
            print(f"{state.get('benchNote')}\n")
            print(state["bench"].rstrip())
            print()
    finally:
        driver.quit()
        chromedriver.terminate()
        try:
            chromedriver.wait(5)
        except subprocess.TimeoutExpired:
            chromedriver.kill()
        server.shutdown()
        log.close()
        os.unlink(log.name)
    print(f"web-example: passed in {time.monotonic() - started:.1f} s (browser run)")


if __name__ == "__main__":
    try:
        main()
    except Failure as failure:
        print(f"web-example: FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
