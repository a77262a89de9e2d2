"""One BLAS thread while the solvers run.

numpy's wheels link OpenBLAS, which hands even a 9 x 9 ``np.linalg.solve`` to its worker
threads. Where the cores are busy (Blender's own threads, another process) a call then waits for
a worker to be scheduled: on this project's 2-core test machine under load, 2,000 solves of a
9 x 9 system took 943 ms (median 8.3 us, p99 4.1 ms) against 7.5 ms with one thread (median
3.7 us), and a 250-frame bake of a humanoid whose knees and elbows have IK limits (the numpy
loop, a Newton step factorised per frame) took 12.0 s against 1.8 s. The solvers' matrices are
tiny: threads never pay off.

``one_thread`` (a decorator of the solvers' entry points) sets OpenBLAS to one thread while the
call runs and puts the count back afterwards (nested calls leave it to the outermost). It finds
the library numpy loaded next to numpy (``numpy.libs``, ``numpy/.dylibs``) and calls its
``openblas_set_num_threads`` through ctypes, under the names numpy 1.26 (``..._64_`` symbols)
and numpy 2 (``scipy_openblas...``) give it; where there is none (Accelerate on macOS, another
BLAS) it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., Any])

_NAMES = (  # (get, set) pairs, numpy 2's scipy-openblas first
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)

_lock = threading.Lock()
_depth = 0
_saved = 0
_api: list[tuple[Any, Any] | None] = []  # [] until looked for; [None]: none found


def _find() -> tuple[Any, Any] | None:
    """(get, set) of the OpenBLAS numpy loaded, or None."""
    root = os.path.dirname(np.__file__)
    paths = glob.glob(os.path.join(root + ".libs", "*openblas*"))
    paths += glob.glob(os.path.join(root, ".dylibs", "*openblas*"))
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in _NAMES:
            get, put = getattr(lib, get_name, None), getattr(lib, set_name, None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


def api() -> tuple[Any, Any] | None:
    """(get, set) of numpy's OpenBLAS thread count, looked up once; None when not found."""
    if not _api:
        try:
            _api.append(_find())
        except Exception:  # a library we cannot call is no library: nothing is changed
            _api.append(None)
    return _api[0]


def threads() -> int | None:
    """OpenBLAS's thread count now (None without OpenBLAS)."""
    found = api()
    return None if found is None else int(found[0]())


def one_thread(func: F) -> F:
    """``func`` run with OpenBLAS on one thread (module docstring)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _depth, _saved
        found = api()
        if found is None:
            return func(*args, **kwargs)
        with _lock:
            if _depth == 0:
                _saved = int(found[0]())
                if _saved != 1:
                    found[1](1)
            _depth += 1
        try:
            return func(*args, **kwargs)
        finally:
            with _lock:
                _depth -= 1
                if _depth == 0 and _saved != 1:
                    found[1](_saved)

    return wrapper  # type: ignore[return-value]
