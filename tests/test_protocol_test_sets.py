"""Protocol test sets through the real stages: parse records -> preprocess -> subsets.

The DSD protocol's test ground truth keeps every resampled point (no
weak RDP, paper Sec. 4.1), and segmentation review never shrinks a test set that the protocol
fixes by its split (flagged sentences stay, an unusable one is an error naming it); a protocol
free to filter its test set drops flagged sentences and counts what preprocessing dropped.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from cashg.core.ink import read_ink
from cashg.core.record_store import write_records
from cashg.core.records import record_from_strokes
from preprocessing.stages import build_subsets, preprocess

TEXT = "ab cd"


def _wavy(n: int, x0: float, seed: int) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    rng = np.random.default_rng(seed)
    return np.column_stack([x0 + 0.8 * t, 12.0 * np.sin(t / 3.0) + rng.normal(0, 0.3, n)])


def _record(writer: int, k: int, kind: str = "ok"):
    """One BRUSH-like line "ab cd": one stroke per character, 24 points each."""
    strokes = [_wavy(24, 30.0 * c, seed=100 * writer + 10 * k + c) for c in range(4)]
    chars = [np.arange(24 * c, 24 * c + 24) for c in range(4)]
    if kind == "bad":  # unusable: preprocessing drops it (bad_index)
        chars[1] = np.r_[chars[1], 9999]
    elif kind == "out_of_order":  # 'a' and 'b' swapped: flagged, kept
        chars[0], chars[1] = chars[1], chars[0]
    elif kind == "interleaved":  # 'a' and 'b' alternate inside stroke 0: flagged, kept
        chars[0] = np.r_[0:8, 16:24, 24:32]
        chars[1] = np.r_[8:16, 32:48]
    char_points = [chars[0], chars[1], np.array([], np.int64), chars[2], chars[3]]
    return record_from_strokes(dataset="brush", writer_id=str(writer), sample_id=f"{writer}/{k}",
                               text=TEXT, strokes=strokes, char_points=char_points,
                               source=f"{writer}/{k}")


def _run(tmp_path, repo_root, records, protocol="dsd") -> tuple[int, str]:
    """Write the records, run the preprocess and subsets stages; (exit code, stderr text)."""
    parse = tmp_path / "parse"
    write_records(parse / "brush/records.h5", records)
    params = (repo_root / "params.yaml").read_text()
    params = params.replace("train_writers: [0, 49], test_writers: [50, 59]",
                            "train_writers: [0, 3], test_writers: [4, 5]")
    params = params.replace("    dsd:\n      protocol: dsd\n",
                            f"    dsd:\n      protocol: {protocol}\n")
    (tmp_path / "params.yaml").write_text(params)
    pre = tmp_path / "pre"
    assert preprocess.main(["--dataset", "brush", "--records", str(parse / "brush/records.h5"),
                            "--out", str(pre / "brush"), "--params",
                            str(tmp_path / "params.yaml"), "--no-progress",
                            "--no-figures"]) == 0
    return build_subsets.main(["--benchmark", "dsd", "--out", str(tmp_path / "out"),
                               "--params", str(tmp_path / "params.yaml"), "--preprocess-dir",
                               str(pre), "--parse-dir", str(parse), "--no-progress"])


def _corpus(test_kinds=("ok", "out_of_order"), train_kinds=("ok", "interleaved")):
    recs = []
    for w in range(6):
        kinds = test_kinds if w == 4 else train_kinds if w == 1 else ("ok", "ok")
        recs += [_record(w, k, kind) for k, kind in enumerate(kinds)]
    return recs


def test_dsd_test_set_stays_whole_and_unsimplified(tmp_path, repo_root, capsys):
    assert _run(tmp_path, repo_root, _corpus()) == 0
    test = read_ink(tmp_path / "out/test/gt.h5")
    # the out_of_order line of test writer 4 is kept (flagged), the interleaved line of train
    # writer 1 is not trained on
    assert "brush:4_1" in test and len(test) == 4
    assert test["brush:4_1"].attrs["review_flags"] == "out_of_order"
    stats = json.loads((tmp_path / "out/stats.json").read_text())
    assert stats["test_set"] == {"protocol": "dsd", "whole": True, "sentences": 4,
                                 "review_flagged_kept": {"out_of_order": 1},
                                 "preprocess_dropped": {}}
    assert stats["split_assignment"]["rejected_by_reason"] == {"review_flagged": 1}
    # no RDP in the DSD test ground truth: every resampled point of the preprocessed line
    pre = read_ink(tmp_path / "pre/brush/sentences.h5")
    with h5py.File(tmp_path / "out/test/gt.h5") as f:
        assert f.attrs["rdp"] == "off"
    simplified = 0
    for sid, s in test.items():
        src = pre[sid.split(":", 1)[1]]
        np.testing.assert_array_equal(s.points, src.unmasked().points)
        simplified += src.rdp_keep is not None and len(src.simplified().points) < len(s.points)
    assert simplified > 0  # weak RDP did remove points in this corpus: the check has teeth
    assert "whole" in capsys.readouterr().out


def test_unusable_test_sentence_of_a_whole_test_set_is_an_error(tmp_path, repo_root, capsys):
    rc = _run(tmp_path, repo_root, _corpus(test_kinds=("bad", "out_of_order")))
    assert rc == 1
    err = capsys.readouterr().err
    assert "protocol 'dsd' is scored on its whole test set" in err
    assert "brush:4_0 (4/0): bad_index" in err


def test_filtered_protocol_drops_flagged_and_counts_preprocess_drops(tmp_path, repo_root):
    assert _run(tmp_path, repo_root, _corpus(test_kinds=("bad", "out_of_order", "ok")),
                protocol="none") == 0
    test = read_ink(tmp_path / "out/test/gt.h5")
    assert "brush:4_1" not in test and "brush:4_2" in test  # flagged test line dropped
    stats = json.loads((tmp_path / "out/stats.json").read_text())
    assert stats["test_set"]["whole"] is False
    assert stats["test_set"]["preprocess_dropped"] == {"bad_index": 1}
    with h5py.File(tmp_path / "out/test/gt.h5") as f:
        assert f.attrs["rdp"] == "weak"
    pre = read_ink(tmp_path / "pre/brush/sentences.h5")
    for sid, s in test.items():
        np.testing.assert_array_equal(s.points, pre[sid.split(":", 1)[1]].simplified().points)


@pytest.mark.parametrize("protocol", ["dsd", "none"])
def test_training_data_is_simplified(tmp_path, repo_root, protocol):
    """Whatever the protocol, the training sentences are the weak-RDP ones (paper app. B.2)."""
    assert _run(tmp_path, repo_root, _corpus(), protocol=protocol) == 0
    pre = read_ink(tmp_path / "pre/brush/sentences.h5")
    train = [s for sid, s in pre.items() if sid.split("_")[0] in "0123" and sid != "1_1"]
    stats = json.loads((tmp_path / "out/stats.json").read_text())
    assert stats["splits"]["train"]["data"]["sentences"] == len(train) == 7
    assert stats["splits"]["train"]["data"]["points"] == sum(
        len(s.simplified().points) for s in train) < sum(len(s.points) for s in train)
