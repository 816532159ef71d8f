"""End to end: cashg evaluate on tiny ink files made in tmp_path."""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from cashg.core.ink import InkFormatError, make_sentence, write_ink
from cashg.evaluation.cli import add_arguments, run
from cashg.evaluation.evaluate import EvaluationOptions, evaluate, evaluate_files
from cashg.evaluation.exclusions import ExclusionRecordError, exclusion_record, read_exclusions
from cashg.evaluation.perturb import perturb_sentences
from cashg.metrics.boundaries import segmentation_errors

PM, PU, CE, EOC = 0, 1, 2, 3
KEYS = ["F1_cursive", "CRE", "KGS", "SSS", "DTW_raw", "DTW_norm", "DTW_std",
        "CER", "WER", "CER_gt", "WER_gt",  # from CER on: null without --recognizer
        "ERR_lower", "ERR_upper", "ERR_digit", "ERR_punct", "ERR_space", "ERR_initial",
        "ERR_lower_gt", "ERR_upper_gt", "ERR_digit_gt", "ERR_punct_gt", "ERR_space_gt",
        "ERR_initial_gt",
        "RUNAWAY", "RUNAWAY_share", "RUNAWAY_gt",  # lines whose ink leaves the line
        "DRIFT", "DRIFT_gt", "DRIFT_ratio", "GAP", "GAP_gt", "GAP_ratio",  # placement
        "STYLE_top1", "STYLE_top5", "STYLE_top1_gt", "STYLE_top5_gt", "STYLE_lines"]


def _sentence(sid, writer, text, seed, overlap=False):
    """A synthetic line: each letter a small zig-zag, cursive joins inside words."""
    rng = np.random.default_rng(seed)
    xy, pen, ci = [], [], []
    x = 0.0
    for s, ch in enumerate(text):
        if ch == " ":
            xy += [[x, 0.5], [x + 0.3, 0.5]]
            pen += [PM, PU]
            ci += [s, s]
            x += 0.4
            continue
        k = 6
        xs = x + np.linspace(0, 0.3, k)
        ys = 0.5 + 0.4 * np.sin(np.linspace(0, 3, k) + rng.random())
        nxt = text[s + 1] if s + 1 < len(text) else " "
        last = CE if (nxt != " " and rng.random() < 0.5) else EOC
        xy += np.stack([xs, ys], 1).tolist()
        pen += [PM] * (k - 1) + [last]
        ci += [s] * k
        x += 0.25 if overlap else 0.35 + 0.05 * rng.random()
    return make_sentence(sid, writer, text, np.array(xy) * 100, np.array(pen), np.array(ci))


def _corpus():
    texts = ["ab cd", "hello  world", "xyz", "a b", "cat dog"]
    return [_sentence(f"s{i}", f"w{i % 2}", t, i) for i, t in enumerate(texts)]


def test_self_scores_are_perfect():
    gt = {s.sentence_id: s for s in _corpus()}
    r = evaluate(gt, dict(gt), EvaluationOptions(protocol="merged"))
    assert list(r.metrics) == KEYS
    assert r.metrics["DTW_raw"] == 0.0 and r.metrics["DTW_norm"] == 0.0
    assert r.metrics["DTW_std"] == 0.0
    for key in ("F1_cursive", "CRE", "KGS", "SSS"):
        assert r.metrics[key] == pytest.approx(1.0, abs=1e-5), key


def test_overlapping_gt_keeps_penalty_against_itself():
    s = _sentence("o", "w", "abc", 1, overlap=True)
    r = evaluate({"o": s}, {"o": s}, EvaluationOptions())
    assert r.metrics["KGS"] == pytest.approx(0.5)
    assert r.metrics["SSS"] is None  # no space run: missing, not zero


