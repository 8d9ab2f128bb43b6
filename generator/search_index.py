"""The tree's ``search_index.json``, written after the stubs (and left alone when it is current)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from generator.files import read_existing
from tool_tree.tree import MANIFEST_FILE, SEARCH_INDEX_FILE

if TYPE_CHECKING:
    from generator.generate import GenerateResult
    from tool_tree.search import EmbeddingNotice


def write_search_index(
    out: Path,
    result: GenerateResult,
    mode: str,
    model_id: str | None,
    on_embedding: EmbeddingNotice | None = None,
) -> None:
    """Rebuild ``search_index.json`` when the tree changed (or the index is missing, older, or
    stores other embeddings than ``model_id`` asks for).

    The index is derived from the manifest and the snapshots only, so when this run wrote
    nothing, the index is at least as new as the manifest and holds the wanted embeddings, it is
    current: a no-op rerun does not pay for rebuilding it.
    """
    from tool_tree.search import INDEX_FILE, SearchError, index_embeds_with, write_index

    index, manifest = out / SEARCH_INDEX_FILE, out / MANIFEST_FILE
    report = result.report
    if report is not None and not report.written and not report.deleted and index.is_file():
        try:
            if index.stat().st_mtime_ns >= manifest.stat().st_mtime_ns and index_embeds_with(out, model_id):
                return
        except OSError:
            pass
    before = read_existing(out, INDEX_FILE)
    started = time.perf_counter()
    try:
        write_index(out, embeddings=mode, on_embedding=on_embedding)
    except SearchError as e:
        result.warnings.append(f"search index not written: {e}")
        return
    finally:
        result.index_seconds = time.perf_counter() - started
    if read_existing(out, INDEX_FILE) != before:
        if report is not None:
            report.written.append(INDEX_FILE)
    else:
        os.utime(index)  # current for this manifest: the next no-op rerun can skip the rebuild
