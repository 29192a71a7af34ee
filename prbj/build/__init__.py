"""`prbj build`: construct Personalized RewardBench pairs from LaMP-QA-format records, check their quality, and
support the human evaluation of a build (blind annotation sheets, agreement)."""
