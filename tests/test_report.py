"""The results report reads every number from stage outputs and lays out Tables 2 and 3."""

import json

from cashg.report import build_report, table3_markdown

# the default params' Table 2 experiments and Table 3 cells (each named after its benchmark
# or the ablation's)
TABLE2 = {"dsd": "dsd", "deepwriting": "deepwriting", "merged": "merged"}
ABLATION = {"merged-full": (True, True), "merged-no_biswt": (False, True),
            "merged-no_gate": (True, False), "merged-neither": (False, False)}


def _report(results, out, *table2: str, ablation=ABLATION, **kwargs) -> str:
    """build_report with test-split experiments named after their benchmarks."""
    return build_report(results, out, {name: name for name in table2}, ablation,
                        ablation_benchmark="merged" if ablation else None, **kwargs)


def _metrics(value: float) -> dict:
    return {"F1_cursive": value, "CRE": 0.9, "KGS": None, "SSS": 0.5, "DTW_raw": 10.0,
            "DTW_norm": 0.25, "DTW_std": 0.01}


def test_report_reads_stage_outputs(tmp_path):
    results = tmp_path / "results"
    for exp, value in (("dsd", 0.11), ("merged", 0.22), ("merged-no_gate", 0.33)):
        (results / "evaluate" / exp).mkdir(parents=True)
        (results / "evaluate" / exp / "metrics.json").write_text(json.dumps(_metrics(value)))
    (results / "evaluate_gt" / "dsd" / "perturbed").mkdir(parents=True)
    (results / "evaluate_gt" / "dsd" / "perturbed" / "metrics.json").write_text(
        json.dumps(_metrics(0.44)))
    (results / "train" / "dsd").mkdir(parents=True)
    (results / "train" / "dsd" / "train_summary.json").write_text(json.dumps(
        {"iterations": 12, "device": "cpu", "seconds_this_session": 3.0,
         "final_metrics": {"train/total": -1.5}, "best_val_total": -2.0,
         "loop": {"stage1": {"iterations": 8, "seconds": 0.5, "it_per_s": 16.0},
                  "stage3": {"iterations": 4, "seconds": 2.0, "it_per_s": 2.0},
                  "evaluation_and_checkpoint_seconds": 0.5}}))
    text = _report(results, tmp_path / "report", *TABLE2)
    assert (tmp_path / "report" / "report.md").read_text() == text
    assert "| dsd | CASHG (this run) | 0.11 | 0.90 | -- | 0.50 | 0.25 | 10.00 | 0.01 |" in text
    assert "| dsd | GT, perturbed copy | 0.44 |" in text
    assert "| On | Off | 0.33 |" in text  # merged-no_gate row of the ablation table
    assert "| Off | Off | -- |" in text  # not run: shown as missing, never as zero
    assert "| dsd | 12 | cpu | fp32 | -- | 3 | 16.0 / -- / 2.0 | -1.50 | -2.00 |" in text
    assert "results/evaluate/deepwriting/metrics.json" in text  # listed as not available
    assert "ground truth has no cursive (CursiveEOC) boundary" in text  # what `--` means
    assert "exclusions.json" in text  # the DeepWriting exclusions, the same for every row


def test_table3_layout():
    table = table3_markdown([(True, True, _metrics(0.5)), (False, False, None)])
    lines = table.strip().splitlines()
    assert lines[0].startswith("| Bi-SWT | Ctx. Fusion | F1_Cursive")
    assert lines[0].endswith("| CER ↓ | WER ↓ |")
    assert lines[2] == "| On | On | 0.50 | 0.90 | -- | 0.50 | 0.25 | 10.00 | -- | -- |"
    assert lines[3] == "| Off | Off | -- | -- | -- | -- | -- | -- | -- | -- |"
    with_cer = table3_markdown([(True, True, {**_metrics(0.5), "CER": 0.123, "WER": 0.5})])
    assert with_cer.strip().splitlines()[2].endswith("| 10.00 | 0.12 | 0.50 |")


