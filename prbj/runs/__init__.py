"""Executing a run: fan-out with progress, the judge command's body, and the run directory (rundir)."""
