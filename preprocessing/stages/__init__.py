"""Thin pipeline-stage commands (``python -m preprocessing.stages.<name>``): read params, call one function."""