def test_report_follows_the_params(tmp_path, repo_root):
    """Benchmarks, experiments and ablation cells come from params; outputs of other
    experiments are left out. Table 2 holds the test-split experiments; the Table 3 rows are
    ablation.cells, placed by their switches (their model overrides over the model section,
    not their order in params or their names); the benchmark's own experiment is no row."""
    import yaml

    from cashg.report import experiments_from_params

    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    benches = params["subsets"]["benchmarks"]
    params["subsets"]["benchmarks"] = {"en": benches["merged"], "dsd": benches["dsd"]}
    params["model"]["gated_fusion"] = False  # b takes the model section's switch
    params["experiments"] = {
        "en": {"benchmark": "en", "split": "test"},
        "dsd": {"benchmark": "dsd", "split": "test"},
        "b": {"benchmark": "en", "split": "validation", "model": {"bi_swt": False}},
        "a": {"benchmark": "en", "split": "validation",
              "model": {"bi_swt": True, "gated_fusion": True}}}
    params["ablation"]["cells"] = ["b", "a"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    found = experiments_from_params(path)
    assert found.table2 == {"en": "en", "dsd": "dsd"} and found.datasets == ("iam", "brush")
    assert list(found.ablation.items()) == [("a", (True, True)), ("b", (False, False))]
    assert found.ablation_benchmark == "en" and found.benchmarks == ("en", "dsd")
    assert found.experiments == ("en", "dsd", "b", "a")
    results = tmp_path / "results"
    for exp, value in (("en", 0.11), ("a", 0.33), ("b", 0.22), ("stale", 0.99)):
        (results / "evaluate" / exp).mkdir(parents=True)
        (results / "evaluate" / exp / "metrics.json").write_text(json.dumps(_metrics(value)))
    text = build_report(results, tmp_path / "report", **found._asdict())
    assert "| en | CASHG (this run) | 0.11 |" in text
    table3 = _table_section(text, "layout of the paper's Table 3")
    assert "## Ablation on `en`" in text
    rows = [line for line in table3.splitlines() if line.startswith(("| On", "| Off"))]
    assert rows[0].startswith("| On | On | 0.33 |") and rows[1].startswith("| Off | Off | 0.22 |")
    assert "0.11" not in table3  # the benchmark's own (test-split) experiment is no cell
    assert "0.99" not in text and "stale" not in text
    assert "results/evaluate/dsd/metrics.json" in text  # named in params, not run yet


def test_report_names_a_second_test_experiment_of_a_benchmark(tmp_path):
    """Two test-split experiments on one benchmark: both rows under it (the one not named
    after the benchmark by its name), then the benchmark's perturbed-GT row once."""
    results = tmp_path / "results"
    for exp, value in (("dsd", 0.11), ("dsd-long", 0.22)):
        (results / "evaluate" / exp).mkdir(parents=True)
        (results / "evaluate" / exp / "metrics.json").write_text(json.dumps(_metrics(value)))
    (results / "evaluate_gt" / "dsd" / "perturbed").mkdir(parents=True)
    (results / "evaluate_gt" / "dsd" / "perturbed" / "metrics.json").write_text(
        json.dumps(_metrics(0.44)))
    text = build_report(results, tmp_path / "report", {"dsd": "dsd", "dsd-long": "dsd"}, {})
    rows = [line for line in text.splitlines() if line.startswith("| dsd | ")]
    assert [r.split(" | ")[1] for r in rows[:3]] == ["CASHG (this run)", "CASHG (dsd-long)",
                                                     "GT, perturbed copy"]


def _scored(results, exp: str, split: str, n_scored: int, n_gt: int, bench: str = "merged"):
    """What the generate and evaluate stages record about the ground truth they used."""
    (results / "generate" / exp).mkdir(parents=True, exist_ok=True)
    (results / "generate" / exp / "summary.json").write_text(json.dumps(
        {"gt": f"results/subsets/{bench}/{split}/gt.h5", "benchmark": bench, "split": split,
         "sentences": n_gt}))
    (results / "evaluate" / exp).mkdir(parents=True, exist_ok=True)
    (results / "evaluate" / exp / "metrics.json").write_text(json.dumps(_metrics(0.5)))
    (results / "evaluate" / exp / "details.json").write_text(json.dumps(
        {"gt": f"results/subsets/{bench}/{split}/gt.h5", "gt_benchmark": bench,
         "gt_split": split, "n_gt": n_gt, "n_scored": n_scored}))


def test_report_states_the_split_table3_was_scored_on(tmp_path):
    """Under Table 3 the report says which split and how many sentences the rows were scored
    on, from the generate / evaluate records (not from params): one sentence when every row
    agrees, one line per row when they differ."""
    results = tmp_path / "results"
    for exp in ABLATION:
        _scored(results, exp, "validation", 240, 240)
    _scored(results, "merged", "test", 909, 909)  # the benchmark's own experiment (Table 2)
    text = _report(results, tmp_path / "report", "merged")
    table3 = _table_section(text, "layout of the paper's Table 3")
    assert ("Every row is scored on the **validation** split of `merged`: 240 sentences"
            in table3)
    assert "Sec. 4.5" in table3
    assert "909" not in table3
    for exp in ("merged", "merged-full"):
        (results / "generate" / exp / "lines.png").write_bytes(b"png")
    text = _report(results, tmp_path / "report", "merged")
    assert "### merged: generated test-writer lines" in text
    assert "### merged-full: generated validation-writer lines" in text
    _scored(results, "merged-neither", "test", 905, 909)  # a stale row on another split
    table3 = _table_section(_report(results, tmp_path / "report", "merged"),
                            "layout of the paper's Table 3")
    assert "- `merged-full`: the **validation** split of `merged`: 240 sentences" in table3
    assert ("- `merged-neither`: the **test** split of `merged`: 905 sentences of its 909"
            in table3)
    (results / "evaluate" / "merged-no_gate" / "details.json").unlink()
    (results / "generate" / "merged-no_gate" / "summary.json").unlink()
    table3 = _table_section(_report(results, tmp_path / "report", "merged"),
                            "layout of the paper's Table 3")
    assert "- `merged-no_gate`: not recorded" in table3


def test_report_without_ablation(tmp_path):
    text = _report(tmp_path / "results", tmp_path / "report", "dsd", ablation={})
    table3 = _table_section(text, "layout of the paper's Table 3")
    assert "No ablation in params" in table3 and "| Bi-SWT |" not in table3


def test_report_shows_legibility(tmp_path):
    """CER / WER columns of Table 2 (``--`` without a recognizer) and the recognizers' own
    validation / ground-truth / chance figures."""
    results = tmp_path / "results"
    metrics = {"dsd": {**_metrics(0.1), "CER": 0.456, "WER": 0.9, "CER_gt": 0.023,
                       "WER_gt": 0.125},
               "deepwriting": {**_metrics(0.2), "CER": None, "WER": None, "CER_gt": None,
                               "WER_gt": None}}
    for exp, m in metrics.items():
        (results / "evaluate" / exp).mkdir(parents=True)
        (results / "evaluate" / exp / "metrics.json").write_text(json.dumps(m))
    (results / "recognizer" / "dsd").mkdir(parents=True)
    (results / "recognizer" / "dsd" / "summary.json").write_text(json.dumps(
        {"CER_val": 0.0288, "CER_gt": 0.0231, "CER_chance": 0.906, "WER_val": 0.149,
         "WER_gt": 0.125, "WER_chance": 1.135, "iterations": 1200, "train_seconds": 271.1}))
    text = _report(results, tmp_path / "report", "dsd", "deepwriting", ablation={},
                   recognizers=("dsd",))
    header = next(line for line in text.splitlines() if line.startswith("| Benchmark"))
    assert header.endswith("| CER (rec. ↓) | WER (rec. ↓) | CER GT (rec. ↓) | WER GT (rec. ↓) |"
                           " Top-1 (style ↑) | Top-5 (style ↑) | Drift (place) |"
                           " Drift GT (place) | Word gap (place) | Word gap GT (place) |"
                           " Gap ratio (place) | Runaway lines ↓ |")
    assert "| 0.25 | 10.00 | 0.01 | 0.46 | 0.90 | 0.02 | 0.12 |" in text  # dsd
    assert "| 0.25 | 10.00 | 0.01 | -- | -- | -- | -- |" in text  # deepwriting: no recognizer
    assert "| dsd | 0.029 | 0.023 | 0.906 | 0.149 | 0.125 | 1.135 | 1200 | 271 |" in text


def test_report_shows_the_style_score_and_runaway_lines(tmp_path):
    """Style top-1 / top-5 and the runaway count in Table 2, and the benchmark's ceiling (its
    scorer on the ground truth) in the note under it."""
    results = tmp_path / "results"
    (results / "evaluate" / "dsd").mkdir(parents=True)
    (results / "evaluate" / "dsd" / "metrics.json").write_text(json.dumps(
        {**_metrics(0.1), "STYLE_top1": 0.625, "STYLE_top5": 0.875, "RUNAWAY": 3}))
    (results / "style_score" / "dsd").mkdir(parents=True)
    (results / "style_score" / "dsd" / "metrics.json").write_text(json.dumps(
        {"STYLE_top1_gt": 0.878, "chance_top1": 0.1, "writers": 10, "lines_fitted": 225,
         "lines_scored": 205}))
    text = _report(results, tmp_path / "report", "dsd", ablation={})
    row = next(line for line in text.splitlines() if "CASHG (this run)" in line)
    assert row.endswith("| 0.62 | 0.88 | -- | -- | -- | -- | -- | 3 |")
    assert ("On `dsd` (10 writers, 225 lines fitted, 205 scored) the ground truth's own lines"
            " reach top-1 0.88 (the ceiling), chance is 0.10.") in text


def test_report_shows_placement(tmp_path):
    """Drift and word gap of the generated lines and of their ground truth, and the gap ratio,
    in Table 2, with a note that says what they are."""
    results = tmp_path / "results"
    (results / "evaluate" / "dsd").mkdir(parents=True)
    (results / "evaluate" / "dsd" / "metrics.json").write_text(json.dumps(
        {**_metrics(0.1), "DRIFT": 1.25, "DRIFT_gt": 0.125, "GAP": 0.5, "GAP_gt": 1.0,
         "GAP_ratio": 0.5, "RUNAWAY": 0}))
    text = _report(results, tmp_path / "report", "dsd", ablation={})
    row = next(line for line in text.splitlines() if "CASHG (this run)" in line)
    assert row.endswith("| 1.25 | 0.12 | 0.50 | 1.00 | 0.50 | 0 |")
    assert "*Drift* is the median over the scored lines" in text
    assert "character heights" in text


def test_report_shows_class_errors(tmp_path):
    """A table of the character-class error shares, generated lines and their ground truth,
    for every experiment whose metrics.json has them (Table 2 and Table 3 rows alike); none
    without them."""
    from cashg.report import class_errors_markdown

    results = tmp_path / "results"
    shares = {"ERR_lower": 0.125, "ERR_upper": 0.5, "ERR_digit": None, "ERR_punct": 0.75,
              "ERR_space": 0.0, "ERR_initial": 1.0, "ERR_lower_gt": 0.01, "ERR_upper_gt": 0.02,
              "ERR_digit_gt": None, "ERR_punct_gt": 0.03, "ERR_space_gt": 0.04,
              "ERR_initial_gt": 0.05}
    metrics = {"dsd": {**_metrics(0.1), "CER": 0.4, **shares},
               "merged-full": {**_metrics(0.2), "CER": 0.3, **shares, "ERR_lower": 0.25},
               "deepwriting": {**_metrics(0.2), **dict.fromkeys(shares)}}  # no recognizer
    for exp, m in metrics.items():
        (results / "evaluate" / exp).mkdir(parents=True)
        (results / "evaluate" / exp / "metrics.json").write_text(json.dumps(m))
    text = _report(results, tmp_path / "report", "dsd", "deepwriting")
    section = _table_section(text, "## Recognition errors by character class")
    header = "| experiment | lines | lower ↓ | upper ↓ | digit ↓ | punct ↓ | space ↓ | initial ↓ |"
    assert header in section
    assert "| dsd | generated | 0.12 | 0.50 | -- | 0.75 | 0.00 | 1.00 |" in section
    assert "| dsd | ground truth | 0.01 | 0.02 | -- | 0.03 | 0.04 | 0.05 |" in section
    assert "| merged-full | generated | 0.25 | 0.50 |" in section  # a Table 3 cell
    assert "| deepwriting |" not in section  # all null: no recognizer, no row
    assert "insertions belong to no class" in section and "docs/metrics.md" in section
    # the row layout on its own; without any class shares the section is left out
    assert class_errors_markdown([("x", {})]).splitlines()[2:] == [
        "| x | generated | -- | -- | -- | -- | -- | -- |",
        "| x | ground truth | -- | -- | -- | -- | -- | -- |"]
    for exp in ("dsd", "merged-full"):
        (results / "evaluate" / exp / "metrics.json").write_text(json.dumps(_metrics(0.1)))
    assert "Recognition errors by character class" not in _report(
        results, tmp_path / "report", "dsd", "deepwriting")


def _generated(results, exp: str, **decoding) -> None:
    """What the generate stage records next to pred.h5 (results/generate/<exp>/summary.json)."""
    (results / "generate" / exp).mkdir(parents=True, exist_ok=True)
    record = {"greedy": False, "temperature": 1.0, "bias": 0.0, "max_char_points": 100,
              "seed": 0, **decoding}
    (results / "generate" / exp / "summary.json").write_text(json.dumps(
        {"decoding": record, "style_refs": 15, "sentences": 3}))


def _table_section(text: str, title: str) -> str:
    """The report's section that starts with the heading containing ``title``."""
    return text.split(title, 1)[1].split("\n## ", 1)[0]


def test_report_states_the_decoding_of_each_table(tmp_path):
    """Under Table 2 and Table 3 the report says which decoding generated the rows, read from
    the generate stages' own records: one sentence when every row agrees, one line per row
    when they differ, and 'not recorded' when a stage recorded nothing."""
    results = tmp_path / "results"
    for exp in ("dsd", "merged", "merged-full", "merged-no_biswt", "merged-no_gate",
                "merged-neither"):
        (results / "evaluate" / exp).mkdir(parents=True)
        (results / "evaluate" / exp / "metrics.json").write_text(json.dumps(_metrics(0.1)))
    for exp in ("dsd", "merged", "merged-full"):
        _generated(results, exp, greedy=True)
    _generated(results, "merged-no_biswt", greedy=True)
    _generated(results, "merged-no_gate", temperature=0.8, bias=1.0)
    # merged-neither: no summary.json (an older generate stage)
    text = _report(results, tmp_path / "report", "dsd", "merged")
    table2 = _table_section(text, "layout of the paper's Table 2")
    assert ("Generated with greedy decoding (the authors' decoding): every generated row"
            in table2)
    table3 = _table_section(text, "layout of the paper's Table 3")
    assert "Generated with" not in table3  # the rows differ: one line per row
    assert "- `merged-full`: greedy decoding (the authors' decoding)" in table3
    assert "- `merged`:" not in table3  # the benchmark's own experiment is no Table 3 row
    assert "- `merged-no_biswt`: greedy decoding (the authors' decoding)" in table3
    assert "- `merged-no_gate`: stochastic sampling, temperature 0.8, bias 1.0" in table3
    assert "- `merged-neither`: not recorded" in table3
    # the decoding comes from the generate stage's record, not from params
    _generated(results, "dsd", greedy=False, temperature=1.0, bias=1.0)
    _generated(results, "merged", greedy=False, temperature=1.0, bias=1.0)
    text = _report(results, tmp_path / "report", "dsd", "merged", ablation={})
    assert ("Generated with stochastic sampling, temperature 1.0, bias 1.0: every generated row"
            in _table_section(text, "layout of the paper's Table 2"))


def test_paper_profile_decodes_greedily_and_demo_samples_sharpened(repo_root, profile_files):
    """The paper profile generates the tables with the authors' greedy decoding; the demo keeps
    stochastic sampling at temperature 0.5, no sampling bias (chosen on held-out writers with
    scripts/measure/heldout_legibility.py; its params comment gives the figures)."""
    from cashg.core.params import load_params

    paper = load_params(profile_files["paper"])["generate"]
    demo = load_params(repo_root / "params.yaml")["generate"]
    assert paper.greedy is True
    assert (demo.greedy, demo.temperature, demo.bias) == (False, 0.5, 0.0)


def _cell_outputs(results, exp: str, dtw_shift: float = 0.0, seed: int = 0,
                  writers: int = 4, per_writer: int = 10) -> None:
    """An evaluate output of a Table 3 cell: sentences.csv (random CSM ingredients and DTW
    per sentence, every DTW raised by ``dtw_shift``) and the metrics.json aggregated from it."""
    import numpy as np
    import pandas as pd

    from cashg.evaluation.bootstrap import metric_replicates

    rng = np.random.default_rng(seed)
    rows = []
    for w in range(writers):
        for j in range(per_writer):
            nb = int(rng.integers(2, 10))
            tp = int(rng.integers(0, nb))
            norm = float(rng.uniform(1.0, 3.0)) + dtw_shift
            rows.append({"sentence_id": f"s{w}-{j}", "writer_id": f"w{w}", "text": "ab cd",
                         "n_boundaries": nb, "tp": tp, "fp": int(rng.integers(0, 2)),
                         "fn": int(rng.integers(0, 2)), "rate_gt": tp / nb,
                         "rate_pred": float(rng.uniform()), "kgs_mean": float(rng.uniform()),
                         "n_space_runs": 1, "sss_mean": float(rng.uniform()),
                         "dtw_raw": 100 * norm, "dtw_norm": norm})
    table = pd.DataFrame(rows)
    folder = results / "evaluate" / exp
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "sentences.csv", index=False)
    full = metric_replicates(table, np.ones((1, len(table))))
    metrics = {**_metrics(0.0), **{k: float(v[0]) for k, v in full.items()}}
    (folder / "metrics.json").write_text(json.dumps(metrics))


