"""One module per raw dataset format: raw files in, :class:`~preprocessing.records.InkRecord` out."""
