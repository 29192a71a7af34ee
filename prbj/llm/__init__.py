"""The one call path for every model call: cache, budget, rate limits and retries around LiteLLM."""