def test_table3_shows_bootstrap_spread_and_says_what_differs(tmp_path):
    """Each Table 3 value with its bootstrap interval over sentences; the note gives the
    resamples, the seed and what the interval does not cover; paired differences to the full
    model, and one sentence per metric: a copy of the full model is within the spread, a cell
    worse on every sentence is named as differing, in the right direction."""
    results = tmp_path / "results"
    _cell_outputs(results, "merged-full", seed=1)
    _cell_outputs(results, "merged-no_biswt", seed=1)  # the full model's twin
    _cell_outputs(results, "merged-no_gate", seed=1, dtw_shift=0.5)  # worse DTW everywhere
    _cell_outputs(results, "merged-neither", seed=1, dtw_shift=-0.5)  # better DTW everywhere
    text = _report(results, tmp_path / "report")
    table3 = _table_section(text, "layout of the paper's Table 3")
    rows = [line for line in table3.splitlines() if line.startswith(("| On", "| Off"))]
    assert len(rows) == 4 + 3  # the table, then the differences of the three other cells
    assert all(cell.count("[") == 1 for cell in rows[0].split(" | ")[2:8])
    assert rows[0].endswith("| -- | -- |")  # no CER / WER: no value, no interval
    assert "1,000 resamples, seed 0" in table3 and "over the 40 sentences" in table3
    assert "sentences only" in table3 and "training-seed variation" in table3
    assert ("- F1_Cursive ↑: no cell differs from the full model beyond the bootstrap spread"
            in table3)
    dtw = next(line for line in table3.splitlines() if line.startswith("- DTW_norm ↓:"))
    assert "`merged-no_gate` (Bi-SWT On, Ctx. Fusion Off) worse (+0.50)" in dtw
    assert "`merged-neither` (Bi-SWT Off, Ctx. Fusion Off) better (-0.50)" in dtw
    assert "`merged-no_biswt` within the spread" in dtw
    twin = rows[4].split(" | ")
    assert twin[:2] == ["| Off", "On"] and twin[2] == "0.000 [0.000, 0.000]"
    assert "**+0.50 [+0.50, +0.50]**" in rows[5]  # beyond the spread: bold
    assert _report(results, tmp_path / "report2") == text  # deterministic


