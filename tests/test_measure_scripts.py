"""Every script of scripts/measure/ runs on a tiny input and prints its figures, and the
folder's README lists every script with the test that runs it.

A measurement script is run by hand, months apart; without a run in the suite it breaks
silently when the code under it changes. Each test here runs one script the way its
docstring says, at the smallest size its own options allow (a random TINY model on the tiny
subsets, a few steps, a few lines), and reads the figure it prints back as a number. Scripts
run in this process where they can (the imports are paid once); those that start servers or
trainings start them as they would by hand.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
MEASURE = REPO / "scripts" / "measure"
pytestmark = pytest.mark.usefixtures("one_torch_thread")

NUMBER = r"-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?"


def number(pattern: str, text: str) -> float:
    """The number that ``pattern``'s ``{n}`` stands for in ``text`` (the test fails when the
    line is missing)."""
    m = re.search(pattern.replace("{n}", f"({NUMBER})"), text, re.M)
    assert m, f"no match for {pattern!r} in:\n{text[-3000:]}"
    return float(m.group(1).replace(",", ""))


def script(name: str):
    """``scripts/measure/<name>.py`` as a module (its ``main(argv)`` runs it here)."""
    spec = importlib.util.spec_from_file_location(f"measure_{name}", MEASURE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(name: str, argv: list[str], capsys, status: int = 0) -> str:
    """The stdout of ``main(argv)`` of a script, run in this process; its exit status must
    be ``status``."""
    try:
        rc = script(name).main(argv)
    except SystemExit as exc:  # a script that ends with sys.exit
        rc = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    assert (rc or 0) == status, captured.out[-2000:] + captured.err[-3000:]
    return captured.out


def run_subprocess(args: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


# the TINY model (cashg.model.presets) as params.yaml fields and --set overrides
TINY_FIELDS = ("text_backbone", "canine_hidden", "canine_layers", "canine_heads",
               "canine_intermediate", "canine_hash_buckets", "code_table_size", "code_dim",
               "ctx_layers", "d_model", "n_heads", "ffn_dim", "dropout", "style_refs",
               "style_cnn_width", "style_layers", "supcon_dim", "writer_decoder_layers",
               "glyph_decoder_layers", "n_mixtures")
TINY_TRAIN = {"batch_char": 3, "batch_bigram": 3, "batch_sentence": 2, "sentence_accum": 2,
              "sentence_max_chars": 12, "val_writers": 1, "eval_batches": 1, "sample_lines": 0}


def tiny_model() -> dict:
    from cashg.model.presets import TINY

    return {k: getattr(TINY, k) for k in TINY_FIELDS}


def tiny_sets() -> list[str]:
    """``--set`` arguments that make a profile's model and batches tiny."""
    pairs = [f"model.{k}={v}" for k, v in tiny_model().items()]
    pairs += [f"train.{k}={v}" for k, v in TINY_TRAIN.items()
              if k not in ("val_writers", "eval_batches", "sample_lines")]
    return [a for p in pairs for a in ("--set", p)]


