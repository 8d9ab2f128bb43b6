"""The tree's ``search_index.json``, written after the stubs and the manifest (and left alone when it is current).

The index records the hash of the manifest it was built from, so one that a generation left
behind (interrupted or failed between writing the manifest and the index) is told from a current
one: the next run rebuilds it, ``generate-tree --check`` reports it, and search does not use it
(``tool_tree.search.load_index``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from generator.files import read_existing

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
    """Rebuild ``search_index.json`` when the tree changed (or the index is missing, was built from
    another manifest, stores other embeddings than ``model_id`` asks for, or another word splitter's terms).

    The index is derived from the manifest and the snapshots only, so when this run wrote
    nothing, the index was built from the manifest on disk and holds the wanted embeddings, it is
    current: a no-op rerun does not pay for rebuilding it.
    """
    from tool_tree.search import (
        INDEX_FILE,
        SearchError,
        index_embeds_with,
        index_matches_manifest,
        index_splits_words_as_now,
        write_index,
    )

    report = result.report
    if (
        report is not None
        and not report.written
        and not report.deleted
        and index_matches_manifest(out)
        and index_embeds_with(out, model_id)
        and index_splits_words_as_now(out)  # an index of an older splitter's terms would miss words a query has
    ):
        report.unchanged += 1  # counted as the stubs are (before: a rerun said 28 unchanged of a tree of 29 files)
        return
    before = read_existing(out, INDEX_FILE)
    started = time.perf_counter()
    try:
        write_index(out, embeddings=mode, on_embedding=on_embedding)
    except SearchError as e:
        result.warnings.append(f"search index not written: {e}")
        return
    finally:
        result.index_seconds = time.perf_counter() - started
    if report is not None:
        if read_existing(out, INDEX_FILE) != before:
            report.written.append(INDEX_FILE)
        else:
            report.unchanged += 1
