"""The studio's routes (FastAPI): the page, the run's writers and results, and the streamed
write. docs/studio.md lists the endpoints.

Every bad input is answered before any work starts, as 4xx JSON ``{"error": message}``; a full
queue as 503. The write is a POST answered with a server-sent-event stream (``text/event-
stream``): ``queued`` ``{"position"}`` while waiting for a slot, ``start`` (references used),
``points`` batches ``[[x, y, pen, char], ...]`` (absolute, y down, line heights), then ``done``
(the whole line and its download links) or ``error`` (timeout; ``status`` says which).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles

from cashg.recognition.scoring import CHAR_CLASSES  # the ERR_<class> keys of metrics.json
from cashg.studio.admission import Gate, QueueFull
from cashg.studio.decoding import neatness_costs, neatness_for, request_options
from cashg.studio.engine import Engine, Stopped, Written
from cashg.studio.limits import Limits
from cashg.studio.lines import FORMATS, LineStore, export
from cashg.studio.pictures import report_html, strip_png
from cashg.studio.requests import BadRequest, check_write, parse_json
from cashg.studio.run import Run

STATIC = Path(__file__).parent / "static"
SUGGESTED = "adeghnst"  # the faint letters of the drawing boxes (varied shapes)


@dataclass
class Studio:
    """What the routes serve: the run, the loaded experiment's engine, the bounds."""

    run: Run
    experiment: str
    engine: Engine
    limits: Limits


def error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) as soon as it exceeds ``limit`` bytes: by its declared
    length before reading, else while reading (never parsed when too large)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise BadRequest(f"the request body is larger than {limit} bytes", 413)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BadRequest(f"the request body is larger than {limit} bytes", 413)
    return bytes(body)


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def metrics_summary(metrics: dict | None) -> dict | None:
    """CER, WER and the per-class error table (``ERR_<class>``, with ``_gt`` where present)."""
    if not metrics:
        return None
    classes = {c: {"generated": metrics.get(f"ERR_{c}"), "ground_truth": metrics.get(
        f"ERR_{c}_gt")} for c in CHAR_CLASSES if metrics.get(f"ERR_{c}") is not None}
    keys = ("CER", "WER", "CER_gt", "WER_gt", "DTW_norm", "F1_cursive", "SSS")
    return {"scores": {k: metrics[k] for k in keys if metrics.get(k) is not None},
            "classes": classes}


