"""Statistics over judgments and downstream outcomes: pure functions of loaded tables."""
