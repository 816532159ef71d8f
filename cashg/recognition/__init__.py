"""A small online handwriting recognizer that measures the legibility of generated lines.

Trained per benchmark on its ground-truth training lines (stage ``recognizer@<benchmark>``),
it transcribes ink with greedy CTC decoding; ``cashg evaluate --recognizer`` reports the
character and word error rates (CER / WER) of the generated test lines next to those of the
ground-truth test lines. Modules, one concern each:

- :mod:`~cashg.recognition.features`: line normalisation (character height, baseline) and
  per-point features, the same for ground truth and generations;
- :mod:`~cashg.recognition.model`: Conv1d + BiLSTM + CTC head;
- :mod:`~cashg.recognition.ctc`: alphabet and greedy decoding;
- :mod:`~cashg.recognition.scoring`: edit distance, CER / WER, error share by character
  class, chance pairing;
- :mod:`~cashg.recognition.data`: training / test lines from the subsets;
- :mod:`~cashg.recognition.train`: the deterministic training loop;
- :mod:`~cashg.recognition.recognizer`: the trained recognizer, its file, transcription;
- :mod:`~cashg.recognition.stage`: the pipeline stage;
- :mod:`~cashg.recognition.listing`: ``results/recognizer/benchmarks.json`` for the DAG.
"""
