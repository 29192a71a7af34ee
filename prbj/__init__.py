"""prbj: the harness for Personalized RewardBench.

The types a reward model written in Python receives (`from prbj import ScoreItem, PairItem, HistoryItem`; see
docs/plugins.md) load on first use of their names, so `import prbj` stays as light as it was."""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from prbj.local.rm_api import HistoryItem, PairItem, RewardModel, ScoreItem

_RM_TYPES = ("HistoryItem", "PairItem", "RewardModel", "ScoreItem")

__all__ = ["HistoryItem", "PairItem", "RewardModel", "ScoreItem", "__version__"]


def __getattr__(name: str) -> Any:
    if name in _RM_TYPES:
        from prbj.local import rm_api

        return getattr(rm_api, name)
    raise AttributeError(f"module 'prbj' has no attribute {name!r}")
