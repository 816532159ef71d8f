"""One sampling-options type: the ``generate`` params section is it, and the flags of
``cashg generate`` are derived from its fields."""

from __future__ import annotations

import argparse
import dataclasses

from cashg.core.config.model import GenerateConfig, SamplingOptions
from cashg.generation.options import add_option_arguments, flag, options_from_args


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_option_arguments(parser)
    return parser


def test_every_field_is_a_flag_with_its_default_and_help():
    parser = _parser()
    actions = {a.dest: a for a in parser._actions}
    for f in dataclasses.fields(SamplingOptions):
        assert flag(f.name) in actions[f.name].option_strings
        assert actions[f.name].default == f.default
        assert f.metadata["help"] in actions[f.name].help
    assert options_from_args(parser.parse_args([])) == SamplingOptions()


def test_flags_parse_into_the_options():
    args = _parser().parse_args(["--greedy", "--temperature", "0.5", "--bias", "1",
                                 "--max-char-points", "7", "--seed", "3", "--no-use-cache",
                                 "--min-char-points", "2"])
    assert options_from_args(args) == SamplingOptions(
        greedy=True, temperature=0.5, bias=1.0, max_char_points=7, seed=3, use_cache=False,
        min_char_points=2)


def test_the_generate_section_is_the_sampling_options_plus_its_own():
    gcfg = GenerateConfig(seed=5, bias=1.0, batch_size=8)
    assert isinstance(gcfg, SamplingOptions)
    assert {f.name for f in dataclasses.fields(SamplingOptions)} < {
        f.name for f in dataclasses.fields(GenerateConfig)}
    assert gcfg.sampling(2) == SamplingOptions(seed=7, bias=1.0)  # batch k: seed + k
