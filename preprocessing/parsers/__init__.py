"""One module per raw dataset format: raw files in, :class:`~cashg.core.records.InkRecord` out."""
