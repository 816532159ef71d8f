"""``cashg studio``: a local web app over a trained run (type a sentence, pick a writer or draw
your own references, watch the line being written; browse the run's report and metrics).

Modules, one concern each: :mod:`~cashg.studio.limits` (the bounds), :mod:`~cashg.studio.run`
(what a run folder holds), :mod:`~cashg.studio.references` (drawn glyphs -> style images),
:mod:`~cashg.studio.decoding` (the neatness slider <-> sampling options),
:mod:`~cashg.studio.requests` (validation of a write request), :mod:`~cashg.studio.admission`
(bounded concurrency and queue), :mod:`~cashg.studio.engine` (model and streamed generation),
:mod:`~cashg.studio.pictures` (PNG strips, report HTML), :mod:`~cashg.studio.app` (routes),
:mod:`~cashg.studio.cli` (the command). See docs/studio.md.
"""
