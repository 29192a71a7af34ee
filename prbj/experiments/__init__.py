"""`prbj run EXPERIMENT.toml`: a whole study (planner, judge grid, best-of-N, downstream, correlation, report,
claims) declared in one file and run as stages in dependency order, resumable from a manifest.

- `schema`: the experiment file, validated with one-line errors naming file, line and field;
- `commandline`: how an entry's keys become the options of an existing prbj command (the CLI describes them);
- `stages`: the stage graph, each stage a prbj command line (or the planner's calls) with hashed inputs;
- `manifest`: what ran, with which inputs, and what it produced (atomic writes);
- `runner`: runs, skips or resumes the stages; `dry_run`: counts calls and cost without sending any;
- `params`, `figures`, `claims`, `summary`: the paper's figures and its claims, checked on this experiment.

Stages drive the existing command bodies (judge, bon, downstream, correlate, report): no second copy of them.
"""
