"""Load test of ``cashg studio``: N concurrent clients writing lines for a while.

    python scripts/measure/load_studio.py --run results [--clients 20] [--duration 60]
    python scripts/measure/load_studio.py --url http://127.0.0.1:8000 [--pid PID]

Starts ``cashg studio`` on 127.0.0.1 (a free port) over ``--run`` (extra server flags after
``--``, e.g. ``-- --concurrency 2``) or attaches to ``--url``. Each client writes a line
(``--text``, 40 characters by default) in a writer of the run, reads the streamed events and
starts again (after a 503 from the bounded queue it waits ``--backoff`` seconds). Prints p50 /
p95 latency of the first stroke (first ``points`` event) and of the full line (``done``), both
from sending the request, queue time included; request counts; answers by status (429/503
are the bounded queue saying no: counted apart; any 5xx is an error, exit status 1) and the
server's RSS before and after (``/proc``: the started server, or ``--pid``).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

TEXT = "The quick brown fox jumps over a lazy dog"[:40]


def rss_mb(pid: int | None) -> float | None:
    """Resident memory of a process in MiB (Linux /proc), None when unknown."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(run: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    """``cashg studio`` over ``run`` on a free port; (process, url) once it answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "cashg.cli", "studio", "--run", run,
                             "--port", str(port), *extra])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the studio server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/api/info", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("the studio server did not answer within 120 s")


def one_request(client: httpx.Client, url: str, body: dict) -> tuple[int, float | None,
                                                                       float | None, str]:
    """(status, first-stroke s, full-line s, error text) of one write."""
    t0 = time.perf_counter()
    first = full = None
    error = ""
    with client.stream("POST", url + "/api/write", json=body) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, None, None, r.text[:200]
        event = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
                if event == "points" and first is None:
                    first = time.perf_counter() - t0
                elif event == "done":
                    full = time.perf_counter() - t0
            elif line.startswith("data: ") and event == "error":
                error = json.loads(line[6:]).get("error", "")
    return (200 if full is not None else 599), first, full, error


def client_loop(url: str, body: dict, until: float, backoff: float, out: dict,
                lock: threading.Lock, seed: list[int]) -> None:
    with httpx.Client(timeout=120) as client:
        while time.monotonic() < until:
            with lock:
                seed[0] += 1
                req = dict(body, seed=seed[0])
            try:
                status, first, full, error = one_request(client, url, req)
            except httpx.HTTPError as exc:
                status, first, full, error = -1, None, None, repr(exc)
            with lock:
                out["status"][status] += 1
                if first is not None:
                    out["first"].append(first)
                if full is not None:
                    out["full"].append(full)
                if status in (429, 503):
                    out["refusal"] = out.get("refusal") or error
                elif error and len(out["errors"]) < 5:
                    out["errors"].append(f"{status}: {error}")
            if status in (429, 503):
                time.sleep(backoff)


def pct(values: list[float], q: float) -> str:
    if not values:
        return "--"
    v = sorted(values)
    return f"{v[min(len(v) - 1, int(round(q * (len(v) - 1))))]:.3f} s"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--run", help="results folder or checkpoint: start a server over it")
    where.add_argument("--url", help="attach to a running studio")
    ap.add_argument("--pid", type=int, help="the attached server's pid (for its RSS)")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--writer", default=None, help="default: the run's first writer")
    ap.add_argument("--backoff", type=float, default=0.5, help="wait after a 429/503 (s)")
    args = ap.parse_args(argv)

    proc = None
    url, pid = args.url, args.pid
    if args.run:
        proc, url = start_server(args.run, extra)
        pid = proc.pid
    try:
        info = httpx.get(url + "/api/info", timeout=10).json()
        writer = args.writer or info["writers"][0]["id"]
        body = {"text": args.text, "writer": writer}
        one_request(httpx.Client(timeout=120), url, body)  # warm-up (not counted)
        rss0 = rss_mb(pid)
        out = {"status": Counter(), "first": [], "full": [], "errors": []}
        lock, seed = threading.Lock(), [0]
        until = time.monotonic() + args.duration
        threads = [threading.Thread(target=client_loop, args=(url, body, until, args.backoff,
                                                              out, lock, seed))
                   for _ in range(args.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        rss1 = rss_mb(pid)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    st = out["status"]
    done = len(out["full"])
    refused = st[429] + st[503]
    server_errors = sum(n for s, n in st.items() if (s >= 500 and s != 503) or s == -1)
    print(f"studio load: {info['experiment']} ({info['checkpoint']}), writer {writer}, "
          f"text {len(args.text)} chars, {args.clients} clients, {wall:.1f} s, server "
          f"concurrency {info['limits']['concurrency']} + queue {info['limits']['queue_size']}")
    print(f"  requests: {sum(st.values())}, lines written: {done} "
          f"({done / wall:.2f} lines/s), refused by the bounded queue (429/503): {refused}")
    print(f"  first stroke: p50 {pct(out['first'], 0.5)}, p95 {pct(out['first'], 0.95)}")
    print(f"  full line:    p50 {pct(out['full'], 0.5)}, p95 {pct(out['full'], 0.95)}")
    print(f"  answers by status: {dict(sorted(st.items()))} (599: stream ended in an error "
          f"event, -1: connection error)")
    print(f"  errors (5xx, failed streams, connection): {server_errors}")
    for e in out["errors"]:
        print(f"    {e}")
    if out.get("refusal"):
        print(f"  a refusal reads: {out['refusal']}")
    fmt = lambda v: "unknown" if v is None else f"{v:.0f} MiB"  # noqa: E731
    print(f"  server RSS: before {fmt(rss0)}, after {fmt(rss1)}")
    return 1 if server_errors else 0


if __name__ == "__main__":
    sys.exit(main())
