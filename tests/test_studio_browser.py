"""``cashg studio`` in a real headless Chromium (Playwright): open the page, type a sentence,
pick a writer, write, see strokes arrive and drawn; then draw glyphs with the mouse and write in
that style. Screenshots go to the test's tmp folder and, with ``CASHG_SCREENSHOTS=DIR``, there.

Needs Playwright (dev extra) and a Chromium: ``CASHG_CHROMIUM`` or ``chromium`` /
``chromium-browser`` / ``google-chrome`` on PATH (scripts/test.sh installs the Debian package
when it can); without one the test is SKIPPED with a message saying how to install it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from studio_run import Server, make_tiny_run

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL = ("no Chromium found for the studio browser test: install one (Debian/Ubuntu: "
           "`apt-get install -y chromium`; or `python -m playwright install chromium`) or set "
           "CASHG_CHROMIUM=/path/to/chrome")


def chromium() -> str | None:
    given = os.environ.get("CASHG_CHROMIUM")
    if given:
        return given if Path(given).is_file() else None
    for name in CANDIDATES:
        if path := shutil.which(name):
            return path
    return None


def ink_pixels(page) -> int:
    """Non-white pixels of the generated line's canvas."""
    return page.evaluate("""() => {
        const c = document.getElementById('ink');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 200 || d[i + 1] < 200) n++;
        return n; }""")


def shoot(page, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / name), full_page=True)
    out = os.environ.get("CASHG_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / name, Path(out) / name)


@pytest.fixture(scope="module")
def browser_exe() -> str:
    """The Chromium to drive, or a loud skip saying how to get one (before any set-up)."""
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (the dev extra) "
                        "for the studio browser test")
    exe = chromium()
    if exe is None:
        pytest.skip(INSTALL)
    return exe


@pytest.fixture(scope="module")
def server(browser_exe, tmp_path_factory):
    from cashg.core.config.data import PreprocessConfig
    from cashg.core.config.generate import SamplingOptions
    from cashg.studio.app import Studio, create_app
    from cashg.studio.engine import Engine, Writer
    from cashg.studio.limits import Limits
    from cashg.studio.run import list_writers, open_run

    run = open_run(make_tiny_run(tmp_path_factory.mktemp("studio_browser")))
    limits = Limits(max_char_points=8)
    engine = Engine(run.checkpoints["tiny"], [Writer(*w) for w in
                                              list_writers(run.style_h5["tiny"])],
                    SamplingOptions(temperature=0.8), None, PreprocessConfig(), limits,
                    reader=run.glyph_reader("tiny"), check_k=2)
    srv = Server(create_app(Studio(run, "tiny", engine, limits)))
    yield srv
    srv.stop()


def test_write_a_line_in_the_browser(browser_exe, server, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_exe, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        bodies: list[dict] = []
        page.on("request", lambda r: bodies.append(r.post_data_json)
                if r.url.endswith("/api/write") else None)
        page.goto(server.url + "/")
        page.wait_for_selector(".writer[data-writer='w:1']")
        # what neatness costs in style, from the run's decoding curve
        cost = page.text_content("#neat-cost")
        assert "temperature 0.5: misread 15 % of characters, style recognised 39 %" in cost
        page.fill("#text", "hello world")
        page.click(".writer[data-writer='w:1']")
        assert page.get_attribute(".writer[data-writer='w:1']", "class").endswith("selected")
        page.click("#write")
        page.wait_for_selector("#downloads:not([hidden])", timeout=30_000)
        assert int(page.text_content("#points-count")) > 10
        assert ink_pixels(page) > 50, "the streamed strokes were not drawn"
        assert "done" in page.text_content("#status")
        assert page.is_checked("#check") and bodies[-1]["check"] is True  # on by default
        shoot(page, tmp_path, "studio-writer.png")
        first = page.get_attribute("#ink", "data-points")
        page.uncheck("#check")  # the model alone: another drawing of the same line
        page.click("#write")
        page.wait_for_function("document.getElementById('status').textContent"
                               ".startsWith('done')", timeout=30_000)
        assert bodies[-1]["check"] is False and ink_pixels(page) > 50
        assert page.get_attribute("#ink", "data-points") != first or bodies[-2]["check"]
        page.check("#check")

        page.check("input[value=drawing]")  # my own handwriting: draw in three boxes
        box = page.locator("#pad").bounding_box()
        w = box["width"] / 8
        for i in range(3):
            x0, y0 = box["x"] + i * w + 0.3 * w, box["y"] + 0.2 * box["height"]
            page.mouse.move(x0, y0)
            page.mouse.down()
            for k in range(1, 12):
                page.mouse.move(x0 + 0.4 * w * k / 11, y0 + 0.6 * box["height"] * (k % 2))
            page.mouse.up()
        assert "3 glyph(s)" in page.text_content("#pad-info")
        page.fill("#text", "dear")
        page.click("#write")
        page.wait_for_function("document.getElementById('status').textContent"
                               ".startsWith('done')", timeout=30_000)
        assert "2 of your 3 glyphs" in page.text_content("#refs-note")
        assert int(page.get_attribute("#ink", "data-points")) > 4 and ink_pixels(page) > 50
        shoot(page, tmp_path, "studio-drawn.png")

        page.fill("#text", "ZZZ")  # a bad input shows the server's message
        page.click("#write")
        page.wait_for_selector(".status.error")
        assert "cannot write 'Z'" in page.text_content("#status")

        page.click("#tab-browse")
        page.wait_for_selector("#report table")
        assert page.locator(".card img").count() == 2
        shoot(page, tmp_path, "studio-browse.png")
        assert errors == []
        browser.close()
