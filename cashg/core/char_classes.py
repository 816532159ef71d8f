"""The classes a character belongs to, one definition for everything that counts by class: the
recognizer's error shares (:mod:`cashg.recognition.scoring`, which adds ``space`` and the
line-initial class) and the glyph test (:mod:`cashg.evaluation.glyph_test`)."""

from __future__ import annotations

GLYPH_CLASSES = ("lower", "upper", "digit", "punct")  # a non-space character written alone


def glyph_class(char: str) -> str:
    """The class of one non-space character (one of :data:`GLYPH_CLASSES`): lower, upper,
    digit (first test that holds), else punct."""
    for name, test in (("lower", str.islower), ("upper", str.isupper), ("digit", str.isdigit)):
        if test(char):
            return name
    return "punct"
