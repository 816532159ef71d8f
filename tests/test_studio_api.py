"""``cashg studio`` as its page uses it: the API over a tiny run (starlette's TestClient, and a
real uvicorn server where streaming order or concurrency matters): every bad input answered
4xx JSON, a full queue 503, queue positions, timeouts, a streamed line and its downloads."""

from __future__ import annotations

import argparse
import json
import threading
import time

import httpx
import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from lxml import etree
from PIL import Image
from studio_run import INVENTORY, WRITERS, Server, make_tiny_run

from cashg.core.config.data import PreprocessConfig, StyleConfig
from cashg.core.ink import read_ink
from cashg.studio import references
from cashg.studio.admission import Gate, QueueFull
from cashg.studio.app import Studio, create_app
from cashg.studio.cli import add_arguments, build_studio
from cashg.studio.decoding import neatness_for, temperature_for
from cashg.studio.engine import Engine, Writer
from cashg.studio.limits import Limits
from cashg.studio.run import list_writers, open_run

torch.set_num_threads(1)
DRAWING = {"height": 100, "glyphs": [
    {"char": "a", "strokes": [[[10, 20], [30, 60], [50, 20]], [[20, 40], [40, 40]]]},
    {"char": "b", "strokes": [[[20, 10], [20, 90], [40, 70], [20, 60]]]},
    {"char": "c", "strokes": [[[5, 5]]]}]}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return make_tiny_run(tmp_path_factory.mktemp("studio"))


def studio_of(run_dir, **limits) -> Studio:
    run = open_run(run_dir)
    writers = [Writer(*w) for w in list_writers(run.style_h5["tiny"])]
    lim = Limits(**{"max_char_points": 6, **limits})
    from cashg.core.config.generate import SamplingOptions

    engine = Engine(run.checkpoints["tiny"], writers, SamplingOptions(temperature=0.8),
                    None, PreprocessConfig(), lim)
    return Studio(run, "tiny", engine, lim)


@pytest.fixture(scope="module")
def client(run_dir):
    with TestClient(create_app(studio_of(run_dir))) as c:
        yield c


def events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_the_cli_builds_the_studio_from_a_results_folder(run_dir):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--run", str(run_dir.parent)])  # the project folder works too
    studio = build_studio(args)
    assert studio.experiment == "tiny" and set(studio.engine.writers) == set(WRITERS)
    assert args.host == "127.0.0.1" and args.port == 8000
    from cashg.cli import SUBCOMMANDS

    assert SUBCOMMANDS["studio"][0] == "cashg.studio.cli"


def test_info_lists_writers_alphabet_decoding_and_limits(client):
    info = client.get("/api/info").json()
    assert [w["id"] for w in info["writers"]] == list(WRITERS)
    assert info["alphabet"] == "".join(sorted(INVENTORY)) and info["style_refs"] == 2
    assert info["decoding"]["temperature"] == 0.8
    assert info["decoding"]["neatness"] == pytest.approx(0.4)
    assert info["limits"]["max_text_chars"] == 80
    # what neatness costs in style: the run's decoding curve as slider positions, neat last
    assert info["decoding_curve"] == [
        {"temperature": 1.0, "neatness": 0.0, "CER": 0.24, "STYLE_top1": 0.41},
        {"temperature": 0.5, "neatness": 1.0, "CER": 0.15, "STYLE_top1": 0.39}]
    page = client.get("/")
    assert page.status_code == 200 and "studio.js" in page.text
    for asset in ("/static/studio.js", "/static/studio.css"):
        r = client.get(asset)
        assert r.status_code == 200 and "http://" not in r.text and "https://" not in r.text


