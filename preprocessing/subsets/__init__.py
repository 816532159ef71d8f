"""HDF5 training subsets per benchmark split: char, bigram, sentence, style references, GT.

Pipeline: :mod:`.inputs` reads preprocessed cashg-ink sentences, :mod:`.splits` assigns them to
writer-disjoint splits, :mod:`.char_subset`, :mod:`.bigram_subset`, :mod:`.sentence_subset` and
:mod:`.style_images` build the samples, :mod:`.hdf5_schema` writes them, :mod:`.readers` reads
them lazily for training, :mod:`.build` ties it together (stage ``build_subsets``).
"""
