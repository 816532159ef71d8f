"""Other methods' outputs, imported for the paper's Table 2 (``cashg import``).

:mod:`.layouts` reads each peer's own output layout (SDT, DSD, DeepWriting, OLHWG, the
authors' CASHG code) into :class:`.samples.ImportedSample`; :mod:`.matching` pairs them with
the ground truth; :mod:`.segmentation` infers a character segmentation where the output has
none (marked as inferred); :mod:`.glyph_collage` is the project's own non-learned baseline.
"""
