"""Benchmark evaluation: protocols, scoring of ink files, tables and plots (paper Sec. 4.1),
and new text (sentences outside the training data, in test writers' styles) read back by the
recognizer (:mod:`cashg.evaluation.new_text`)."""
