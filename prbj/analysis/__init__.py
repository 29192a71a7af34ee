"""Statistics over judgments and downstream outcomes: pure functions of runs already loaded (RunData), plus
the files analysis keeps itself (baselines, the downstream store, correlation output)."""
