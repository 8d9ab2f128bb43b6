"""`PrefilterOptions`: the pre-filter's settings, from the ``agent:`` section or the command line."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.defaults import DEFAULT_RETRIES
from agent.prefilter.gate import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    import anthropic

    from agent.prefilter.base import ToolFilter
    from agent.prefilter.gate import PreFilter
    from tool_tree.config import Config


@dataclass(frozen=True)
class PrefilterOptions:
    """How the pre-filter decides (see `agent.prefilter.make_prefilter`)."""

    threshold: float | None = None
    """Admit at this probability or above (None: the classifier's default)."""
    siblings: str = "named"
    timeout: float = DEFAULT_TIMEOUT
    state: Path | None = None
    """Keep the admitted set here between conversations. A leading ``~`` or ``~user`` is the home folder, as in the
    shell (`home_expanded`)."""
    model: str | None = None
    """The ``claude`` classifier's model."""

    def __post_init__(self) -> None:
        if self.state is not None:
            object.__setattr__(self, "state", home_expanded(Path(self.state)))

    @classmethod
    def from_settings(cls, settings: dict[str, Any], config: Config | None = None) -> PrefilterOptions:
        """From the ``agent:`` section's ``prefilter_*`` keys; a relative state path resolves against
        the config file's folder."""
        state = settings.get("prefilter_state")
        path = home_expanded(Path(state)) if state else None
        if path is not None and not path.is_absolute() and config is not None and Path(config.source).is_file():
            path = Path(config.source).resolve().parent / path
        return cls(
            threshold=settings.get("prefilter_threshold"),
            siblings=str(settings.get("prefilter_siblings", "named")),
            timeout=float(settings.get("prefilter_timeout", DEFAULT_TIMEOUT)),
            state=path,
            model=settings.get("prefilter_model"),
        )

    def build(
        self,
        tree: Path,
        classifier: str | ToolFilter,
        *,
        client: anthropic.Anthropic | None = None,
        max_retries: int = DEFAULT_RETRIES,
    ) -> PreFilter:
        """The pre-filter (the ``claude`` classifier asks through ``client``, default one from the environment with
        ``max_retries`` retries).

        Raises:
            AgentSetupError: see `make_prefilter`.
        """
        from agent.prefilter import make_prefilter

        return make_prefilter(
            tree,
            classifier,
            threshold=self.threshold,
            siblings=self.siblings,
            timeout=self.timeout,
            state=self.state,
            model=self.model,
            client=client,
            max_retries=max_retries,
        )


def home_expanded(path: Path) -> Path:
    """``path`` with a leading ``~`` (``$HOME``) or ``~user`` made that home folder, as the shell does, unless a path
    so named exists (or the home folder is not known). Before, ``prefilter_state: ~/.tooltree/work.json`` in
    ``tooltree.yaml``, or ``--prefilter-state=~/work.json`` (which the shell leaves as written), made a folder named
    ``~`` beside the config or in the working folder, and the runs of other folders never shared the set."""
    text = str(path)
    if not text.startswith("~") or path.exists():
        return path
    return Path(os.path.expanduser(text))