def test_table3_without_per_sentence_scores_falls_back(tmp_path):
    """Old outputs (no sentences.csv, or an unreadable one): the plain values, a statement
    that no spread is available, never a crash; one cell without them: named, the others
    keep their intervals."""
    results = tmp_path / "results"
    for exp in ABLATION:
        _cell_outputs(results, exp)
    (results / "evaluate" / "merged-no_gate" / "sentences.csv").unlink()
    table3 = _table_section(_report(results, tmp_path / "report"),
                            "layout of the paper's Table 3")
    assert "No spread for `merged-no_gate` (no per-sentence scores)" in table3
    rows = [line for line in table3.splitlines() if line.startswith(("| On", "| Off"))]
    assert "[" in rows[0] and "[" not in rows[2]  # rows[2]: merged-no_gate (On, Off)
    for exp in ABLATION:
        path = results / "evaluate" / exp / "sentences.csv"
        if path.is_file():
            path.unlink()
    (results / "evaluate" / "merged-full" / "sentences.csv").write_bytes(b"\xff\xfe\x00garbage")
    table3 = _table_section(_report(results, tmp_path / "report"),
                            "layout of the paper's Table 3")
    assert "**No spread available**" in table3 and "Paired differences" not in table3
    rows = [line for line in table3.splitlines() if line.startswith(("| On", "| Off"))]
    assert len(rows) == 4 and not any("[" in row for row in rows)
    assert rows == table3_markdown([  # today's table
        (b, f, json.loads((results / "evaluate" / exp / "metrics.json").read_text()))
        for exp, (b, f) in ABLATION.items()]).splitlines()[2:]


