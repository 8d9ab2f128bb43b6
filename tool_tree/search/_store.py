"""The index on disk: written beside the manifest, rebuilt incrementally, identified cheaply.

``write_index`` builds the index of a tree and stores it atomically, and only when its bytes
change; tool vectors whose text did not change are taken from the previous file, so the model
loads only for new or changed tools. The file records the hash of the ``manifest.json`` it was
built from (its first key, ``built_for_manifest``): ``generate-tree`` writes the manifest first
and the index after it, so an index left behind by a generation that was interrupted or failed
in between records another manifest, and ``index_matches_manifest`` (and ``load_index``) tell.
``index_text`` reads the file for every reader, its values counted before it is parsed.
``index_embeds_with`` tells which model's vectors a file stores from its first few kilobytes, and
``index_splits_words_as_now`` whether its terms come from this release's word splitter.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from pathlib import Path

from tool_tree.search._dense import EmbeddingNotice
from tool_tree.search._docs import docs_from_tree
from tool_tree.search._errors import SearchError
from tool_tree.search._index import INDEX_FILE, SearchIndex, build_index
from tool_tree.search._mode import embedding_model, embeddings_mode
from tool_tree.search._text import WORDS
from tool_tree.tree import MANIFEST_FILE, check_values, content_hash, read_in_tree, read_regular, tree_lock

logger = logging.getLogger(__name__)


MAX_INDEX_VALUES = 32_000_000
"""The most JSON values a search index may hold, counted before it is parsed (256 MiB of ``{}`` is 89 million
objects, about 10 GB parsed). The 527-tool index holds 105 values a tool at 8.7 bytes each, so an index as large as
a whole tree the sandbox takes (`sandbox.tree_pack.MAX_TREE_BYTES`, 256 MiB) holds about 31 million."""


def index_text(tree: Path) -> str:
    """The text of ``<tree>/search_index.json``, its values counted before anyone parses it (`MAX_INDEX_VALUES`).

    Raises:
        SearchError: the index is missing, unreadable, not UTF-8 or of too many values.
    """
    path = tree / INDEX_FILE
    try:
        raw = read_in_tree(tree, INDEX_FILE)
    except FileNotFoundError:
        raise SearchError(f"{path}: no search index; run `tooltree generate-tree` to build it") from None
    except OSError as e:
        raise SearchError(f"{path}: cannot read search index ({e})") from None
    try:
        check_values(raw, MAX_INDEX_VALUES)
        return raw.decode("utf-8")
    except ValueError as e:  # undecodable, or too many values
        raise SearchError(f"{path}: corrupt search index ({e}); run `tooltree generate-tree` to rebuild it") from None


def _reusable_vectors(path: Path, model: str) -> dict[str, str]:
    """``tool hash → vector`` from the index already at ``path``, if it used the same model."""
    try:
        previous = SearchIndex.from_json(read_in_tree(path.parent, path.name).decode("utf-8"), source=str(path))
    except (OSError, UnicodeDecodeError, SearchError):
        return {}
    dense = previous.dense
    if dense is None or dense.model != model:
        return {}
    return {e.hash: v for e, v in zip(previous.entries, dense.encoded, strict=True)}


BUILT_FOR_KEY = "built_for_manifest"
"""The index's first key: ``sha256:<hex>`` of the ``manifest.json`` it was built from."""
_BUILT_FOR = re.compile(r'\{"built_for_manifest":"(sha256:[0-9a-f]{64})"')


def manifest_hash(tree: Path) -> str | None:
    """``sha256:<hex>`` of the tree's ``manifest.json``, or None when it cannot be read."""
    try:
        return content_hash(read_in_tree(tree, MANIFEST_FILE))
    except OSError:
        return None


def built_for(text: str) -> str | None:
    """The manifest hash that the text of an index records (at its start), or None when it records
    none (an index written before tooltree recorded it, or not an index)."""
    found = _BUILT_FOR.match(text)
    return found.group(1) if found is not None else None


def index_matches_manifest(tree: Path, manifest: bytes | None = None) -> bool:
    """Whether the index of ``tree`` was built from its ``manifest.json`` (or, given ``manifest``, from
    those bytes: the manifest a run is about to write). False when the index is missing, unreadable or
    records no manifest, or the manifest cannot be read."""
    try:
        head = read_regular(tree / INDEX_FILE, 256).decode("utf-8", errors="replace")
    except OSError:
        return False
    stored = built_for(head)
    wanted = content_hash(manifest) if manifest is not None else manifest_hash(tree)
    return stored is not None and stored == wanted


_WORDS_OF = re.compile(r'"config":\{[^{}]*?"words":(\d+)')


