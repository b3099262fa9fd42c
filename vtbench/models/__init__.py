"""Model substrate: the tiny character-level base model, SmolLM2 conversion, checkpoints,
the OpenAI-compatible model server and merging."""
