"""The studio writing one sentence, in a real headless Chromium: the README's studio picture.

    python scripts/measure/studio_screenshot.py --run results \\
        --text "Meet Hank at Gate B9 at 12:45, April 2026." --writer brush:50 \\
        --out docs/images/studio.png [--check on|off] [--port 8765] \
        [--chromium /usr/bin/chromium]

Starts ``cashg studio --run RUN`` on the loopback address, opens its page with Playwright in
the given Chromium (``CASHG_CHROMIUM``, else the first of chromium / chromium-browser /
google-chrome on PATH), types the sentence, picks the writer, writes it at the run's tuned
decoding (the neatness slider as the page opens it) with "check each letter" as ``--check``
says (default: as the page opens), waits until the line is complete, saves a screenshot of the
page and prints how many points were drawn, the time to the first stroke and to the whole
line. The server is stopped afterwards, whatever happens.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def find_chromium(given: str | None) -> str:
    for path in (given, os.environ.get("CASHG_CHROMIUM")):
        if path and Path(path).is_file():
            return path
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    raise SystemExit("no Chromium found: apt-get install -y chromium, or give --chromium")


def wait_for(url: str, seconds: float, server: subprocess.Popen) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if server.poll() is not None:
            raise SystemExit(f"cashg studio exited with status {server.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"cashg studio did not answer on {url} within {seconds:.0f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=ROOT / "results")
    ap.add_argument("--text", required=True)
    ap.add_argument("--writer", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--chromium", default=None)
    ap.add_argument("--check", choices=("on", "off"), default=None,
                    help="the page's 'check each letter' switch (default: as it opens)")
    args = ap.parse_args(argv)

    from playwright.sync_api import sync_playwright

    exe = find_chromium(args.chromium)
    url = f"http://127.0.0.1:{args.port}"
    server = subprocess.Popen([sys.executable, "-m", "cashg.cli", "studio", "--run",
                               str(args.run), "--port", str(args.port)], cwd=ROOT)
    try:
        wait_for(url + "/", 120, server)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run"])
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(url + "/")
            writer = f".writer[data-writer='{args.writer}']"
            page.wait_for_selector(writer, timeout=60_000)
            page.fill("#text", args.text)
            page.click(writer)
            if args.check is not None and not page.is_disabled("#check"):
                page.set_checked("#check", args.check == "on")
            checked = page.is_checked("#check")
            start = time.perf_counter()
            page.click("#write")
            page.wait_for_function("document.getElementById('status').textContent"
                                   ".startsWith('done')", timeout=120_000)
            seconds = time.perf_counter() - start
            points = page.get_attribute("#ink", "data-points")
            status = page.text_content("#status")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=True)
            browser.close()
        print(f"studio: wrote {args.text!r} as {args.writer}"
              f"{', each letter checked' if checked else ''}: {points} points in "
              f"{seconds:.2f} s (page round trip; the page: {status}) -> {args.out}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