@pytest.fixture(scope="module")
def run(tiny_train_subsets, tmp_path_factory) -> dict:
    """A tiny run in the pipeline's results layout, experiment and benchmark ``dsd``: the tiny
    subsets, a random TINY model that knows their characters and ends a character after a
    few points, a random recognizer and glyph reader over the same characters, the test
    split's Style scorer and exclusion record, its lines generated once, and a params file
    with the tiny model, tiny batches, one held-out train writer and a cap of 8 points a
    character."""
    from cashg.core.config.recognizer import (
        GlyphReaderConfig,
        RecognizerFeatureConfig,
        RecognizerModelConfig,
    )
    from cashg.core.ink import read_ink, write_ink
    from cashg.core.params import load_section
    from cashg.evaluation import style_score_stage
    from cashg.evaluation.exclusions import exclusion_record, write_exclusions
    from cashg.generation.split import generate_split
    from cashg.model import CASHG
    from cashg.model.checkpoint import save_model_checkpoint
    from cashg.model.presets import TINY
    from cashg.recognition.ctc import Alphabet
    from cashg.recognition.glyphs import GlyphReader, GlyphReaderNet
    from cashg.recognition.model import RecognizerNet
    from cashg.recognition.recognizer import Recognizer
    from cashg.training.data import char_inventory

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("measure_run")
    results = root / "results"
    (results / "subsets").mkdir(parents=True)
    (results / "subsets" / "dsd").symlink_to(tiny_train_subsets)
    subsets = results / "subsets" / "dsd"

    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["model"].update(tiny_model())
    params["train"].update(TINY_TRAIN, stage2_start=3)
    params["generate"]["max_char_points"] = 8
    params["new_text"]["sentences"] = str(REPO / params["new_text"]["sentences"])
    params_path = root / "params.yaml"
    params_path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")

    inventory = char_inventory(subsets / "train")
    torch.manual_seed(0)
    model = CASHG(TINY)
    with torch.no_grad():  # characters end after a few points: short, quick lines
        model.head.proj.bias[:4] = torch.tensor([1.0, 0.0, -0.5, 0.5])
    checkpoint = results / "train" / "dsd" / "model.pt"
    save_model_checkpoint(checkpoint, model, TINY, {"char_inventory": inventory})

    rec_dir = results / "recognizer" / "dsd"
    rec_dir.mkdir(parents=True)
    rec_cfg = RecognizerModelConfig(conv_channels=16, hidden=16, layers=1, downsample=2)
    alphabet = Alphabet(inventory)
    Recognizer(RecognizerNet(rec_cfg, alphabet.n_classes), alphabet, rec_cfg,
               RecognizerFeatureConfig(), np.zeros(3), np.ones(3)).save(rec_dir / "recognizer.pt")
    letters = "".join(c for c in inventory if c != " ")
    glyph_cfg = GlyphReaderConfig(width=4)
    GlyphReader(GlyphReaderNet(len(letters), glyph_cfg.image_size, glyph_cfg.width), letters,
                glyph_cfg).save(rec_dir / "glyph_reader.pt")

    gt_path = subsets / "test" / "gt.h5"
    gt = read_ink(gt_path)
    assert style_score_stage.main(["--gt", str(gt_path),
                                   "--out", str(results / "style_score" / "dsd")]) == 0
    write_exclusions(results / "evaluate_gt" / "dsd" / "exclusions.json",
                     exclusion_record(gt, load_section("evaluate", params_path)
                                      .seg_error_threshold, gt_path))

    pred, _ = generate_split(model.eval(), TINY, load_section("generate", params_path), gt_path,
                             subsets / "test" / "style.h5", "cpu", progress=False)
    pred_path = results / "generate" / "dsd" / "pred.h5"
    pred_path.parent.mkdir(parents=True)
    write_ink(pred_path, pred)
    return {"root": root, "results": results, "subsets": subsets, "params": params_path,
            "checkpoint": checkpoint, "recognizer": rec_dir / "recognizer.pt",
            "reader": rec_dir / "glyph_reader.pt", "pred": pred_path}


# --------------------------------------------------------------------------- the README
def readme_rows() -> dict[str, str]:
    """``{script: its smoke-run cell}`` of scripts/measure/README.md's table."""
    text = (MEASURE / "README.md").read_text(encoding="utf-8")
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^\| `([\w.]+)` \|.*\| ([^|]+) \|$", text, re.M)}


def test_the_readme_lists_every_script_of_the_folder_and_no_other():
    present = {p.name for p in MEASURE.iterdir() if p.is_file() and p.name != "README.md"}
    listed = set(readme_rows())
    assert listed == present, (sorted(present - listed), sorted(listed - present))


def test_each_listed_script_names_a_test_that_runs_it():
    """The smoke-run cell names test files that exist and name the script: a script added
    to the folder comes with a run in the suite."""
    for name, cell in readme_rows().items():
        tests = re.findall(r"tests/(test_\w+\.py)", cell)
        assert tests, f"{name}: no test named in {cell!r}"
        for test in tests:
            path = REPO / "tests" / test
            assert path.is_file(), f"{name}: {test} does not exist"
            assert Path(name).stem in path.read_text(encoding="utf-8"), \
                f"{name}: {test} does not run it"


# --------------------------------------------------------------------------- training step
def test_step_fingerprint_prints_the_same_md5_twice(capsys):
    argv = ["--steps", "1", *tiny_sets()]
    first = run_main("step_fingerprint", argv, capsys)
    assert len(re.findall(rf"^iteration \d+: total {NUMBER}$", first, re.M)) == 4
    digest = re.search(r"^parameters md5 ([0-9a-f]{32})$", first, re.M)
    assert digest, first
    second = run_main("step_fingerprint", argv, capsys)
    assert digest.group(0) in second  # the same computation, the same bits


def test_profile_train_prints_the_operator_calls_of_a_step(capsys):
    out = run_main("profile_train", ["--stages", "1,3", "--iters", "1", "--rows", "3",
                                         *tiny_sets()], capsys)
    for stage in (1, 3):
        assert number(rf"## stage {stage} \(demo profile, cpu, 1 threads\): {{n}} aten calls",
                      out) > 100
    assert "Self CPU" in out  # the profiler's operator table