def test_perturbed_scores_worse_and_deterministic():
    corpus = _corpus()
    gt = {s.sentence_id: s for s in corpus}
    a = perturb_sentences(corpus, 0, 0.01, 0.5, 0.2)
    b = perturb_sentences(corpus, 0, 0.01, 0.5, 0.2)
    assert all(np.array_equal(x.points, y.points) for x, y in zip(a, b))
    r = evaluate(gt, {s.sentence_id: s for s in a}, EvaluationOptions())
    assert r.metrics["DTW_norm"] > 0
    assert r.metrics["SSS"] < 1 and r.metrics["F1_cursive"] < 1


def test_missing_sentences_are_reported(tmp_path, capsys):
    corpus = _corpus()
    write_ink(tmp_path / "gt.h5", corpus)
    write_ink(tmp_path / "pred.h5", corpus[1:] + [_sentence("extra", "w9", "zz", 9)])
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "out"
    args = parser.parse_args(["--gt", str(tmp_path / "gt.h5"), "--pred", str(tmp_path / "pred.h5"),
                              "--out", str(out), "--protocol", "dsd", "--no-progress"])
    assert run(args) == 0
    err = capsys.readouterr().err
    assert "s0" in err and "extra" in err
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics) == KEYS
    missing = (out / "missing.csv").read_text()
    assert "s0,pred" in missing and "extra,gt" in missing
    for name in ("sentences.csv", "writers.csv", "units.csv", "table.md", "samples.png",
                 "distributions.png", "details.json"):
        assert (out / name).is_file(), name
    table = (out / "table.md").read_text()
    assert "F1_Cursive" in table and "Std." in table


def test_malformed_file_names_sentence(tmp_path, capsys):
    write_ink(tmp_path / "gt.h5", _corpus())
    write_ink(tmp_path / "pred.h5", _corpus())
    with h5py.File(tmp_path / "pred.h5", "a") as f:
        del f["sentences/s2/char_index"]
        f["sentences/s2"].create_dataset("char_index", data=np.zeros(3, np.int32))
    with pytest.raises(InkFormatError, match=r"'s2'.*char_index"):
        evaluate_files(tmp_path / "gt.h5", tmp_path / "pred.h5", EvaluationOptions(),
                       progress=False)


def test_protocols():
    corpus = _corpus()
    gt = {s.sentence_id: s for s in corpus}
    pred = {s.sentence_id: s for s in perturb_sentences(corpus, 1, 0.01, 0.3, 0.1)}
    olhwg = evaluate(gt, pred, EvaluationOptions(protocol="olhwg")).metrics
    assert olhwg["F1_cursive"] is None and olhwg["SSS"] is None and olhwg["CRE"] is None
    assert olhwg["KGS"] is not None and olhwg["DTW_norm"] is not None
    glyph = evaluate(gt, pred, EvaluationOptions(protocol="sdt_glyph"))
    n_glyphs = sum(sum(c != " " for c in s.text) for s in corpus)
    assert len(glyph.units) == n_glyphs and glyph.metrics["KGS"] is None
    assert glyph.metrics["DTW_norm"] > 0
    for variant in ("sdt", "olhwg"):
        v = evaluate(gt, pred, EvaluationOptions(dtw_variant=variant)).metrics
        assert v["DTW_raw"] > 0


def _broken(s, chars=(1, 2, 3)):
    """``s`` with the points of ``chars`` given to character 0: segmentation errors there."""
    ci = s.char_index.copy()
    for c in chars:
        ci[ci == c] = 0
    return make_sentence(s.sentence_id, s.writer_id, s.text, s.xy, s.pen, ci)


