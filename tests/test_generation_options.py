"""One sampling-options type: the ``generate`` params section is it, and the flags of
``cashg generate`` are derived from its fields; flags not given fall back to a params file."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from cashg.core.config.generate import GenerateConfig, SamplingOptions
from cashg.core.params import ParamsError
from cashg.generation.options import (
    add_option_arguments,
    decoding_defaults,
    describe_options,
    flag,
    given_options,
    options_from_args,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_option_arguments(parser)
    return parser


def test_every_field_is_a_flag_not_given_by_default_with_its_help():
    parser = _parser()
    actions = {a.dest: a for a in parser._actions}
    for f in dataclasses.fields(SamplingOptions):
        assert flag(f.name) in actions[f.name].option_strings
        assert actions[f.name].default is None  # "not given": the default is chosen later
        assert f.metadata["help"] in actions[f.name].help
        assert f"else {f.default})" in actions[f.name].help
    args = parser.parse_args([])
    assert given_options(args) == {}
    assert options_from_args(args) == SamplingOptions()


def test_flags_parse_into_the_options():
    args = _parser().parse_args(["--greedy", "--temperature", "0.5", "--bias", "1",
                                 "--max-char-points", "7", "--seed", "3", "--no-use-cache",
                                 "--min-char-points", "2"])
    assert options_from_args(args) == SamplingOptions(
        greedy=True, temperature=0.5, bias=1.0, max_char_points=7, seed=3, use_cache=False,
        min_char_points=2)


def test_given_flags_win_over_the_base_and_the_rest_comes_from_it():
    base = GenerateConfig(temperature=0.8, space_mode=True, lift_mode=True, seed=4)
    args = _parser().parse_args(["--temperature", "1.0", "--no-lift-mode"])
    assert given_options(args) == {"temperature": 1.0, "lift_mode": False}
    assert options_from_args(args, base=base) == SamplingOptions(
        temperature=1.0, space_mode=True, lift_mode=False, seed=4)


def test_decoding_defaults_from_a_params_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("generate:\n  temperature: 0.5\n  lift_mode: true\n  seed: 9\n")
    assert decoding_defaults(path) == SamplingOptions(temperature=0.5, lift_mode=True, seed=9)
    assert decoding_defaults(None) == SamplingOptions()
    path.write_text("generate:\n  temprature: 0.5\n")
    with pytest.raises(ParamsError, match="temprature"):
        decoding_defaults(path)


def test_describe_options_names_the_decoding_its_modes_and_changed_options():
    assert describe_options(SamplingOptions(temperature=0.8, space_mode=True, lift_mode=True)) \
        == "temperature 0.8, bias 0.0, space_mode, lift_mode, seed 0"
    assert describe_options(SamplingOptions(greedy=True, seed=2, use_cache=False,
                                            max_char_points=7)) \
        == "greedy, seed 2, max_char_points 7, no use_cache"


def test_the_generate_section_is_the_sampling_options_plus_its_own():
    gcfg = GenerateConfig(seed=5, bias=1.0, batch_size=8)
    assert isinstance(gcfg, SamplingOptions)
    assert {f.name for f in dataclasses.fields(SamplingOptions)} < {
        f.name for f in dataclasses.fields(GenerateConfig)}
    assert gcfg.sampling(2) == SamplingOptions(seed=7, bias=1.0)  # batch k: seed + k
