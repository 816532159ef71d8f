"""New text (``new_text@<experiment>``): sentences outside the training data, in test writers'
styles, read back by the recognizer."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from params_edits import params_error

from cashg.core.params import load_params
from cashg.evaluation.new_text import (
    NewTextError,
    check_characters,
    check_kept_out,
    deal_prompts,
    found_in_training,
    pick_writers,
    read_sentences,
    score_lines,
    training_lines,
)
from cashg.evaluation.protocols import CLASS_ERROR_KEYS

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "resources" / "new_text" / "en.txt"


# --------------------------------------------------------------------------- the sentences file
def test_read_sentences_skips_comments_and_blank_lines(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("# a comment\n\n  Quirky gnomes paddle.  \nSecond line, 12:30!\n   \n",
                    encoding="utf-8")
    assert read_sentences(path) == ("Quirky gnomes paddle.", "Second line, 12:30!")


@pytest.mark.parametrize("text, message", [
    ("A line.\nB line.\nA line.\n", r"s.txt:3: 'A line.' is listed twice \(first on line 1\)"),
    ("# only a comment\n\n", "s.txt: no sentences"),
])
def test_read_sentences_errors_name_the_file(tmp_path, text, message):
    path = tmp_path / "s.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(NewTextError, match=message):
        read_sentences(path)
    with pytest.raises(NewTextError, match="sentences file not found"):
        read_sentences(tmp_path / "none.txt")


def test_shipped_sentences_are_new_ascii_text_in_the_demo_alphabet():
    """The project's own sentences: about 20 lines of 20-45 ASCII characters, in the
    characters the demo corpus writes, mostly of words the demo corpus never uses, with
    capitals inside the line, digits and punctuation."""
    from preprocessing.demo.text import (
        ACRONYMS,
        CONTRACTIONS,
        END_MARKS,
        GLYPH_ALPHABET,
        NAMES,
        WORDS,
    )

    sentences = read_sentences(SHIPPED)
    assert 15 <= len(sentences) <= 30
    alphabet = set(GLYPH_ALPHABET) | set("".join(END_MARKS + CONTRACTIONS + ACRONYMS))
    alphabet |= set(' ,"()-:.')  # _decorate, compounds, times and prices
    demo_words = {w.lower() for w in WORDS + NAMES}
    for s in sentences:
        assert 20 <= len(s) <= 45 and s.isascii(), s
        assert set(s) <= alphabet, (s, set(s) - alphabet)
        words = [w.lower() for w in re.findall(r"[A-Za-z']+", s)]
        assert sum(w in demo_words for w in words) < len(words) / 2, s
    text = "".join(sentences)
    assert any(ch.isdigit() for ch in text)
    assert any(ch.isupper() for s in sentences for ch in s[1:])
    assert set(",.!?'-") <= set(text)


# --------------------------------------------------------------------------- the checks
def test_training_lines_are_rebuilt_from_their_windows():
    windows = [("a", 0, "Hello big"), ("a", 6, "big world"), ("b", 0, "one"), ("b", 4, "two")]
    assert training_lines(windows) == {"a": "Hello big world", "b": "one two"}


def test_kept_out_check_names_the_sentence_and_the_line():
    lines = {"w1-003": "Yesterday Quirky gnomes paddle kayaks.", "w2-001": "Nothing here."}
    fresh = "Pelicans juggle plums."
    assert found_in_training([fresh], lines) == {}
    check_kept_out([fresh], lines, "train")
    # whitespace runs count as one space; the match is exact otherwise (case-sensitive)
    assert found_in_training(["Quirky  gnomes paddle", "quirky gnomes"], lines) == {
        "Quirky  gnomes paddle": "w1-003"}
    with pytest.raises(NewTextError) as err:
        check_kept_out([fresh, "Quirky gnomes paddle"], lines, "results/subsets/x/train")
    msg = str(err.value)
    assert "'Quirky gnomes paddle' (in training line w1-003)" in msg
    assert "results/subsets/x/train" in msg and fresh not in msg


def test_out_of_inventory_characters_are_named_with_their_sentences():
    check_characters(["ab c"], "abc ", "the model's characters")
    with pytest.raises(NewTextError) as err:
        check_characters(["ab~c", "a\u00e9", "cab"], "abc ", "the characters model.pt trained on")
    msg = str(err.value)
    assert "'~\u00e9'" in msg and "the characters model.pt trained on" in msg
    assert "'~' in 'ab~c'" in msg and "'\u00e9' in 'a\u00e9'" in msg and "'cab'" not in msg


def test_writers_and_prompts_are_dealt_deterministically():
    writers = [f"brush:{i}" for i in range(150, 170)]
    picked = pick_writers(list(reversed(writers)), 10)
    assert picked == pick_writers(writers, 10) and len(set(picked)) == 10
    assert picked[0] == "brush:150" and picked[-1] == "brush:169"
    assert pick_writers(writers[:3], 10) == writers[:3]
    prompts = deal_prompts(("s0", "s1", "s2"), ["w0", "w1"], 2)
    assert [(p.writer_id, p.text) for p in prompts] == [("w0", "s0"), ("w0", "s1"),
                                                         ("w1", "s2"), ("w1", "s0")]
    assert [p.sentence_id for p in prompts] == ["w0-new00", "w0-new01", "w1-new02", "w1-new00"]


def test_score_lines_gives_the_class_keys_and_counts():
    metrics, rows = score_lines(["Ab 1.", "Cd"], ["ab 1", "Cx"])
    assert list(metrics)[:2 + len(CLASS_ERROR_KEYS)] == ["CER", "WER", *CLASS_ERROR_KEYS]
    assert metrics["CER"] == pytest.approx(3 / 7) and metrics["ERR_punct"] == 1.0
    assert metrics["ERR_upper"] is None  # no upper-case letter after a line's start
    assert metrics["lines"] == 2 and metrics["chars"] == 7 and metrics["char_edits"] == 3
    assert metrics["class_wrong"]["initial"] == 1 and metrics["class_total"]["initial"] == 2
    assert rows[1] == {"text": "Cd", "decoded": "Cx", "cer": 0.5, "wer": 1.0}


# --------------------------------------------------------------------------- the stage
@pytest.fixture(scope="module")
def tiny_run(tiny_train_subsets, tmp_path_factory):
    """A random tiny checkpoint that records the tiny benchmark's characters, a random tiny
    recognizer over the same characters, and three sentences of those characters that occur
    in no training line."""
    from cashg.core.config.recognizer import RecognizerFeatureConfig, RecognizerModelConfig
    from cashg.core.subsets.readers import SentenceReader
    from cashg.model import CASHG
    from cashg.model.checkpoint import save_model_checkpoint
    from cashg.model.presets import TINY
    from cashg.recognition.ctc import Alphabet
    from cashg.recognition.model import RecognizerNet
    from cashg.recognition.recognizer import Recognizer
    from cashg.training.data import char_inventory

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("new_text")
    inventory = char_inventory(tiny_train_subsets / "train")
    torch.manual_seed(0)
    save_model_checkpoint(root / "model.pt", CASHG(TINY), TINY, {"char_inventory": inventory})
    rec_cfg = RecognizerModelConfig(conv_channels=16, hidden=16, layers=1, downsample=2)
    alphabet = Alphabet(inventory)
    Recognizer(RecognizerNet(rec_cfg, alphabet.n_classes), alphabet, rec_cfg,
               RecognizerFeatureConfig(), np.zeros(3), np.ones(3)).save(root / "recognizer.pt")
    letters = "".join(c for c in inventory if c.isalpha())
    sentences = [f"{letters[i::4][:7]} {letters[::-1][i:i + 5]}" for i in range(3)]
    with SentenceReader(tiny_train_subsets / "train" / "sentence.h5") as reader:
        windows = reader.texts()
    assert found_in_training(sentences, training_lines(windows)) == {}
    return {"root": root, "subsets": tiny_train_subsets, "inventory": inventory,
            "sentences": sentences, "training_window": windows[0][2]}


def _run(tiny_run, tmp_path, sentences, writers=2, per_writer=2, extra=()):
    from cashg.evaluation.new_text_stage import main

    text = tmp_path / "sentences.txt"
    text.write_text("# test sentences\n" + "\n".join(sentences) + "\n", encoding="utf-8")
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["new_text"].update(sentences=str(text), writers=writers, per_writer=per_writer)
    params["generate"]["max_char_points"] = 6  # a random model rarely ends a character
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    out = tmp_path / "out"
    root = tiny_run["root"]
    rc = main(["--checkpoint", str(root / "model.pt"), "--subsets", str(tiny_run["subsets"]),
               "--recognizer", str(root / "recognizer.pt"), "--out", str(out),
               "--params", str(path), "--device", "cpu", "--threads", "1", "--no-progress",
               *extra])
    return rc, out


def test_stage_writes_metrics_lines_picture_and_ink(tiny_run, tmp_path, capsys):
    from PIL import Image

    from cashg.core.ink import read_ink

    sentences = tiny_run["sentences"]
    rc, out = _run(tiny_run, tmp_path, sentences, writers=2, per_writer=2)
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "recognizer CER" in err and "error share by character class" in err
    metrics = json.loads((out / "metrics.json").read_text())
    for key in ("CER", "WER", *CLASS_ERROR_KEYS, "lines", "chars", "char_edits", "words",
                "word_edits", "class_wrong", "class_total", "insertions"):
        assert key in metrics, key
    assert metrics["CER"] is not None and metrics["lines"] == 2 * 2
    lines = pd.read_csv(out / "lines.csv", keep_default_na=False)
    assert list(lines.columns) == ["writer", "sentence_id", "text", "decoded", "cer", "wer"]
    assert len(lines) == 2 * 2  # writers x per_writer
    assert lines["writer"].value_counts().to_dict() == {"brush:4": 2, "brush:5": 2}
    assert list(lines["text"]) == [sentences[j % 3] for j in range(4)]
    ink = read_ink(out / "generated.h5")
    assert set(ink) == set(lines["sentence_id"])
    assert all(ink[i].writer_id == w and ink[i].text == t
               for i, w, t in zip(lines["sentence_id"], lines["writer"], lines["text"]))
    with Image.open(out / "lines.png") as im:
        assert im.format == "PNG" and im.size[1] > im.size[0] / 10
    details = json.loads((out / "details.json").read_text())
    assert details["writers"] == ["brush:4", "brush:5"] and details["sentences"] == 3


def test_stage_counts_runaway_lines_and_scores_style(tiny_run, tmp_path, capsys):
    """RUNAWAY (always) and, with the benchmark's style scorer, the Style Score of the new
    lines against the writers they were asked to imitate."""
    from cashg.core.ink import read_ink
    from cashg.evaluation.style_score import fit_scorer

    scorer = fit_scorer(list(read_ink(tiny_run["subsets"] / "test" / "gt.h5").values()))
    path = scorer.save(tmp_path / "scorer.json")
    rc, out = _run(tiny_run, tmp_path, tiny_run["sentences"], extra=("--style-scorer", str(path)))
    err = capsys.readouterr().err
    assert rc == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["STYLE_lines"] == 4 and 0.0 <= metrics["STYLE_top1"] <= 1.0
    assert metrics["STYLE_top5"] == 1.0  # two writers: always among the first five
    assert 0 <= metrics["RUNAWAY"] <= 4 and "lines run away" in err
    runaway = json.loads((out / "details.json").read_text())["runaway"]
    assert len(runaway["lines"]) == metrics["RUNAWAY"]


def test_stage_skips_a_sentence_of_the_training_lines_and_names_it(tiny_run, tmp_path,
                                                                   capsys):
    window = tiny_run["training_window"]
    rc, out = _run(tiny_run, tmp_path, [tiny_run["sentences"][0], window], per_writer=1)
    err = capsys.readouterr().err
    assert rc == 0, err
    assert f"skipped {window!r}: occurs in training line" in err
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["sentences_asked"], metrics["sentences_written"],
            metrics["sentences_skipped"]) == (2, 1, 1)
    lines = pd.read_csv(out / "lines.csv", keep_default_na=False)
    assert set(lines["text"]) == {tiny_run["sentences"][0]} and len(lines) == 2
    details = json.loads((out / "details.json").read_text())
    assert list(details["skipped_sentences"]) == [window]


def test_stage_skips_characters_the_model_never_trained_on(tiny_run, tmp_path, capsys):
    """A real dataset need not hold every character of the sentences: those sentences are
    left out and named, the others written; with none left every metric is -- and the
    picture says why, and the stage still succeeds (a side metric never stops the DAG)."""
    assert "~" not in tiny_run["inventory"]
    odd = tiny_run["sentences"][1] + "~"
    rc, out = _run(tiny_run, tmp_path, [tiny_run["sentences"][0], odd], per_writer=1)
    err = capsys.readouterr().err
    assert rc == 0, err
    assert f"skipped {odd!r}: character(s) '~' not among the characters" in err
    assert "model.pt trained on" in err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["lines"] == 2 and metrics["sentences_skipped"] == 1
    assert metrics["lines"] == metrics["sentences_written"] * 2  # 2 writers x 1 line
    (tmp_path / "none").mkdir()
    rc, out = _run(tiny_run, tmp_path / "none", [odd])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "every metric is --" in err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["CER"] is None and metrics["lines"] == 0 and metrics["DRIFT"] is None
    assert "none of the 1 sentences" in json.loads((out / "details.json").read_text())["no_lines"]
    assert (out / "lines.png").stat().st_size > 0


# --------------------------------------------------------------------------- params and DAG
@pytest.mark.parametrize("edit, message", [
    (lambda p: p["new_text"]["experiments"].update(nope={"benchmark": "dsd"}),
     "new_text.experiments: 'nope' is not under experiments"),
    (lambda p: p["new_text"]["experiments"].update(dsd={"benchmark": "merged"}),
     "new_text.experiments.dsd.benchmark: 'merged', but experiments.dsd.benchmark is 'dsd'"),
    (lambda p: p["new_text"]["experiments"].update(merged={"benchmark": "merged"}),
     "new_text.experiments.merged: benchmark 'merged' has no recognizer"),
    (lambda p: p["new_text"].update(per_writer=0), "new_text.per_writer: must be >= 1"),
    (lambda p: p["new_text"].update(writer=3), "new_text: unknown key 'writer'"),
])
def test_params_errors_name_the_new_text_key(tmp_path, edit, message):
    _, error = params_error(tmp_path, edit)
    assert message in error


def test_profiles_write_new_text_for_the_main_benchmark(repo_root, profile_files):
    for profile, path in profile_files.items():
        cfg = load_params(path)["new_text"]
        assert dict(cfg.experiments) == {"dsd": cfg.experiments["dsd"]}, profile
        assert (repo_root / cfg.sentences).is_file() and (cfg.writers, cfg.per_writer) == (10, 2)


def test_dag_has_one_new_text_stage_per_listed_experiment(repo_root):
    """new_text@<experiment> for each new_text.experiments entry: the experiment's model, its
    benchmark's subsets and recognizer, the sentences file as inputs; metrics.json a DVC
    metric kept out of the cache (git tracks it)."""
    from workflow.dag import load_stages

    params = load_params(repo_root / "params.yaml")
    stages = {s.name: s for s in load_stages(repo_root)}
    found = {n for n in stages if n.startswith("new_text@")}
    assert found == {f"new_text@{name}" for name in params["new_text"].experiments}
    for name, run in params["new_text"].experiments.items():
        stage = stages[f"new_text@{name}"]
        argv = shlex.split(stage.cmd)
        assert argv[:3] == ["python", "-m", "cashg.evaluation.new_text_stage"]
        assert argv[argv.index("--checkpoint") + 1] == f"results/train/{name}/model.pt"
        assert argv[argv.index("--subsets") + 1] == f"results/subsets/{run.benchmark}"
        assert argv[argv.index("--out") + 1] == f"results/new_text/{name}"
        assert {"--threads", "--no-progress"} <= set(argv)
        assert {params["new_text"].sentences, f"results/train/{name}/model.pt",
                f"results/recognizer/{run.benchmark}/recognizer.pt"} <= set(stage.deps)
        metrics = [o for o in stage.outs if o.metric]
        assert [o.path for o in metrics] == [f"results/new_text/{name}/metrics.json"]
        assert not metrics[0].cache
        assert stage.params["new_text.experiments." + name] == {"benchmark": run.benchmark}


def test_decoding_curve_stage_measures_each_temperature(tiny_run, tmp_path, capsys):
    """decoding_curve@: CER / WER (and the Style Score where the held-out rows allow one) of
    the held-out writers' rows at each of generate.curve_temperatures, in curve.json and as
    metrics; the report shows the table."""
    from cashg.evaluation.decoding_curve import main
    from cashg.report import decoding_curve_markdown

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["generate"].update(max_char_points=6, curve_temperatures=[0.5, 1.0])
    params["train"]["val_writers"] = 1
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    root, out = tiny_run["root"], tmp_path / "results" / "decoding_curve" / "tiny"
    rc = main(["--checkpoint", str(root / "model.pt"), "--subsets", str(tiny_run["subsets"]),
               "--recognizer", str(root / "recognizer.pt"), "--out", str(out),
               "--params", str(path), "--threads", "1"])
    assert rc == 0, capsys.readouterr().err
    curve = json.loads((out / "curve.json").read_text())
    assert [r["temperature"] for r in curve["rows"]] == [0.5, 1.0]
    assert all(0 <= r["CER"] for r in curve["rows"])
    assert curve["used_temperature"] == params["generate"]["temperature"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) == {f"T{t}/{k}" for t in ("0.5", "1") for k in
                            ("CER", "WER", "STYLE_top1", "STYLE_top5")}
    text = "\n".join(decoding_curve_markdown(tmp_path / "results", ["tiny"]))
    assert "## Neatness against style (held-out writers)" in text and "| 0.5 |" in text
    # no held-out lines: a side metric says why there is no curve and does not fail
    bad = tmp_path / "bad.yaml"
    params["train"]["val_writers"] = 0
    bad.write_text(yaml.safe_dump(params, sort_keys=False))
    none = tmp_path / "results" / "decoding_curve" / "none"
    assert main(["--checkpoint", str(root / "model.pt"), "--subsets", str(tiny_run["subsets"]),
                 "--recognizer", str(root / "recognizer.pt"), "--out", str(none),
                 "--params", str(bad)]) == 0
    assert "never the test split" in capsys.readouterr().err
    curve = json.loads((none / "curve.json").read_text())
    assert curve["rows"] == [] and "never the test split" in curve["no_curve"]
    text = "\n".join(decoding_curve_markdown(tmp_path / "results", ["none"]))
    assert "`none`: no curve:" in text
    # a model that cannot be read still fails
    assert main(["--checkpoint", str(tmp_path / "missing.pt"), "--subsets",
                 str(tiny_run["subsets"]), "--recognizer", str(root / "recognizer.pt"),
                 "--out", str(tmp_path / "y"), "--params", str(path)]) == 2
