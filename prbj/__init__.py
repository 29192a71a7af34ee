"""prbj: the harness for Personalized RewardBench."""

__version__ = "0.1.0"