def test_check_each_letter_with_the_runs_glyph_reader(run_dir):
    """A run with a glyph reader checks each letter by default (``/api/info`` says so and
    with how many drawings); ``"check": false`` writes the model alone; a bad value, or a
    check asked of a studio without a reader, is a clear 400."""
    run = open_run(run_dir)
    assert run.glyph_reader("tiny") == run_dir / "recognizer" / "tiny" / "glyph_reader.pt"
    lim = Limits(max_char_points=6)
    from cashg.core.config.generate import SamplingOptions

    engine = Engine(run.checkpoints["tiny"], [Writer(*w) for w in list_writers(
        run.style_h5["tiny"])], SamplingOptions(temperature=0.8), None, PreprocessConfig(),
        lim, reader=run.glyph_reader("tiny"), check_k=3)
    with TestClient(create_app(Studio(run, "tiny", engine, lim))) as c:
        assert c.get("/api/info").json()["check"] == {"available": True, "candidates": 3,
                                                      "default": True}
        lines = {}
        for check in (None, True, False):
            body = {"text": "hello", "writer": "w:0", "seed": 4}
            if check is not None:
                body["check"] = check
            lines[check] = _check_line(c, c.post("/api/write", json=body), "hello")["points"]
        assert lines[None] == lines[True] != lines[False]
        bad = c.post("/api/write", json={"text": "hello", "writer": "w:0", "check": "yes"})
        assert bad.status_code == 400 and "'check' must be true or false" in bad.json()["error"]
    with TestClient(create_app(studio_of(run_dir))) as c:  # no reader
        assert c.get("/api/info").json()["check"]["available"] is False
        r = c.post("/api/write", json={"text": "hello", "writer": "w:0", "check": True})
        assert r.status_code == 400 and "no glyph reader" in r.json()["error"]
        assert c.post("/api/write", json={"text": "held", "writer": "w:0"}).status_code == 200


def test_writer_thumbnail_is_a_png_strip(client):
    r = client.get("/api/writer.png", params={"writer": "w:1", "n": 3})
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    from io import BytesIO

    img = Image.open(BytesIO(r.content))
    assert img.size == (3 * 64 + 2 * 2, 64)
    bad = client.get("/api/writer.png", params={"writer": "nobody"})
    assert bad.status_code == 404 and "nobody" in bad.json()["error"]


def _check_line(client, r, text):
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    evs = events(r.text)
    kinds = [k for k, _ in evs]
    assert kinds[0] == "start" and kinds[-1] == "done" and "points" in kinds
    streamed = [p for k, d in evs if k == "points" for p in d["points"]]
    done = evs[-1][1]
    assert done["text"] == text and len(done["points"]) == len(streamed) > 0
    np.testing.assert_allclose(np.array(streamed), np.array(done["points"]), atol=2e-4)
    assert {p[3] for p in done["points"]} == set(range(len(text)))
    assert evs[0][1]["references_png"].startswith("data:image/png;base64,")
    return done


def test_a_streamed_line_and_its_four_downloads(client, tmp_path):
    r = client.post("/api/write", json={"text": "hello world", "writer": "w:0", "seed": 3})
    done = _check_line(client, r, "hello world")
    assert "2 of writer w:0's 3 reference glyphs" in done["note"]
    for fmt, url in done["downloads"].items():
        got = client.get(url)
        assert got.status_code == 200 and len(got.content) > 0, fmt
        path = tmp_path / f"line.{fmt}"
        path.write_bytes(got.content)
        if fmt == "png":
            assert Image.open(path).size[0] > 0
        elif fmt == "h5":
            (s,) = read_ink(path).values()
            assert s.text == "hello world" and len(s.points) == len(done["points"])
        else:
            root = etree.parse(str(path), etree.XMLParser(resolve_entities=False,
                                                          no_network=True)).getroot()
            assert root.tag.endswith("svg" if fmt == "svg" else "ink")
    again = client.post("/api/write", json={"text": "hello world", "writer": "w:0", "seed": 3})
    assert events(again.text)[-1][1]["points"] == done["points"]  # seeded: the same line
    assert client.get("/api/lines/nope.png").status_code == 404
    assert client.get(done["downloads"]["png"].replace(".png", ".pdf")).status_code == 404


def test_a_line_in_drawn_references(client):
    r = client.post("/api/write", json={"text": "ab", "drawing": DRAWING, "neatness": 1.0})
    done = _check_line(client, r, "ab")
    assert "2 of your 3 glyphs" in done["note"]
    one = dict(DRAWING, glyphs=DRAWING["glyphs"][:1])
    r = client.post("/api/write", json={"text": "ab", "drawing": one})
    assert "repeated" in events(r.text)[0][1]["note"]


