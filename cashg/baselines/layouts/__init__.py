"""One reader (and writer) per peer output layout; see docs/formats.md for each layout."""