def create_app(studio: Studio) -> FastAPI:
    """The FastAPI app of a :class:`Studio`."""
    app = FastAPI(title="cashg studio", docs_url=None, redoc_url=None, openapi_url=None)
    limits, engine, run = studio.limits, studio.engine, studio.run
    gate = Gate(limits.concurrency, limits.queue_size)
    lines = LineStore(limits.kept_lines)
    app.state.studio, app.state.gate = studio, gate
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(BadRequest)
    async def bad_request(_request: Request, exc: BadRequest):
        return error(exc.message, exc.status)

    @app.get("/")
    async def index():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/api/info")
    async def info():
        inv = engine.inventory
        tuned = engine.tuned
        return {
            "experiment": studio.experiment, "experiments": run.experiments,
            "checkpoint": str(engine.checkpoint), "style_refs": engine.n_refs,
            "alphabet": "".join(sorted(inv)) if inv is not None else None,
            "writers": [{"id": w.id, "split": w.split} for w in engine.writers.values()],
            "suggested": [c for c in SUGGESTED if inv is None or c in inv],
            "decoding": {"temperature": tuned.temperature, "neatness": round(neatness_for(
                tuned.temperature), 3), "bias": tuned.bias, "greedy": tuned.greedy,
                "space_mode": tuned.space_mode, "lift_mode": tuned.lift_mode,
                "seed": tuned.seed, "params": str(run.params) if run.params else None},
            "limits": limits.public(), "queue": gate.state(),
            "decoding_curve": neatness_costs(run.decoding_curve(studio.experiment)),
            "check": ({"available": True, "candidates": engine.check.k, "default": True}
                      if engine.check is not None else {"available": False, "default": False}),
        }

    @app.get("/api/writer.png")
    async def writer_strip(writer: str, n: int = 8):
        if writer not in engine.writers:
            return error(f"unknown writer {writer!r}", 404)
        images = await asyncio.to_thread(engine.writer_images, writer)
        return Response(strip_png(images[:max(1, min(n, 16))]), media_type="image/png",
                        headers={"Cache-Control": "max-age=3600"})

    @app.post("/api/write")
    async def write(request: Request):
        payload = parse_json(await read_body(request, limits.max_body_bytes))
        req = check_write(payload, limits, engine.inventory, engine.writers)
        opts = request_options(engine.tuned, req.neatness, req.seed, limits.max_char_points)
        engine.checks(req)  # a check the run cannot do is refused before the queue
        try:
            ticket = gate.admit()
        except QueueFull as exc:
            return error(str(exc), 503)
        return StreamingResponse(_stream(req, opts, ticket), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store",
                                          "X-Accel-Buffering": "no"})

    async def _stream(req, opts, ticket):
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + limits.timeout_s
        gone = threading.Event()
        queue: asyncio.Queue = asyncio.Queue()
        fut = None
        try:
            async for pos in gate.wait(ticket):
                if time.monotonic() > deadline:
                    break
                yield sse("queued", {"position": pos})
            if not ticket.granted:
                yield sse("error", {"status": 503, "error": "timed out waiting in the queue"})
                return

            def emit(event: str, data: dict) -> None:
                loop.call_soon_threadsafe(queue.put_nowait, (event, data))

            def stop() -> bool:
                return gone.is_set() or time.monotonic() > deadline

            fut = loop.run_in_executor(engine.executor, engine.write, req, opts, emit, stop)
            fut.add_done_callback(lambda _f: gate.release(ticket))
            fut.add_done_callback(lambda _f: queue.put_nowait(None))
            while (item := await queue.get()) is not None:
                yield sse(*item)
            try:
                written: Written = fut.result()
            except Stopped:
                yield sse("error", {"status": 504, "error": f"the line took longer than "
                                    f"{limits.timeout_s:g} s and was stopped"})
                return
            except BadRequest as exc:
                yield sse("error", {"status": exc.status, "error": exc.message})
                return
            except Exception as exc:  # reported to the page, never a hung stream
                yield sse("error", {"status": 500, "error": f"generation failed: {exc}"})
                return
            line_id = lines.add(written.sentence)
            s = written.sentence
            yield sse("done", {
                "id": line_id, "text": s.text, "writer": s.writer_id,
                "points": [[round(float(x), 4), round(float(y), 4), int(p), int(c)]
                           for (x, y, p), c in zip(s.points.tolist(), s.char_index.tolist())],
                "first_point_s": round(written.first_point_s, 3),
                "seconds": round(written.seconds, 3), "steps": written.steps,
                "note": written.note,
                "downloads": {f: f"/api/lines/{line_id}.{f}" for f in FORMATS}})
        finally:
            gone.set()  # a client gone mid-line stops the sampling at its next step
            if fut is None:
                gate.release(ticket)

    @app.get("/api/lines/{line_id}.{fmt}")
    async def download(line_id: str, fmt: str):
        sentence = lines.get(line_id)
        if fmt not in FORMATS:
            return error(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})", 404)
        if sentence is None:
            return error(f"no line {line_id!r} (lines are kept for the last "
                         f"{limits.kept_lines} writes)", 404)
        data = await asyncio.to_thread(export, sentence, fmt)
        return Response(data, media_type=FORMATS[fmt], headers={
            "Content-Disposition": f'attachment; filename="cashg-line.{fmt}"'})

    @app.get("/api/browse")
    async def browse():
        exps = []  # the studio's own experiment first
        for name in sorted(run.experiments, key=lambda e: (e != studio.experiment, e)):
            pictures = {kind: f"/api/pictures/{name}/{kind}.png"
                        for kind in ("generated", "new_text") if run.picture(name, kind)}
            exps.append({"name": name, "metrics": metrics_summary(run.metrics(name)),
                         "pictures": pictures})
        return {"experiments": exps, "report": run.report() is not None}

    @app.get("/api/report")
    async def report():
        path = run.report()
        if path is None:
            return error("this run has no report (results/report/report.md)", 404)
        return {"html": report_html(path.read_text(encoding="utf-8"))}

    @app.get("/report/images/{name}")
    async def report_image(name: str):
        path = run.report_image(name)
        return FileResponse(path) if path else error(f"no report image {name!r}", 404)

    @app.get("/api/pictures/{experiment}/{kind}.png")
    async def picture(experiment: str, kind: str):
        path = run.picture(experiment, kind)
        return FileResponse(path, media_type="image/png") if path else error(
            f"no {kind} picture for {experiment!r}", 404)

    return app