def test_graphed_agreement_finds_the_stand_in_replay_agrees_with_eager(capsys):
    out = run_main("graphed_agreement", ["--device", "cpu", "--backend", "rerun", "--steps",
                                             "2", "--stages", "1,3", *tiny_sets()], capsys)
    assert len(re.findall(r"largest relative difference", out)) == 4  # two steps a stage
    assert number(r"weights after all steps: relative difference {n}", out) <= 1e-3
    assert number(r"graphs: \d+ captures, [\d.]+ s capturing \(warm-ups included\), {n} replays",
                  out) >= 1  # a stage's first step is eager, its second replayed
    assert "agreement within 0.001: True" in out


# --------------------------------------------------------------------------- sampling, metrics
def test_bench_sampling_prints_points_per_second_with_and_without_the_cache(capsys):
    out = run_main("bench_sampling", ["--batches", "1", "--repeats", "1", "--fixed-points",
                                          "3", "--early-stop-max", "3",
                                          "--throughput-batches", "2", "--variants", "same",
                                          "mixed"], capsys)
    assert number(r"fixed 3 pts/char .*speed-up {n}x wall", out) > 0
    rates = re.findall(rf"batch=2: ({NUMBER}) points/s wall", out)
    assert len(rates) == 4 and all(float(r.replace(",", "")) > 0 for r in rates), out


def test_bench_dtw_times_both_kernels_and_scores_end_to_end(capsys):
    out = run_main("bench_dtw", ["--points", "60", "--pairs", "4", "--repeats", "1",
                                     "--workers", "1"], capsys)
    assert number(r"cashg\.metrics\.dtw +{n} ms", out) > 0
    assert number(r"speed-up {n}x", out) > 0
    assert number(r"end to end: 4 pairs of 60 points .*DTW_norm = {n}", out) > 0


def test_bench_data_pipeline_times_each_data_stage(tmp_path, capsys):
    out = run_main("bench_data_pipeline", [
        "--workdir", str(tmp_path), "--scale", "0.1", "--writers", "10", "--workers", "1",
        "--repeats", "1", "--parser-scale", "0.01"], capsys)
    assert number(r"demo corpus: {n} s", out) > 0
    assert number(r"IAM lines in [\d.]+ s = {n} lines/s", out) > 0
    assert number(r"preprocess \+ subsets: [\d.]+ s total, peak memory {n} MB", out) > 0
    assert number(r"speed-up {n}x \(kept indices identical\)", out) > 1
    for parser in ("casia .pot", "casia .ptts", "deepwriting"):
        assert number(rf"{re.escape(parser)} *: .*median {{n}}", out) > 0


# --------------------------------------------------------------------------- models, decoding
def test_heldout_legibility_prints_a_row_per_model_and_the_ground_truth(run, capsys):
    out = run_main("heldout_legibility", [
        "--checkpoint", str(run["checkpoint"]), "--subsets", str(run["subsets"]),
        "--recognizer", str(run["recognizer"]), "--params", str(run["params"]),
        "--distractors", "2"], capsys)
    assert number(rf"^\| {re.escape(str(run['checkpoint']))} \| {{n}} \|", out) >= 0  # CER
    assert number(r"^\| ground truth \| {n} \|", out) >= 0
    assert "held-out train writers" in out
    assert number(r"seconds per line \(generation and reading\): {n}", out) > 0


def test_tune_decoding_prints_the_grid_and_its_best_cell(run, capsys):
    out = run_main("tune_decoding", [
        "--checkpoint", str(run["checkpoint"]), "--subsets", str(run["subsets"]),
        "--recognizer", str(run["recognizer"]), "--params", str(run["params"]),
        "--bias", "0", "1", "--temperature", "0.5"], capsys)
    assert number(r"^\| 1 \| {n} \(", out) >= 0  # the bias-1 row's CER
    assert number(r"best: bias \d+, temperature 0\.5 \(CER {n}\)", out) >= 0


def test_check_sweep_prints_a_row_per_k(run, tmp_path, capsys):
    out = run_main("check_sweep", [
        "--k", "1", "2", "--out", str(tmp_path), "--results", str(run["results"]),
        "--params", str(run["params"])], capsys)
    for k in (1, 2):
        assert number(rf"^\| {k} \| {{n}} \|", out) >= 0  # CER at K
    assert json.loads((tmp_path / "k2" / "metrics.json").read_text())["CHECK"] == 2


def test_run_on_characters_counts_the_characters_at_the_cap(run, capsys):
    out = run_main("run_on_characters", [
        "--pred", str(run["pred"]), "--gt", str(run["subsets"] / "test" / "sentence.h5"),
        "--cap", "8"], capsys)
    assert number(r"^generated \(\d+ lines\): .*lower {n}/\d+ at the cap", out) >= 0
    assert number(r"^ground truth: .*lower \d+/\d+ at the cap \(median {n} points\)", out) > 0


