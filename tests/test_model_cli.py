"""``cashg generate`` from a tiny randomly initialised checkpoint, to every output format."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
from lxml import etree
from PIL import Image

from cashg.cli import main
from cashg.core.ink import read_ink
from cashg.model import CASHG
from cashg.model.checkpoint import save_model_checkpoint
from cashg.model.presets import TINY

torch.set_num_threads(1)


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


def test_generate_from_style_h5(ckpt, tmp_path):
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
    assert main(["generate", "--checkpoint", str(ckpt / "tiny.pt"), "--text", "ab",
                 "--writer", "nobody", "--style-h5", str(path), "--out", str(out)]) == 1


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
