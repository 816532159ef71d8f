"""Typed, frozen configs read from ``params.yaml``, one module per concern: :mod:`.data` (the
data side: demo corpus, datasets, parse, preprocess, subsets), :mod:`.model`, :mod:`.train`,
:mod:`.generate`, :mod:`.evaluate` and :mod:`.recognizer` (the method's sections) and
:mod:`.baselines`. Loading and validation: :mod:`cashg.core.params`."""
