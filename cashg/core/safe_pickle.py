"""Restricted unpickling for dataset files (BRUSH) and imported peer outputs (SDT): data in, never code.

``pickle.load`` calls whatever global a file names (``os.system``, ``builtins.eval``, ...).
:class:`RestrictedUnpickler` resolves only the handful of globals that plain numpy arrays and
Python containers need; any other global raises :class:`UnsafePickleError` naming the file and the
refused ``module.name`` *before* anything is called. Lists, tuples, dicts, str, bytes, int, float,
bool and None are pickle opcodes and need no global.

Admitted globals (and why):

- ``numpy.core.multiarray._reconstruct`` / ``numpy._core.multiarray._reconstruct`` and
  ``numpy.ndarray``: how ``ndarray`` pickles itself (protocols 0-4);
- ``numpy.core.numeric._frombuffer`` / ``numpy._core.numeric._frombuffer``: the same for
  protocol 5;
- ``numpy.dtype``: array dtypes, **refusing dtypes that hold Python objects** (an object array
  would unpickle arbitrary objects through its element list);
- ``numpy.core.multiarray.scalar`` / ``numpy._core.multiarray.scalar``: numpy scalars;
- ``_codecs.encode`` restricted to latin-1: how Python 3 pickles (protocol 2) carry array bytes.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np

_RECONSTRUCT = np.ndarray(0).__reduce__()[0]  # numpy's array reconstructor, version-proof
_SCALAR = np.float64(0).__reduce__()[0]
_FROMBUFFER = np.zeros(1).__reduce_ex__(5)[0]


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle that names a global outside the allow-list; nothing from it was executed."""


def _safe_dtype(*args: Any, **kwargs: Any) -> np.dtype:
    dtype = np.dtype(*args, **kwargs)
    if dtype.hasobject:
        raise UnsafePickleError(f"refused object dtype {dtype!r}")
    return dtype


def _latin1_encode(text: Any, encoding: str = "utf-8", *rest: Any) -> bytes:
    if not isinstance(text, str) or encoding.lower().replace("_", "-") not in (
        "latin1", "latin-1", "iso-8859-1",
    ) or rest:
        raise UnsafePickleError(f"refused _codecs.encode(..., {encoding!r})")
    return text.encode("latin-1")


_ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy.core.numeric", "_frombuffer"): _FROMBUFFER,
    ("numpy._core.numeric", "_frombuffer"): _FROMBUFFER,
    ("numpy.core.multiarray", "scalar"): _SCALAR,
    ("numpy._core.multiarray", "scalar"): _SCALAR,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _safe_dtype,
    ("_codecs", "encode"): _latin1_encode,
}
ALLOWED_GLOBALS = tuple(f"{m}.{n}" for m, n in _ALLOWED)


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler whose ``find_class`` admits only :data:`ALLOWED_GLOBALS`."""

    def __init__(self, file: io.BufferedIOBase, source: str = "<pickle>"):
        super().__init__(file, encoding="latin1")  # latin1: Python 2 numpy pickles load too
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"{self._source}: refused global {module}.{name} (only numpy arrays, dtypes,"
                " scalars and plain containers are allowed; nothing was executed)"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"{self._source}: refused persistent id {pid!r}")


def safe_loads(data: bytes, source: str = "<bytes>") -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler`.

    Raises :class:`UnsafePickleError` for a refused global, and :class:`pickle.UnpicklingError`
    (message naming ``source``) for a corrupt or truncated stream.
    """
    try:
        return RestrictedUnpickler(io.BytesIO(data), source).load()
    except UnsafePickleError as exc:
        msg = str(exc)
        raise UnsafePickleError(msg if msg.startswith(source) else f"{source}: {msg}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError,
            AttributeError, KeyError, UnicodeDecodeError, OverflowError, MemoryError) as exc:
        raise pickle.UnpicklingError(
            f"{source}: corrupt or truncated pickle ({type(exc).__name__}: {exc})"
        ) from None


def safe_load(path: str | Path) -> Any:
    """Unpickle the file at ``path`` safely (see :func:`safe_loads`)."""
    return safe_loads(Path(path).read_bytes(), str(path))