@pytest.mark.parametrize("body, status, words", [
    ({"text": "", "writer": "w:0"}, 400, "empty"),
    ({"text": "   ", "writer": "w:0"}, 400, "empty"),
    ({"text": "a" * 81, "writer": "w:0"}, 400, "at most 80"),
    ({"text": "hello Zürich", "writer": "w:0"}, 422, "'Z' 'i' 'ü'"),
    ({"text": "ab", "writer": "nobody"}, 404, "unknown writer"),
    ({"text": "ab"}, 400, "either 'writer'"),
    ({"text": "ab", "writer": "w:0", "drawing": DRAWING}, 400, "not both"),
    ({"text": "ab", "drawing": {"height": 100, "glyphs": []}}, 400, "drawing is empty"),
    ({"text": "ab", "drawing": {"height": 0, "glyphs": []}}, 400, "height"),
    ({"text": "ab", "drawing": {"height": 9, "glyphs": [{"strokes": [[[1, "x"]]]}]}}, 400,
     "finite"),
    ({"text": "ab", "drawing": {"height": 9, "glyphs": [{"strokes": [[[1, 2]]]}] * 9}}, 400,
     "at most 8"),
    ({"text": "ab", "drawing": {"height": 9, "glyphs": [{"strokes": [[[1, 2]] * 4001]}]}}, 413,
     "4000 points"),
    ({"text": "ab", "writer": "w:0", "neatness": 2}, 400, "neatness"),
    ({"text": "ab", "writer": "w:0", "seed": -1}, 400, "seed"),
    ({"text": "ab", "writer": "w:0", "seed": 1.5}, 400, "seed"),
    ({"text": "ab", "writer": "w:0", "temperature": 3}, 400, "unknown field"),
    ([1, 2], 400, "JSON object"),
    ({"text": 5, "writer": "w:0"}, 400, "empty"),
])
def test_bad_input_is_a_clear_4xx(client, body, status, words):
    r = client.post("/api/write", json=body)
    assert r.status_code == status and r.headers["content-type"] == "application/json"
    assert words in r.json()["error"]


