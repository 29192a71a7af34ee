"""In-process models: scalar reward models, a causal-LM generator, packing, batching, model files."""
