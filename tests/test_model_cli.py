"""``cashg generate`` from a tiny randomly initialised checkpoint, to every output format: the
decoding defaults from a params file, the writers of a style file, cropped pictures."""

from __future__ import annotations

import dataclasses
import re

import h5py
import numpy as np
import pytest
import torch
from lxml import etree
from PIL import Image

from cashg.cli import main
from cashg.core.config.generate import SamplingOptions
from cashg.core.ink import read_ink
from cashg.generation.render import MARGIN
from cashg.model import CASHG
from cashg.model.checkpoint import save_model_checkpoint
from cashg.model.presets import TINY

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _away_from_the_repository(tmp_path, monkeypatch):
    """Run in an empty folder: the repository's ``params.yaml`` must not set the decoding."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("gen")
    torch.manual_seed(0)
    m = CASHG(TINY)
    save_model_checkpoint(d / "tiny.pt", m, TINY, {"char_inventory": list("abc ")})
    styles = d / "refs"
    styles.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):  # dark ink on a light background, not 64x64
        img = np.full((50, 40), 255, np.uint8)
        img[10:40, 15 + i:20 + i] = 0
        Image.fromarray(img).save(styles / f"ref{i}.png")
    Image.fromarray((rng.random((8, 8)) * 255).astype(np.uint8)).save(styles / "z.png")
    return d


@pytest.mark.parametrize("ext", [".png", ".svg", ".inkml", ".h5"])
def test_generate_each_format(ckpt, ext, capsys):
    out = ckpt / f"out{ext}"
    rc = main(["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "ab cx",
               "--style-images", str(ckpt / "refs"), "--out", str(out), "--seed", "3",
               "--max-char-points", "8"])
    assert rc == 0 and out.is_file() and out.stat().st_size > 0
    assert "never seen in training: ['x']" in capsys.readouterr().err
    if ext == ".h5":
        (s,) = read_ink(out).values()
        assert s.text == "ab cx" and set(s.char_index.tolist()) == set(range(5))
    elif ext in (".svg", ".inkml"):
        root = etree.parse(str(out), etree.XMLParser(resolve_entities=False, no_network=True))
        assert root.getroot().tag.endswith("svg" if ext == ".svg" else "ink")
    else:
        assert Image.open(out).size[0] > 0


def test_generate_is_deterministic_and_strict(ckpt):
    args = ["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "abc",
            "--style-images", str(ckpt / "refs"), "--max-char-points", "8"]
    main(args + ["--out", str(ckpt / "a.h5")])
    main(args + ["--out", str(ckpt / "b.h5")])
    pa = read_ink(ckpt / "a.h5")["gen-00000"].points
    pb = read_ink(ckpt / "b.h5")["gen-00000"].points
    np.testing.assert_array_equal(pa, pb)
    strict = ["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "zz", "--strict",
              "--style-images", str(ckpt / "refs"), "--out", str(ckpt / "c.h5")]
    assert main(strict) == 1
    assert main(args + ["--out", str(ckpt / "c.pdf")]) == 2


def test_generate_from_style_h5(ckpt, tmp_path, capsys):
    # a minimal style.h5 through the subsets writer's own reader contract
    from cashg.core.subsets.readers import StyleReader

    path = tmp_path / "style.h5"
    try:
        from cashg.core.subsets.schema import FORMAT, SCHEMA_VERSION
        from preprocessing.subsets import style_images  # noqa: F401
    except ImportError:  # pragma: no cover - the subsets package is built concurrently
        pytest.skip("preprocessing.subsets not available")
    with h5py.File(path, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["kind"] = "style"
        f.attrs["n_samples"] = 4
        f.create_dataset("writers", data=np.array(["w0", "w1"], dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("writer_offsets", data=np.array([0, 2, 4], np.int64))
        f.create_dataset("images", data=np.zeros((4, 64, 64), np.uint8))
        f.create_dataset("char", data=np.array(list("abab"), dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("glyph_index", data=np.arange(4))
    try:
        StyleReader(path)
    except Exception as exc:  # the schema header may carry more required attributes
        pytest.skip(f"hand-made style.h5 not accepted by StyleReader: {exc}")
    out = tmp_path / "o.h5"
    rc = main(["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "ab",
               "--writer", "w1", "--style-h5", str(path), "--out", str(out),
               "--max-char-points", "5"])
    assert rc == 0 and read_ink(out)["gen-00000"].writer_id == "w1"
    capsys.readouterr()
    # an unknown id fails before the model loads (the checkpoint does not even exist)
    assert main(["generate", "--checkpoint", str(tmp_path / "missing.pt"), "--text", "ab",
                 "--writer", "brush:5", "--style-h5", str(path), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"no writer 'brush:5' in {path}; its writers: w0, w1\n" in err


def test_generate_uses_the_checkpoints_number_of_style_references(ckpt, monkeypatch):
    """Without ``--n-refs`` the CLI conditions on the checkpoint's ``model.style_refs`` (the
    number the model was trained with; TINY: 2 of the folder's 4 images); ``--n-refs``
    overrides it."""
    import cashg.generation.sampling

    seen = []
    real = cashg.generation.sampling.generate_sentences

    def spy(model, texts, refs, opts, **kw):
        seen.append(int(refs.shape[0]))
        return real(model, texts, refs, opts, **kw)

    monkeypatch.setattr(cashg.generation.sampling, "generate_sentences", spy)
    args = ["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "ab",
            "--style-images", str(ckpt / "refs"), "--max-char-points", "4",
            "--out", str(ckpt / "n.h5")]
    assert main(args) == 0 and main(args + ["--n-refs", "3"]) == 0
    assert seen == [TINY.style_refs, 3] and TINY.style_refs == 2


def test_checkpoint_without_model_style_refs_gets_its_training_number(ckpt, tmp_path):
    """A checkpoint written when the number was ``train.style_refs`` loads with that number."""
    from cashg.model.checkpoint import load_model

    payload = torch.load(ckpt / "tiny.pt", weights_only=True)
    del payload["model_config"]["style_refs"]
    payload["extra"]["params"] = {"train": {"style_refs": 7}}
    torch.save(payload, tmp_path / "old.pt")
    assert load_model(tmp_path / "old.pt")[1].style_refs == 7
    del payload["extra"]["params"]
    torch.save(payload, tmp_path / "older.pt")
    assert load_model(tmp_path / "older.pt")[1].style_refs == 15  # the authors' number


def test_checkpoint_with_a_removed_option_loads_where_it_was_off(ckpt, tmp_path):
    """A checkpoint written before an option measured and not kept left the model config
    stores its key: off, it loads as if the key were not there; on, it is refused by name."""
    from cashg.model.checkpoint import REMOVED_MODEL_KEYS, CheckpointError, load_model

    payload = torch.load(ckpt / "tiny.pt", weights_only=True)
    for key in REMOVED_MODEL_KEYS:
        payload["model_config"][key] = False
    torch.save(payload, tmp_path / "off.pt")
    assert load_model(tmp_path / "off.pt")[1] == TINY
    for key in REMOVED_MODEL_KEYS:
        payload["model_config"][key] = True
        torch.save(payload, tmp_path / "on.pt")
        with pytest.raises(CheckpointError, match=f"model.{key}, an option"):
            load_model(tmp_path / "on.pt")
        payload["model_config"][key] = False


def _spy_options(monkeypatch) -> list[SamplingOptions]:
    """Record the sampling options of each generation (run with at most 4 points per
    character, to stay fast)."""
    import cashg.generation.sampling

    seen = []
    real = cashg.generation.sampling.generate_sentences

    def spy(model, texts, refs, opts, **kw):
        seen.append(opts)
        return real(model, texts, refs, dataclasses.replace(opts, max_char_points=4), **kw)

    monkeypatch.setattr(cashg.generation.sampling, "generate_sentences", spy)
    return seen


def test_decoding_defaults_come_from_the_params_file_and_flags_win(ckpt, tmp_path, monkeypatch,
                                                                   capsys):
    seen = _spy_options(monkeypatch)
    params = tmp_path / "tuned.yaml"
    params.write_text("generate:\n  temperature: 0.5\n  space_mode: true\n  seed: 7\n")
    args = ["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "ab",
            "--style-images", str(ckpt / "refs"), "--out", str(tmp_path / "o.h5")]
    tuned = SamplingOptions(temperature=0.5, space_mode=True, seed=7)

    assert main(args + ["--params", str(params)]) == 0
    assert seen[-1] == tuned
    assert (f"cashg generate: decoding from {params}: temperature 0.5, bias 0.0, space_mode,"
            " seed 7\n") in capsys.readouterr().err

    assert main(args + ["--params", str(params), "--temperature", "1.5", "--no-space-mode"]) == 0
    assert seen[-1] == dataclasses.replace(tuned, temperature=1.5, space_mode=False)
    assert (f"decoding from {params} and --temperature --space-mode: temperature 1.5, bias 0.0,"
            " seed 7\n") in capsys.readouterr().err

    assert main(args) == 0  # no params.yaml here: the built-in defaults
    assert seen[-1] == SamplingOptions()
    assert "decoding from the built-in defaults: temperature 1.0" in capsys.readouterr().err

    (tmp_path / "params.yaml").write_text(params.read_text())  # ./params.yaml is found
    assert main(args) == 0 and seen[-1] == tuned
    assert "decoding from params.yaml: temperature 0.5" in capsys.readouterr().err
    assert main(args + ["--no-params"]) == 0 and seen[-1] == SamplingOptions()

    (tmp_path / "params.yaml").write_text("generate:\n  temprature: 0.5\n")  # a typo: refused
    assert main(args) == 2 and len(seen) == 5
    assert "temprature" in capsys.readouterr().err


def _ink_box(path) -> tuple[np.ndarray, np.ndarray]:
    """Corners of the drawn points of the one line of a cashg-ink file (spaces left out)."""
    (s,) = read_ink(path).values()
    drawn = np.array([not s.text[c].isspace() for c in s.char_index])
    return s.xy[drawn].min(0), s.xy[drawn].max(0)


def test_png_is_width_pixels_wide_and_cropped_to_the_ink(ckpt, tmp_path):
    args = ["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "ab",
            "--style-images", str(ckpt / "refs"), "--seed", "2", "--max-char-points", "6"]
    assert main(args + ["--out", str(tmp_path / "a.h5")]) == 0
    assert main(args + ["--out", str(tmp_path / "a.png"), "--width", "320"]) == 0
    lo, hi = _ink_box(tmp_path / "a.h5")
    w, h = hi - lo + 2 * MARGIN
    img = np.asarray(Image.open(tmp_path / "a.png").convert("L"))
    assert img.shape == (min(round(320 * h / w), 8 * 320), 320)
    dark = img < 128
    rows, cols = np.flatnonzero(dark.any(1)), np.flatnonzero(dark.any(0))
    margin_px = MARGIN * 320 / w
    for gap in (rows[0], cols[0], img.shape[0] - 1 - rows[-1], img.shape[1] - 1 - cols[-1]):
        assert gap <= margin_px + 1, (gap, margin_px)  # ink reaches each border's margin


def test_svg_is_smooth_paths_cropped_to_the_ink(ckpt, tmp_path):
    args = ["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "ab c",
            "--style-images", str(ckpt / "refs"), "--seed", "2", "--max-char-points", "6"]
    assert main(args + ["--out", str(tmp_path / "a.h5")]) == 0
    assert main(args + ["--out", str(tmp_path / "a.svg"), "--width", "640"]) == 0
    root = etree.parse(str(tmp_path / "a.svg"),
                       etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
    lo, hi = _ink_box(tmp_path / "a.h5")
    box = [float(v) for v in root.get("viewBox").split()]
    np.testing.assert_allclose(box, [0, 0, *(hi - lo + 2 * MARGIN)], atol=2e-4)
    assert root.get("width") == "640"
    svg = (tmp_path / "a.svg").read_text()
    assert "<polyline" not in svg and re.search(r'<path d="M[-\d.,]+ C', svg)


def test_writer_lists_are_in_natural_order_and_cut_after_30():
    from cashg.generation.inputs import list_names

    assert list_names(["brush:10", "brush:9", "a"]) == "a, brush:9, brush:10"
    many = list_names([f"w{i}" for i in range(45)])
    assert many.startswith("w0, w1, w2,") and many.endswith(", w29, ... (45 in all)")


def _tiny_reader(path):
    from cashg.core.config.recognizer import GlyphReaderConfig
    from cashg.recognition.glyphs import GlyphReader, GlyphReaderNet

    cfg = GlyphReaderConfig(width=4)
    torch.manual_seed(0)
    GlyphReader(GlyphReaderNet(3, cfg.image_size, cfg.width), "abc", cfg).save(path)
    return path


def test_generate_checks_each_character_with_a_glyph_reader(ckpt, tmp_path, capsys):
    """``--check K --reader FILE`` keeps the best of K drawings per character; a check without
    a reader is a clear error; without ``--check`` and no reader the model writes alone."""
    reader = _tiny_reader(tmp_path / "glyph_reader.pt")
    base = ["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "ab ca",
            "--style-images", str(ckpt / "refs"), "--seed", "2", "--max-char-points", "6"]
    out = tmp_path / "checked.h5"
    assert main([*base, "--out", str(out), "--check", "3", "--reader", str(reader)]) == 0
    assert f"each character checked 3 times by {reader}" in capsys.readouterr().err
    (checked,) = read_ink(out).values()
    assert checked.text == "ab ca" and set(checked.char_index.tolist()) == set(range(5))
    alone = tmp_path / "alone.h5"
    assert main([*base, "--out", str(alone)]) == 0
    assert "the model alone (no glyph reader found for --check)" in capsys.readouterr().err
    assert not np.array_equal(read_ink(alone)["gen-00000"].xy, checked.xy)
    assert main([*base, "--out", str(alone), "--check", "2"]) == 2
    assert "--check 2 needs a glyph reader" in capsys.readouterr().err
    assert main([*base, "--out", str(alone), "--check", "2", "--reader",
                 str(tmp_path / "none.pt")]) == 2
    assert "none.pt" in capsys.readouterr().err