def test_malformed_and_oversized_bodies(client):
    r = client.post("/api/write", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
    r = client.post("/api/write", content=b"\xff\xfe", headers={"content-type": "application/json"})
    assert r.status_code == 400
    big = json.dumps({"text": "ab", "writer": "w:0", "pad": "x" * 300_000}).encode()
    r = client.post("/api/write", content=big)
    assert r.status_code == 413 and "larger than 262144 bytes" in r.json()["error"]
    r = client.post("/api/write", content=iter([b"{" + b" " * 200_000] * 2))  # chunked
    assert r.status_code == 413


def test_unknown_characters_are_named_with_the_alphabet(client):
    msg = client.post("/api/write", json={"text": "x!", "writer": "w:0"}).json()["error"]
    assert "'!' 'x'" in msg and "abcdehlnorstw" in msg.replace(" ", "")


def test_browse_metrics_pictures_and_report(client):
    b = client.get("/api/browse").json()
    (exp,) = b["experiments"]
    assert exp["metrics"]["scores"] == {"CER": 0.5, "WER": 0.9}
    assert exp["metrics"]["classes"] == {"lower": {"generated": 0.4, "ground_truth": 0.1}}
    assert set(exp["pictures"]) == {"generated", "new_text"}
    for url in exp["pictures"].values():
        assert client.get(url).headers["content-type"] == "image/png"
    html = client.get("/api/report").json()["html"]
    assert "<table>" in html and 'src="/report/images/generated_tiny.png"' in html
    assert "<script>" not in html  # raw HTML in the report is escaped
    assert client.get("/report/images/generated_tiny.png").status_code == 200
    assert client.get("/report/images/..%2Freport.md").status_code == 404
    assert client.get("/api/pictures/tiny/nope.png").status_code == 404


def test_gate_bounds_running_and_waiting():
    gate = Gate(1, 1)
    a, b = gate.admit(), gate.admit()
    assert a.granted and not b.granted and gate.position(b) == 1
    with pytest.raises(QueueFull):
        gate.admit()
    gate.release(a)
    assert b.granted and gate.state()["running"] == 1
    gate.release(b)
    gate.release(b)  # once only
    assert gate.state() == {"running": 0, "waiting": 0, "slots": 1, "queue_size": 1}


def test_full_queue_is_503(run_dir):
    app = create_app(studio_of(run_dir, concurrency=1, queue_size=0))
    with TestClient(app) as c:
        held = app.state.gate.admit()  # the one slot is busy
        r = c.post("/api/write", json={"text": "ab", "writer": "w:0"})
        assert r.status_code == 503 and "busy" in r.json()["error"]
        c.portal.call(app.state.gate.release, held)
        assert c.post("/api/write", json={"text": "ab", "writer": "w:0"}).status_code == 200


def _held_server(run_dir, monkeypatch):
    """A real server with one slot and a queue of one, whose writes wait for ``hold``."""
    studio = studio_of(run_dir, concurrency=1, queue_size=1)
    hold = threading.Event()
    real = studio.engine.write

    def slow(*args):
        hold.wait(20)
        return real(*args)

    monkeypatch.setattr(studio.engine, "write", slow)
    return hold, Server(create_app(studio))


def test_queue_position_is_streamed_and_the_line_follows(run_dir, monkeypatch):
    hold, server = _held_server(run_dir, monkeypatch)
    try:
        body = {"text": "ab", "writer": "w:0"}
        first = threading.Thread(target=httpx.post, args=(server.url + "/api/write",),
                                 kwargs={"json": body, "timeout": 30})
        first.start()
        deadline = time.monotonic() + 10
        while httpx.get(server.url + "/api/info").json()["queue"]["running"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        got = []
        with httpx.stream("POST", server.url + "/api/write", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("event: "):
                    got.append(line[7:])
                    if got == ["queued"]:
                        full = httpx.post(server.url + "/api/write", json=body, timeout=30)
                        assert full.status_code == 503
                        hold.set()
                elif line.startswith("data: ") and got == ["queued"]:
                    assert json.loads(line[6:]) == {"position": 1}
        assert got[0] == "queued" and got[-1] == "done"
        first.join(30)
    finally:
        hold.set()
        server.stop()


def test_a_request_past_its_timeout_is_stopped(run_dir):
    studio = studio_of(run_dir, timeout_s=0.001, max_char_points=100)
    with TestClient(create_app(studio)) as c:
        t = time.perf_counter()
        r = c.post("/api/write", json={"text": "hello world " * 6, "writer": "w:0"})
        assert r.status_code == 200 and time.perf_counter() - t < 10
        kind, data = events(r.text)[-1]
        assert kind == "error" and data["status"] == 504 and "0.001 s" in data["error"]
        assert c.get("/api/info").json()["queue"]["running"] == 0  # the slot came back


def test_drawn_references_use_the_subsets_renderer_and_preprocessing():
    from cashg.core.records import EOC, PU
    from cashg.core.style_render import render_glyph

    glyph = references.DrawnGlyph([np.array([[0.0, 0.0], [0.0, 100.0]]),
                                   np.array([[0.0, 50.0], [40.0, 50.0]])], 100.0, "t")
    pre = PreprocessConfig()
    xy, pen = references.glyph_trajectory(glyph, pre)
    assert pen[-1] == EOC and (pen == PU).sum() == 1
    assert np.abs(np.diff(xy[: np.argmax(pen == PU) + 1, 1])).max() <= 0.04 + 1e-9
    style = StyleConfig()
    np.testing.assert_array_equal(references.glyph_image(glyph, pre, style),
                                  render_glyph(xy, pen, style))
    imgs, note = references.reference_images([glyph], 3, pre, style)
    assert imgs.shape == (3, 64, 64) and imgs.max() == 1.0 and "repeated" in note
    assert list(references.select(8, 4)[0]) == [0, 2, 5, 7]


def test_neatness_maps_to_temperature():
    assert temperature_for(0) == 1.0 and temperature_for(1) == 0.5
    assert neatness_for(0.8) == pytest.approx(0.4) and temperature_for(7) == 0.5


def test_a_lone_checkpoint_with_a_style_h5_and_bad_runs(run_dir, tmp_path, capsys):
    from cashg.cli import main

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    ckpt = run_dir / "train" / "tiny" / "model.pt"
    style = run_dir / "subsets" / "tiny" / "test" / "style.h5"
    studio = build_studio(parser.parse_args(["--run", str(ckpt), "--style-h5", str(style)]))
    assert studio.experiment == "tiny" and list(studio.engine.writers) == list(WRITERS)
    assert studio.run.report() is None and studio.run.metrics("tiny") is None
    assert main(["studio", "--run", str(tmp_path / "nothing")]) == 2
    assert "neither a results folder nor a checkpoint" in capsys.readouterr().err
    assert main(["studio", "--run", str(run_dir), "--experiment", "other"]) == 2
    assert "no experiment 'other'" in capsys.readouterr().err
    assert main(["studio", "--run", str(ckpt), "--style-h5", str(tmp_path / "x.h5")]) == 2


def test_a_client_gone_from_the_queue_frees_its_place(run_dir, monkeypatch):
    hold, server = _held_server(run_dir, monkeypatch)
    body = {"text": "ab", "writer": "w:0"}
    info = server.url + "/api/info"
    try:
        first = threading.Thread(target=httpx.post, args=(server.url + "/api/write",),
                                 kwargs={"json": body, "timeout": 30})
        first.start()
        deadline = time.monotonic() + 10
        while httpx.get(info).json()["queue"]["running"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with httpx.stream("POST", server.url + "/api/write", json=body, timeout=30) as r:
            assert next(r.iter_lines()) == "event: queued"
        while httpx.get(info).json()["queue"]["waiting"]:  # it left: its place is free
            assert time.monotonic() < deadline
            time.sleep(0.05)
        hold.set()
        first.join(30)
        assert httpx.get(info).json()["queue"]["running"] == 0
    finally:
        hold.set()
        server.stop()


def test_a_relative_gap_model_is_given_the_writers_gap_from_its_lines(tmp_path):
    """With ``model.relative_gap`` the studio gives a known writer the median gap of its lines
    beside its references (the test split's gt.h5) and says so; drawn glyphs and a writer
    without lines get the population's."""
    from studio_run import _style_h5

    from cashg.core.config.generate import SamplingOptions
    from cashg.core.ink import make_sentence, write_ink
    from cashg.core.pen_states import insert_spaces
    from cashg.model import CASHG
    from cashg.model.checkpoint import save_model_checkpoint
    from cashg.model.presets import TINY, with_changes
    from cashg.studio.requests import WriteRequest

    cfg = with_changes(TINY, relative_gap=True)
    torch.manual_seed(0)
    save_model_checkpoint(tmp_path / "model.pt", CASHG(cfg), cfg,
                          {"char_inventory": list(INVENTORY)})
    split = tmp_path / "test"
    _style_h5(split / "style.h5")
    xy = np.array([[0.0, 0.0], [1.0, 1.0], [1.5, 0.0], [2.5, 1.0]])  # "a b": a gap of 0.5
    line = insert_spaces(xy, np.zeros(4, np.int8), np.array([0, 0, 2, 2]), "a b")
    write_ink(split / "gt.h5", [make_sentence("l0", WRITERS[0], "a b", line[0], line[1],
                                              line[2])])
    engine = Engine(tmp_path / "model.pt", [Writer(w, "test", split / "style.h5")
                                            for w in WRITERS],
                    SamplingOptions(temperature=0.8), None, PreprocessConfig(),
                    Limits(max_char_points=4))
    try:
        known = WriteRequest("ab", WRITERS[0], None, None, 0)
        assert engine.writer_word_gap(known) == pytest.approx(0.5)
        assert engine.writer_word_gap(WriteRequest("ab", WRITERS[1], None, None, 0)) is None
        assert engine.writer_word_gap(WriteRequest("ab", None, [], None, 0)) is None
        notes = []
        engine.write(known, SamplingOptions(seed=0, max_char_points=4, min_char_points=1),
                     lambda kind, data: notes.append(data.get("note")), lambda: False)
        assert "word gap 0.500" in notes[0]
    finally:
        engine.close()
