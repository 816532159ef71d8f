"""Safe XML reading for raw dataset files (lxml, hardened).

Raw files come from outside the project, so XML is parsed without entity expansion (no
"billion laughs", no external entities), without network access and without loading DTDs.
``huge_tree`` is on because a single IAM-OnDB ``original/`` form file can exceed libxml2's
default limits on text node size and depth.

Files without an XML declaration are read as ISO-8859-1, the encoding IAM-OnDB uses (a file with
a declaration is decoded as it declares).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from lxml import etree

_SAFE_OPTIONS = {
    "resolve_entities": False,
    "no_network": True,
    "load_dtd": False,
    "dtd_validation": False,
    "huge_tree": True,
}
# Looks for encoding="..." inside a leading <?xml ... ?> declaration.
_DECL = re.compile(rb"^\s*(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding\s*=", re.S)
DEFAULT_ENCODING = "ISO-8859-1"


class XMLFileError(ValueError):
    """An XML file that cannot be read (missing, malformed or truncated); names the file."""

    def __init__(self, path: str | Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def make_parser(encoding: str | None = None) -> etree.XMLParser:
    """A new lxml parser: no entity expansion, no network, no DTD, huge files allowed."""
    return etree.XMLParser(encoding=encoding, remove_comments=True, **_SAFE_OPTIONS)


def _encoding_for(head: bytes) -> str | None:
    """``None`` when the bytes declare their encoding, else the IAM default."""
    return None if _DECL.match(head[:512]) else DEFAULT_ENCODING


def parse_xml_bytes(data: bytes, source: str | Path = "<bytes>") -> etree._Element:
    """Parse a whole document; raises :class:`XMLFileError` naming ``source`` on any problem."""
    if not data.strip():
        raise XMLFileError(source, "empty file")
    try:
        return etree.fromstring(data, parser=make_parser(_encoding_for(data)))
    except etree.XMLSyntaxError as exc:
        raise XMLFileError(source, f"malformed or truncated XML ({exc})") from None


def parse_xml_file(path: str | Path) -> etree._Element:
    """Read and parse ``path`` (see :func:`parse_xml_bytes`)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise XMLFileError(path, f"cannot read ({exc.strerror or exc})") from None
    return parse_xml_bytes(data, path)


def iter_start_elements(path: str | Path) -> Iterator[etree._Element]:
    """Stream the start tags of ``path`` (safe options), for reading a header without parsing
    the whole (possibly huge or truncated) file. Raises :class:`XMLFileError` when the stream
    breaks before the caller stops iterating.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
            fh.seek(0)
            context = etree.iterparse(
                fh, events=("start",), encoding=_encoding_for(head), remove_comments=True,
                **_SAFE_OPTIONS,
            )
            for _, element in context:
                yield element
    except OSError as exc:
        raise XMLFileError(path, f"cannot read ({exc.strerror or exc})") from None
    except etree.XMLSyntaxError as exc:
        raise XMLFileError(path, f"malformed or truncated XML ({exc})") from None
