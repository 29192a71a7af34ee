"""Provider batch APIs: calls the cache cannot answer are bought as batch jobs (half price, answers within a day)
and stored in the very cache entries a live call would write.

- `ledger`: the durable record of every job (in the cache folder), written before a submission returns.
- `wire`: the provider-neutral shapes (one request line, one outcome, a job's progress) and the client protocol.
- `openai_client`, `anthropic_client`, `gemini_client`: each provider's batch wire format.
- `queue`: what the gateway hands over in batch mode; submits, polls, stores answers, reports outcomes.
- `trouble`: a provider refusing a job's create, poll or results call ends the run in one line (exit 1).
"""

from __future__ import annotations

from prbj.errors import PrbjError


class BatchSubmitted(PrbjError):
    """--no-wait: jobs are submitted and recorded; the run stops here, successfully, and says how to collect."""

    exit_code = 0