def test_deepwriting_exclusions_are_decided_once_from_the_ground_truth():
    """Item 9: the DeepWriting protocol excludes the same sentences for every method: those
    whose *ground truth* has segmentation errors in >= 3 characters, from one record. A
    method's own broken sentence is scored (its missing characters score 0), not dropped."""
    corpus = _corpus()
    gt = {s.sentence_id: s for s in corpus}
    gt["s1"] = _broken(gt["s1"])  # "hello  world": e, l, l own no points in the GT
    assert len(segmentation_errors(gt["s1"].text, gt["s1"].char_index)) == 3
    record = exclusion_record(gt, 3)
    assert sorted(record.excluded) == ["s1"]
    clean = {s.sentence_id: s for s in corpus}
    method_a = dict(clean)
    method_b = dict(clean, s4=_broken(clean["s4"], (1, 2, 4)))  # "cat dog": B breaks >= 3
    opts = EvaluationOptions(protocol="deepwriting")
    ra = evaluate(gt, method_a, opts, exclusions=record)
    rb = evaluate(gt, method_b, opts, exclusions=record)
    assert ra.excluded["sentence_id"].tolist() == rb.excluded["sentence_id"].tolist() == ["s1"]
    assert ra.sentences["sentence_id"].tolist() == rb.sentences["sentence_id"].tolist()
    row_b = rb.sentences.set_index("sentence_id").loc["s4"]
    assert row_b["seg_errors_pred"] >= 3 and row_b["kgs_mean"] < 1
    assert rb.details["exclusions"]["applied"] and rb.details["exclusions"]["n_excluded"] == 1
    merged = evaluate(gt, method_b, EvaluationOptions(protocol="merged"))  # excludes nothing
    assert merged.excluded.empty and "s1" in merged.sentences["sentence_id"].tolist()


def test_deepwriting_without_or_with_a_wrong_record_fails_clearly(tmp_path):
    """Item 9: scoring the DeepWriting protocol without the ground truth's exclusion record,
    or with a record of another ground truth or threshold, is an error naming the fix."""
    gt = {s.sentence_id: s for s in _corpus()}
    opts = EvaluationOptions(protocol="deepwriting")
    with pytest.raises(ExclusionRecordError, match="no exclusion record.*--exclusions"):
        evaluate(gt, dict(gt), opts)
    other = dict(gt, s1=_broken(gt["s1"]))
    with pytest.raises(ExclusionRecordError, match="different ground truth"):
        evaluate(gt, dict(gt), opts, exclusions=exclusion_record(other, 3))
    with pytest.raises(ExclusionRecordError, match="seg_error_threshold 2"):
        evaluate(gt, dict(gt), opts, exclusions=exclusion_record(gt, 2))
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(ExclusionRecordError, match="not a cashg-exclusions file"):
        read_exclusions(bad)


def test_exclusion_record_from_the_gt_stage_applies_to_every_method(tmp_path, capsys):
    """Item 9 end to end: the evaluate_gt stage writes exclusions.json from the ground truth;
    `cashg evaluate --protocol deepwriting` applies it to each method's file and refuses to
    score without it."""
    import argparse

    from cashg.evaluation import stage

    corpus = _corpus()
    gt_list = [_broken(s) if s.sentence_id == "s1" else s for s in corpus]
    write_ink(tmp_path / "gt.h5", gt_list)
    write_ink(tmp_path / "a.h5", corpus)
    write_ink(tmp_path / "b.h5", [_broken(s, (1, 2, 4)) if s.sentence_id == "s4" else s
                                   for s in corpus])
    import yaml

    repo_params = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())
    repo_params["evaluate"].update(protocol="deepwriting", plot_sentences=0)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(repo_params))
    assert stage.main(["--gt", str(tmp_path / "gt.h5"), "--out", str(tmp_path / "gt_eval"),
                       "--params", str(params), "--no-progress"]) == 0
    record_path = tmp_path / "gt_eval" / "exclusions.json"
    doc = json.loads(record_path.read_text())
    assert doc["format"] == "cashg-exclusions" and doc["threshold"] == 3
    assert [e["sentence_id"] for e in doc["excluded"]] == ["s1"]
    assert (tmp_path / "gt_eval/self/excluded.csv").read_text().count("s1") == 1

    def cli(pred, *extra):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return run(parser.parse_args(
            ["--gt", str(tmp_path / "gt.h5"), "--pred", str(tmp_path / f"{pred}.h5"),
             "--out", str(tmp_path / pred), "--protocol", "deepwriting", "--no-progress",
             "--params", str(params), *extra]))

    capsys.readouterr()
    assert cli("a") == 2
    assert "no exclusion record" in capsys.readouterr().err
    for pred in ("a", "b"):
        assert cli(pred, "--exclusions", str(record_path)) == 0
        excluded = (tmp_path / pred / "excluded.csv").read_text().splitlines()
        assert len(excluded) == 2 and excluded[1].startswith("s1,")
        details = json.loads((tmp_path / pred / "details.json").read_text())
        assert details["exclusions"]["record"] == str(record_path)