def test_run_on_causes_classes_the_characters_the_cap_ended(run, capsys):
    out = run_main("run_on_causes", [
        "--checkpoint", str(run["checkpoint"]), "--pred", str(run["pred"]),
        "--style", str(run["subsets"] / "test" / "style.h5"), "--params", str(run["params"])],
        capsys)
    assert "cap 8" in out
    capped = number(r"^\| lower \| {n} of \d+ \|", out)
    total = number(r"^\| lower \| \d+ of {n} \|", out)
    assert 0 < capped <= total  # a random model runs some characters to the cap


def test_stage1_glyphs_trains_stage_one_and_reads_its_glyphs(run, tmp_path):
    done = run_subprocess([
        "scripts/measure/stage1_glyphs.py", "--out", str(tmp_path), "--seeds", "0",
        "--params", str(run["params"]), "--subsets", str(run["subsets"]),
        "--reader", str(run["reader"]), "--decay", "1"])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "train.total_iters=3" in done.stdout
    alone = number(r"^  all +{n} \(", done.stdout)  # the share read right alone
    assert 0 <= alone <= 1


# --------------------------------------------------------------------------- tools
def test_compare_dvc_lock_names_the_changed_output(tmp_path, capsys):
    lock = yaml.safe_load((REPO / "dvc.lock").read_text(encoding="utf-8"))
    out = run_main("compare_dvc_lock", [str(REPO / "dvc.lock"), str(REPO / "dvc.lock")],
                       capsys)
    assert number(r"^{n} outputs the same", out) > 0
    stage, entry = next((s, e) for s, e in lock["stages"].items() if e.get("outs"))
    entry["outs"][0]["md5"] = "0" * 32
    changed = tmp_path / "dvc.lock"
    changed.write_text(yaml.safe_dump(lock), encoding="utf-8")
    out = run_main("compare_dvc_lock", [str(REPO / "dvc.lock"), str(changed)], capsys,
                   status=1)
    assert f"changed   {entry['outs'][0]['path']}" in out
    assert number(r"outputs the same \(\d+ under a renamed stage\), {n} changed", out) == 1


def test_run_budget_sums_the_cpu_time_and_checks_a_budget(tmp_path, capsys):
    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for job, wall, cpu in (("train@dsd", 100.0, 95.5), ("parse@iam", 10.0, 12.5)):
        (tmp_path / f"{job}.tsv").write_text(
            head + f"{wall}\t0:00:00\t500\t600\t400\t450\t1\t2\t90\t{cpu}\n", encoding="utf-8")
    out = run_main("run_budget", ["--dir", str(tmp_path)], capsys)
    assert number(r"^total \(2 jobs\) +[\d.]+ +{n}", out) == 108.0
    out = run_main("run_budget", ["--dir", str(tmp_path), "--limit", "100"], capsys, status=1)
    assert "budget 100 CPU s: OVER" in out


@pytest.fixture(scope="module")
def studio_results(tmp_path_factory) -> Path:
    from studio_run import make_tiny_run

    return make_tiny_run(tmp_path_factory.mktemp("measure_studio"))


def test_load_studio_writes_lines_and_reports_their_latency(studio_results, capsys):
    out = run_main("load_studio", ["--run", str(studio_results), "--clients", "2",
                                       "--duration", "2", "--text", "hello world", "--",
                                       "--threads", "1"], capsys)
    assert number(r"lines written: {n}", out) >= 1
    assert number(r"full line: +p50 {n} s", out) > 0
    assert number(r"errors \(5xx, failed streams, connection\): {n}", out) == 0


def test_studio_screenshot_saves_the_page_and_its_figures(studio_results, tmp_path, capsys):
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (the dev extra)")
    from studio_run import free_port
    from test_studio_browser import INSTALL, chromium

    exe = chromium()
    if exe is None:
        pytest.skip(INSTALL)
    shot = tmp_path / "studio.png"
    out = run_main("studio_screenshot", [
        "--run", str(studio_results), "--text", "hello there", "--writer", "w:1",
        "--out", str(shot), "--port", str(free_port()), "--chromium", exe], capsys)
    assert number(r"studio: wrote 'hello there' as w:1.*: {n} points", out) > 0
    assert shot.stat().st_size > 1000


def test_the_scripts_tested_here_are_those_the_readme_says():
    """Every script whose smoke-run cell names this file has a test above (its name in a
    call of :func:`run_main` or a command line)."""
    text = Path(__file__).read_text(encoding="utf-8")
    ours = {n for n, cell in readme_rows().items() if "tests/test_measure_scripts.py" in cell}
    missing = {n for n in ours if not re.search(
        rf"(run_main\(\"{re.escape(n.removesuffix('.py'))}\"|scripts/measure/{re.escape(n)})",
        text)}
    assert not missing, sorted(missing)

