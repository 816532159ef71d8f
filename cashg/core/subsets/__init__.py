"""The subset HDF5 contract: :mod:`.schema` (layout, header, writer) and :mod:`.readers`
(lazy readers for training, generation and evaluation). Built by :mod:`preprocessing.subsets`."""