def test_infer_cursive_option():
    corpus = _corpus()
    gt = {s.sentence_id: s for s in corpus}
    stripped = {k: make_sentence(s.sentence_id, s.writer_id, s.text, s.xy,
                                 np.where(s.pen == CE, EOC, s.pen), s.char_index)
                for k, s in gt.items()}
    plain = evaluate(gt, stripped, EvaluationOptions()).metrics
    inferred = evaluate(gt, stripped, EvaluationOptions(infer_cursive=True)).metrics
    # letters are 0.05 height units apart: nothing closer than tau, so no positives inferred
    assert plain["F1_cursive"] == pytest.approx(inferred["F1_cursive"])
    assert plain["F1_cursive"] < 0.01


def test_empty_ground_truth_is_an_error(tmp_path, capsys, repo_root):
    """An empty test split is an error, never exit 0 with every metric None."""
    from cashg.evaluation import stage

    (tmp_path / "none.yaml").write_text((repo_root / "params.yaml").read_text())
    write_ink(tmp_path / "gt.h5", [], benchmark="dsd", split="test")
    rc = stage.main(["--gt", str(tmp_path / "gt.h5"), "--out", str(tmp_path / "out"),
                     "--params", str(tmp_path / "none.yaml"), "--protocol", "dsd",
                     "--no-progress"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "gt.h5: ground truth has 0 sentences (benchmark dsd, split test)" in err
    assert not (tmp_path / "out" / "self" / "metrics.json").exists()


def test_no_gt_cursive_positive_gives_dashes_for_every_method():
    """Item 12c end to end: a ground truth without CursiveEOC positives reports F1_cursive and
    CRE as missing (``--`` in table.md, paper Sec. 4.1) for a method that predicts positives
    as for one that does not."""
    from cashg.evaluation.tables import table2_markdown

    corpus = _corpus()
    no_ce = {s.sentence_id: make_sentence(s.sentence_id, s.writer_id, s.text, s.xy,
                                          np.where(s.pen == CE, EOC, s.pen), s.char_index)
             for s in corpus}
    with_ce = {s.sentence_id: s for s in corpus}
    assert any((s.pen == CE).any() for s in with_ce.values())
    for pred in (with_ce, no_ce):
        m = evaluate(no_ce, pred, EvaluationOptions(protocol="merged")).metrics
        assert m["F1_cursive"] is None and m["CRE"] is None
        assert m["KGS"] is not None and m["SSS"] is not None
        row = table2_markdown([("merged", "x", m)]).splitlines()[-1].split("|")
        assert [c.strip() for c in row[3:5]] == ["--", "--"]


def _dash(sid, writer, wiggle, stretch=1.0, k=12):
    """A flat glyph ('-'): its height is a tiny wiggle, its width 0.5 line heights."""
    x = np.linspace(0, 0.5, k) * stretch
    xy = np.stack([x, 0.5 + wiggle * np.sin(9 * x + 100 * wiggle)], 1)
    pen = np.r_[[PM] * (k - 1), EOC]
    return make_sentence(sid, writer, "-", xy, pen, np.zeros(k, np.int32))


def test_sdt_glyph_protocol_uses_sdt_dtw_and_survives_flat_glyphs():
    """Item 8: the sdt_glyph protocol scores with SDT's DTW (moment normalisation, finite on a
    dash); per-glyph height normalisation (``dtw_variant: exact``) stays as an option and
    blows a near-identical dash up by the ratio width / wiggle."""
    gt = {"d": _dash("d", "w", 0.004)}
    pred = {"d": _dash("d", "w", 0.003, stretch=1.05)}
    r = evaluate(gt, pred, EvaluationOptions(protocol="sdt_glyph"))
    assert r.details["dtw_variant"] == "sdt" and "SDT" in r.details["dtw_definition"]
    assert r.metrics["DTW_norm"] < 0.05
    exact = evaluate(gt, pred, EvaluationOptions(protocol="sdt_glyph", dtw_variant="exact"))
    assert exact.details["dtw_variant"] == "exact"
    assert exact.metrics["DTW_norm"] > 1.0
    assert evaluate(gt, pred, EvaluationOptions()).details["dtw_variant"] == "exact"  # sentences


def test_sdt_glyph_protocol_averages_over_glyphs():
    """Item 8: SDT reports the mean over all generated glyphs (not a writer-macro mean);
    Std. is the population std of DTW_norm over the glyphs."""
    gt = {f"g{i}": _dash(f"g{i}", "w0" if i == 0 else "w1", 0.01 * (i + 1)) for i in range(4)}
    pred = {k: _dash(k, s.writer_id, 0.02, stretch=1.0 + 0.1 * int(k[1:]))
            for k, s in gt.items()}
    r = evaluate(gt, pred, EvaluationOptions(protocol="sdt_glyph"))
    norm = r.units["dtw_norm"].to_numpy()
    assert len(norm) == 4 and len(set(np.round(norm, 9))) == 4
    assert r.metrics["DTW_norm"] == pytest.approx(norm.mean())
    assert r.metrics["DTW_std"] == pytest.approx(norm.std())
    assert r.metrics["DTW_raw"] == pytest.approx(r.units["dtw_raw"].mean())
    assert r.details["dtw_aggregation"] == "mean over all units"


def test_pipeline_evaluations_apply_the_gt_stage_exclusion_record():
    """Item 9 in the DAG: evaluate_gt@<b> writes results/evaluate_gt/<b>/exclusions.json from
    <b>'s test ground truth, and every evaluation of an experiment on that test split reads it
    (--test-exclusions: applied for the test split, copied to the evaluation's own
    exclusions.json, a declared output like details.json)."""
    import shlex

    from workflow.dag import load_stages

    stages = {s.name: s for s in load_stages(Path(__file__).parents[1])}
    evaluations = [s for n, s in stages.items() if n.startswith("evaluate@")]
    assert evaluations
    tested = 0
    for stage in evaluations:
        argv = shlex.split(stage.cmd)
        gt = argv[argv.index("--gt") + 1]
        bench = Path(gt).parts[2]  # results/subsets/<bench>/<split>/gt.h5
        record = f"results/evaluate_gt/{bench}/exclusions.json"
        assert argv[argv.index("--test-exclusions") + 1] == record, stage.name
        assert record in stage.deps, stage.name
        assert record in {o.path for o in stages[f"evaluate_gt@{bench}"].outs}
        exp = stage.name.partition("@")[2]
        assert {f"results/evaluate/{exp}/exclusions.json",
                f"results/evaluate/{exp}/details.json"} <= {o.path for o in stage.outs}
        if Path(gt).parts[3] == "test":
            tested += 1
            assert shlex.split(stages[f"evaluate_gt@{bench}"].cmd)[4] == gt
    assert tested == 3  # dsd, deepwriting, merged


def test_pipeline_scores_the_ablation_on_its_validation_split(repo_root):
    """Table 3 (paper Sec. 4.5: "the same validation subset under the same training
    schedule"): every cell, the full model included, is an experiment trained at one budget
    and generated and scored on the validation split of the merged benchmark, with an
    exclusion record decided from that split's ground truth, not evaluate_gt's test record."""
    import shlex

    from cashg.core.params import load_params
    from cashg.training.stage import experiment_setup
    from workflow.dag import load_stages

    params = load_params(repo_root / "params.yaml")
    experiments, ablation = params["experiments"], params["ablation"]
    stages = {s.name: s for s in load_stages(repo_root)}
    split_dir = "results/subsets/merged/validation"
    rows = ablation.rows(experiments, params["model"])
    for cell, (bi_swt, fusion) in rows.items():
        assert experiments[cell].split == "validation"
        overrides = experiment_setup(repo_root / "params.yaml", cell)[1]
        assert overrides[-2:] == [f"model.bi_swt={str(bi_swt).lower()}",
                                  f"model.gated_fusion={str(fusion).lower()}"]
        assert shlex.split(stages[f"train@{cell}"].cmd)[3:5] == ["--experiment", cell]
        gen = shlex.split(stages[f"generate@{cell}"].cmd)
        assert gen[gen.index("--gt") + 1] == f"{split_dir}/gt.h5"
        assert gen[gen.index("--style") + 1] == f"{split_dir}/style.h5"
        stage = stages[f"evaluate@{cell}"]
        argv = shlex.split(stage.cmd)
        assert argv[argv.index("--gt") + 1] == f"{split_dir}/gt.h5"
        assert argv[argv.index("--pred") + 1] == f"results/generate/{cell}/pred.h5"
        outs = {o.path for o in stage.outs}
        assert {f"results/evaluate/{cell}/exclusions.json",
                f"results/evaluate/{cell}/details.json"} <= outs  # read by the report
    assert (True, True) in rows.values()  # the full cell is one of them


def _split_gt(path, split, sentences, bench="b"):
    write_ink(path, sentences, benchmark=bench, split=split)
    return path


def _validation_test_and_record(tmp_path, test_sentences):
    """A corpus written as prediction, a validation GT whose sentence s1 is broken, a test GT of
    ``test_sentences``, a params file (the repo's, no plots) and the test record evaluate_gt
    decided: ``(corpus, val, test, params, record)``."""
    import yaml

    from cashg.evaluation import stage

    corpus = _corpus()
    val = _split_gt(tmp_path / "validation" / "gt.h5", "validation",
                    [_broken(s) if s.sentence_id == "s1" else s for s in corpus])
    test = _split_gt(tmp_path / "test" / "gt.h5", "test", test_sentences(corpus))
    write_ink(tmp_path / "pred.h5", corpus)
    repo_params = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())
    repo_params["evaluate"].update(plot_sentences=0)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(repo_params))
    assert stage.main(["--gt", str(test), "--out", str(tmp_path / "gt_eval"), "--params",
                       str(params), "--no-progress"]) == 0
    return corpus, val, test, params, tmp_path / "gt_eval" / "exclusions.json"


