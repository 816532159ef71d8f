"""Typed, frozen configs read from ``params.yaml``: :mod:`.data` (the data side: demo corpus,
datasets, parse, preprocess, subsets) and :mod:`.model` (the method side: model, train,
generate, evaluate, recognizer). Loading and validation: :mod:`cashg.core.params`."""
