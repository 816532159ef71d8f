"""CASHG: context-aware stylized online handwriting generation (model, training, evaluation).

Importing this package is cheap: heavy modules (torch, transformers) load only where used.
"""

__version__ = "0.1.0"
