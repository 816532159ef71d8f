"""Raw-format parsers, geometry, segmentation review, the demo corpus and the HDF5 subsets."""
