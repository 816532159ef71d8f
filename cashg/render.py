"""Re-export of :mod:`cashg.generation.render` for ``cashg/evaluation/plots.py`` (another
helper's file); delete once it imports ``cashg.generation.render``."""

from cashg.generation.render import ink_mask, strokes

__all__ = ["ink_mask", "strokes"]
