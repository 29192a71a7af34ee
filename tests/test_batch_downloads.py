"""An OpenAI batch's result files are read once, by prbj (issue 35): LiteLLM's success logging of an ended
batch downloaded the output file again in a task nothing awaited, which the end of the run's event loop cut
short ("coroutine 'OpenAIFilesAPI.afile_content' was never awaited" in the test runs) or let through (the file
downloaded twice)."""

from __future__ import annotations

import asyncio
import gc
import warnings

from loopback import ProviderServer

from prbj.llm.batch.ledger import Entry, JobRecord
from prbj.llm.batch.openai_client import OpenAIBatchClient
from prbj.llm.batch.wire import ENDED, BatchLine
from prbj.llm.providers import resolve_provider
from prbj.llm.transport import ChatCall


def _job(server: ProviderServer) -> tuple[JobRecord, list[BatchLine]]:
    spec = resolve_provider("gpt-5.1", api_base=server.url)
    messages = [[{"role": "user", "content": f"question {i}"}] for i in range(3)]
    calls = [ChatCall(spec, chat, {"max_tokens": 16}, "sk-batch") for chat in messages]
    record = JobRecord(
        job_id="job-1",
        run_id="run-1",
        provider=spec.name,
        family="openai",
        model=spec.model,
        api_base=server.url,
        api_key_env="OPENAI_API_KEY",
        input_price=0.0,
        output_price=0.0,
        live_input_price=0.0,
        live_output_price=0.0,
        entries=[Entry(f"key-{i}") for i in range(3)],
    )
    return record, [BatchLine(f"key-{i}", call) for i, call in enumerate(calls)]


async def _submit_poll_collect(server: ProviderServer, monkeypatch) -> int:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-batch")
    client = OpenAIBatchClient()
    record, lines = _job(server)
    record.provider_job_id = await client.submit(record, lines, lambda _record: None)
    while (await client.progress(record)).phase != ENDED:
        await asyncio.sleep(0.01)
    outcomes = await client.results(record)
    # Room for anything LiteLLM scheduled in the background on this loop to run, as a long run would give it.
    await asyncio.sleep(1.0)
    return len(outcomes)


def test_the_result_files_of_an_openai_batch_are_read_once(monkeypatch) -> None:
    with ProviderServer(reply=lambda request: "Result: A") as server:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answered = asyncio.run(_submit_poll_collect(server, monkeypatch))
            gc.collect()
        downloads = dict(server.batches.downloads)
    assert answered == 3
    assert downloads and all(count == 1 for count in downloads.values()), downloads
    assert not [w for w in caught if "never awaited" in str(w.message)]