def test_exclusions_from_gt_decide_the_record_of_the_scored_split(tmp_path, capsys):
    """`cashg evaluate --exclusions-from-gt` decides the exclusion record from --gt itself
    (the ablation's validation split, which evaluate_gt does not cover), writes it next to
    the outputs and applies it; a record of another split is refused under every protocol,
    also one that excludes nothing."""
    import argparse

    corpus, val, _, params, test_record = _validation_test_and_record(
        tmp_path, lambda _: [_sentence(f"t{i}", "w9", "the end", 10 + i) for i in range(3)])

    def cli(out, protocol, *extra):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return run(parser.parse_args(
            ["--gt", str(val), "--pred", str(tmp_path / "pred.h5"), "--out", str(tmp_path / out),
             "--protocol", protocol, "--no-progress", "--params", str(params), *extra]))

    capsys.readouterr()
    for protocol in ("deepwriting", "merged"):  # the test split's record, validation scored
        assert cli(f"wrong_{protocol}", protocol, "--exclusions", str(test_record)) == 2
        err = capsys.readouterr().err
        assert "made from a different ground truth" in err and "--exclusions-from-gt" in err
    for protocol in ("deepwriting", "merged"):
        out = tmp_path / protocol
        assert cli(protocol, protocol, "--exclusions-from-gt") == 0
        doc = json.loads((out / "exclusions.json").read_text())
        assert doc["gt"]["path"] == str(val) and doc["gt"]["n_sentences"] == len(corpus)
        assert [e["sentence_id"] for e in doc["excluded"]] == ["s1"]
        details = json.loads((out / "details.json").read_text())
        assert (details["gt_split"], details["gt_benchmark"]) == ("validation", "b")
        excluded = (out / "excluded.csv").read_text().splitlines()[1:]
        if protocol == "deepwriting":
            assert details["n_scored"] == len(corpus) - 1 and excluded[0].startswith("s1,")
        else:  # merged excludes nothing
            assert details["n_scored"] == len(corpus) and not excluded
    with pytest.raises(SystemExit):  # one record or the other
        cli("both", "merged", "--exclusions", str(test_record), "--exclusions-from-gt")


