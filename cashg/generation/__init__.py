"""Generation: handwriting written by a trained model (paper Sec. 3.2 and 4), one concern per
module.

- :mod:`~cashg.generation.sampling`: the fully autoregressive sampler (key/value cache);
- :mod:`~cashg.generation.options`: the ``cashg generate`` flags, derived from the one
  sampling-options type :class:`~cashg.core.config.generate.SamplingOptions`;
- :mod:`~cashg.generation.inputs`: style reference images, unknown characters;
- :mod:`~cashg.generation.render`: drawing ink (PNG, SVG, InkML), pictures cropped to the ink;
- :mod:`~cashg.generation.curves`: the smooth (Catmull-Rom / Bezier) strokes of pictures;
- :mod:`~cashg.generation.outputs`: writing generated lines, the generate stage's outputs and
  the record of their decoding;
- :mod:`~cashg.generation.split`: a held-out split written again by the model;
- :mod:`~cashg.generation.stage`: the DVC generate stage (``python -m cashg.generation.stage``);
- :mod:`~cashg.generation.cli`: ``cashg generate``.

The model never imports from here; generation imports the model.
"""