def test_report_adds_a_labelled_checked_row_beside_the_model_alone(tmp_path):
    """Table 2's model row stays the model alone; ``results/checked/<exp>/`` adds a row marked
    checked under it, and a section with both rows' legibility, the cost and the candidates."""
    from PIL import Image

    results = tmp_path / "results"
    rows = {"evaluate": {"CER": 0.113, "WER": 0.44, "ERR_upper": 0.58},
            "checked": {"CER": 0.071, "WER": 0.31, "ERR_upper": 0.29, "CHECK": 4,
                        "SECONDS_per_line": 1.25, "CAP_upper": 0.0, "CAP_digit": 0.01}}
    for stage, metrics in rows.items():
        (results / stage / "dsd").mkdir(parents=True)
        (results / stage / "dsd" / "metrics.json").write_text(json.dumps(
            {**_metrics(0.1), **metrics}))
    Image.new("L", (20, 10), 255).save(results / "checked" / "dsd" / "candidates.png")
    text = _report(results, tmp_path / "report", "dsd", ablation={})
    rows = [line for line in text.splitlines() if line.startswith("| dsd | CASHG")]
    assert [r.split(" | ")[1] for r in rows] == ["CASHG (this run)", "CASHG (this run), checked ✓"]
    assert "| 0.071 | 0.31 |" not in rows[0] and "0.07 | 0.31" in rows[1]
    section = _table_section(text, "## Checked writing")
    assert "drawn 4 times" in section and "1.25 s a line" in section
    assert "| model alone | 0.113 | 0.440 | 0.580 |" in section
    assert "| checked, K = 4 | 0.071 | 0.310 | 0.290 |" in section
    assert "images/checked_dsd.png" in section
    assert (tmp_path / "report" / "images" / "checked_dsd.png").is_file()
