"""Arguments of ``cashg generate`` without importing torch (used by ``cashg --help``)."""

from cashg.generation.cli import add_arguments

__all__ = ["add_arguments"]
