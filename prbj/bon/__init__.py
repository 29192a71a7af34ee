"""Best-of-N: a policy writes N answers per question, reward models pick the best of the first k, a gold judge
grades the picks against the rubric. Three commands share one run directory:

    prbj bon sample    → run.json, samples.parquet
    prbj bon score     → scores.parquet, picks.parquet
    prbj bon evaluate  → gold.parquet, evaluations.parquet, summary.json, rms/<rm>/evaluation_summary.json,
                         downstream.parquet (for `prbj downstream add`)

The gold rubric is the scoring standard: only `prbj.bon.gold` reads it. The policy and the reward models get
guarded views of each question (`Pair.view("profile")` or the judge's own context, never "oracle").
"""
