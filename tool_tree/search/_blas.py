"""How many threads numpy's OpenBLAS may use while a query is embedded, set at run time.

Embedding one query is a few small matrix products (a few dozen tokens × 384). OpenBLAS
splits each over all cores by default, and its threads wait for one another by spinning: on a
machine whose cores are all busy with other work, each product then waits for threads that are
not scheduled. On the 2-core development machine at load 10–13, one query embedding took 290 ms
with OpenBLAS's threads and 26 ms with one; near idle, the threads saved about a third of a
query (bench/RESULTS.md, "Tool search", "Speed"). So a query is embedded with one BLAS thread
when the machine is saturated — its load average over the last minute is at least its number
of cores — and with OpenBLAS's own setting otherwise (``query_threads``). Catalogs (the
embeddings generate-tree stores) are embedded with OpenBLAS's own setting. A search made for a
sandbox's script runs inside `on_this_thread`: its queries use one BLAS thread, the caller's, so
all the CPU they take is on the thread that the sandbox's search budget charges.

The thread count is OpenBLAS's process-wide setting, changed through the library numpy already
loaded (``ctypes``, no dependency): lowered when the first limited call starts and put back when
the last one ends, under a lock, so concurrent queries never restore it under each other (work
of other threads that overlaps a limited query runs with one thread too). When numpy uses
another BLAS (Accelerate, MKL) or the library cannot be found, nothing is changed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_NAMES = (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "64_"), ("openblas", ""))
"""Prefix and suffix of OpenBLAS's functions: numpy's wheels rename them (``scipy_openblas…64_``)."""

_lock = threading.Lock()
_controls: tuple[Any, Any] | None = None
"""OpenBLAS's ``get_num_threads`` and ``set_num_threads`` (ctypes functions), once looked up."""
_looked = False
_inside = 0
_restore = 0


_local = threading.local()


@contextmanager
def on_this_thread() -> Iterator[None]:
    """Queries embedded inside the body use one BLAS thread, this one (so its CPU time counts all their work)."""
    previous = getattr(_local, "own", False)
    _local.own = True
    try:
        yield
    finally:
        _local.own = previous


def query_threads() -> int | None:
    """BLAS threads for embedding a query: 1 inside `on_this_thread` or when the machine is saturated, else
    None (OpenBLAS's own)."""
    if getattr(_local, "own", False):
        return 1
    if not hasattr(os, "getloadavg"):  # Windows has no load average
        return None
    try:
        load = os.getloadavg()[0]
    except OSError:  # the load average could not be read
        return None
    return 1 if load >= (os.cpu_count() or 1) else None


def _library_paths(np: Any) -> list[Path]:
    """Files that may be the OpenBLAS numpy loaded: those mapped into this process (Linux), then the
    libraries numpy's wheel bundles (``numpy.libs``, ``numpy/.dylibs``)."""
    paths: list[Path] = []
    maps = Path("/proc/self/maps")
    if maps.is_file():
        for line in maps.read_text(encoding="utf-8", errors="replace").splitlines():
            name = line.rsplit("/", 1)[-1]
            if "openblas" in name.lower() and "/" in line:
                paths.append(Path(line[line.index("/") :]))
    package = Path(np.__file__).parent
    for folder in (package.parent / "numpy.libs", package / ".dylibs"):
        if folder.is_dir():
            paths += sorted(folder.glob("*openblas*"))
    return list(dict.fromkeys(paths))


def _find_controls(np: Any) -> tuple[Any, Any] | None:
    import ctypes  # only once a query is embedded: the package imports no more than it needs

    for path in _library_paths(np):
        try:
            lib = ctypes.CDLL(str(path))
        except OSError:  # not loadable here: try the next candidate
            continue
        for prefix, suffix in _NAMES:
            get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            set_ = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                return get, set_
    return None


def controls(np: Any) -> tuple[Any, Any] | None:
    """``(get, set)`` of OpenBLAS's thread count, or None when numpy's BLAS is not a findable OpenBLAS.
    Looked up once per process."""
    global _controls, _looked
    with _lock:
        if not _looked:
            _controls, _looked = _find_controls(np), True
        return _controls


@contextmanager
def blas_threads(np: Any, threads: int | None) -> Iterator[None]:
    """Run the body with at most ``threads`` OpenBLAS threads (None: as configured)."""
    found = controls(np) if threads is not None else None
    if found is None or threads is None:
        yield
        return
    global _inside, _restore
    get, set_ = found
    with _lock:
        if _inside == 0:
            current = int(get())
            _restore = current if current > threads else 0
            if _restore:
                set_(threads)
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _restore:
                set_(_restore)
                _restore = 0
