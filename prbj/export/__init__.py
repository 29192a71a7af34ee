"""Exports of judge runs to formats other tools read: Every Eval Ever (an aggregate JSON and an instance-level
JSONL per judge), Inspect eval logs (through inspect-ai's own API), and the flat per-judgment table as CSV or
Parquet. Pure: every function here takes runs already in memory (prbj.runs.rundir loads them) and returns what
to write. Profile text never enters an export unless the caller asks for it (`include_profiles`); docs/export.md
describes every format and its encoding choices."""