def index_splits_words_as_now(tree: Path) -> bool:
    """Whether the index of ``tree`` holds the terms of this release's word splitter (`_text.WORDS`; one that records
    none holds those of the first). Reads only the file's head (its ``config`` comes right after the manifest's hash).
    False when the file is missing or unclear."""
    try:
        head = read_regular(tree / INDEX_FILE, 4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    found = _WORDS_OF.search(head)
    return found is not None and int(found.group(1)) == WORDS


_STORED_MODEL = re.compile(r'"dense":(?:null|\{"dim":\d+,"model":("(?:[^"\\]|\\.)*"))')


def index_embeds_with(tree: Path, model_id: str | None) -> bool:
    """Whether the index of ``tree`` stores vectors of ``model_id`` (None: stores none).

    Reads only the head of the file: the index is written with sorted keys, so ``dense`` and
    its model come right after the small ``config``. False when the file is missing or unclear.
    """
    try:
        head = read_regular(tree / INDEX_FILE, 4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    found = _STORED_MODEL.search(head)
    if found is None:
        return False
    if found.group(1) is None:
        return model_id is None
    try:
        return model_id is not None and json.loads(found.group(1)) == model_id
    except ValueError:
        return False


def write_index(tree: Path, *, embeddings: str | None = None, on_embedding: EmbeddingNotice | None = None) -> Path:
    """Build the index of the tree at ``tree`` and store it as ``<tree>/search_index.json``.

    The file is written atomically, and only when its content changes. It records the hash of the
    manifest it was built from, read before the tools are; a manifest replaced meanwhile (another run
    regenerated the tree) leaves the file as that run writes it, not replaced by this older index.
    ``embeddings`` is ``auto``, ``on`` or ``off`` (default: ``TOOLTREE_SEARCH_EMBEDDINGS``, else ``auto``; see
    ``embedding_model``). Vectors of tools whose text did not change are taken from the
    previous index, so the model is loaded only when some tool is new or changed. In ``auto``
    mode a model that is installed but cannot be loaded gives an index without vectors and a
    logged warning. ``on_embedding`` is told how many tools are about to be embedded, and the
    callback it may return how many are done after each batch.

    Raises:
        SearchError: the tree's manifest or a snapshot is missing or malformed, embeddings are
            ``on`` but the extra is not installed or the model cannot be loaded, or the file
            cannot be written.
    """
    path = tree / INDEX_FILE
    mode = embeddings_mode(embeddings)
    model = embedding_model(mode)
    manifest = manifest_hash(tree)
    docs = docs_from_tree(tree)  # raises the clear error when the manifest cannot be read
    if manifest is None:
        raise SearchError(f"{tree / MANIFEST_FILE}: the manifest cannot be read; regenerate the tree")
    try:
        reuse = _reusable_vectors(path, model.model_id) if model is not None else {}
        index = build_index(docs, embeddings=model is not None, reuse=reuse, on_embedding=on_embedding)
    except SearchError as e:
        if mode != "auto" or model is None:
            raise
        logger.warning("search index written without embeddings: %s", e)
        index = build_index(docs)
    # First (``to_json`` sorts its keys, and this one sorts before them all), where a short read finds it.
    text = f'{{"{BUILT_FOR_KEY}":"{manifest}",{index.to_json()[1:]}'
    try:
        # A file of more than one name is written afresh, as generate-tree does (every reader refuses it).
        if os.stat(path, follow_symlinks=False).st_nlink == 1 and read_regular(path).decode("utf-8") == text:
            return path
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    except OSError as e:
        raise SearchError(f"{path}: cannot read the previous search index ({e})") from None
    # A name of its own, made exclusively: a fixed one was written through a symlink planted there (out of the
    # tree), and two runs writing at once wrote into one file.
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{INDEX_FILE}.", suffix=".tmp")
    except OSError as e:
        raise SearchError(f"{path}: cannot write the search index ({e})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o644)
            f.write(text)
        # Under the tree's lock, which a run writing the tree holds exclusively: a run that replaced the manifest
        # while this one built (another generate-tree, a serve's refresh) writes the index of its own tree, and
        # this older one must not replace it (before, the last run to finish won: an index of the run that wrote
        # first, which every search then refused as built from another manifest until the next generation).
        with tree_lock(tree, shared=True):
            if manifest_hash(tree) != manifest:
                logger.info("%s: not written: the tree was regenerated while it was built", path)
                Path(tmp).unlink(missing_ok=True)
                return path
            os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise SearchError(f"{path}: cannot write the search index ({e})") from None
        raise
    return path