def test_test_exclusions_apply_the_test_record_or_decide_from_the_split(tmp_path):
    """The evaluate stage's --test-exclusions: on the test split the evaluate_gt record is
    applied and copied to OUT/exclusions.json byte for byte; on another split the record is
    decided from --gt (as --exclusions-from-gt). --benchmark takes the protocol from params."""
    import argparse
    import shutil

    corpus, val, test, params, record = _validation_test_and_record(
        tmp_path, lambda corpus: [_broken(s) if s.sentence_id == "s1" else s for s in corpus])
    # the evaluate_gt record stays what the test split's evaluations read
    shutil.copyfile(record, tmp_path / "record_before.json")

    def cli(gt, out):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return run(parser.parse_args(
            ["--gt", str(gt), "--pred", str(tmp_path / "pred.h5"), "--out", str(tmp_path / out),
             "--params", str(params), "--benchmark", "deepwriting", "--test-exclusions",
             str(record), "--no-progress"]))

    assert cli(test, "on_test") == 0
    assert (tmp_path / "on_test" / "exclusions.json").read_bytes() == record.read_bytes()
    details = json.loads((tmp_path / "on_test" / "details.json").read_text())
    assert details["protocol"] == "deepwriting" and details["n_scored"] == len(corpus) - 1
    assert cli(val, "on_val") == 0
    doc = json.loads((tmp_path / "on_val" / "exclusions.json").read_text())
    assert doc["gt"]["path"] == str(val)
    assert [e["sentence_id"] for e in doc["excluded"]] == ["s1"]
    assert record.read_bytes() == (tmp_path / "record_before.json").read_bytes()


def test_evaluate_reads_no_params_file_unless_given(tmp_path, monkeypatch):
    """Without --params `cashg evaluate` uses the EvaluateConfig defaults and never reads a
    params.yaml of the working folder (which may be invalid for unrelated reasons); the
    options that need params say so."""
    import argparse

    write_ink(tmp_path / "gt.h5", _corpus())
    write_ink(tmp_path / "pred.h5", _corpus())
    (tmp_path / "params.yaml").write_text("ablation:\n  cells: [nothing]\n")
    monkeypatch.chdir(tmp_path)

    def cli(*extra):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return run(parser.parse_args(["--gt", "gt.h5", "--pred", "pred.h5", "--out", "out",
                                      "--no-progress", *extra]))

    assert cli("--protocol", "dsd") == 0
    assert cli("--benchmark", "dsd") == 2  # its protocol comes from --params
    assert cli("--protocol", "dsd", "--recognizer", "r.pt", "--recognizer-if-listed",
               "dsd") == 2
