"""Deterministic synthetic handwriting corpus written in the real IAM-OnDB and BRUSH formats.

The real datasets need registration, so the default pipeline runs on this embedded corpus:
synthetic writers (Hershey stroke-font glyphs with a per-writer style) whose lines are written
to disk exactly as the real datasets store them, so the real parsers are exercised.
Entry point: :func:`preprocessing.demo.corpus.generate_demo_corpus`.
"""
