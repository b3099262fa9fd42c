"""Imported by the model-server template process only (:mod:`vtbench.models.template`):
sets the offline environment, then imports what every server needs and builds the caches
every server builds on its first start (pure Python: no tensor op, no thread, no GPU), so
that each forked server starts with it all in memory. Importing this module anywhere else
is a mistake."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import fastapi  # noqa: F401
import torch  # noqa: F401
import uvicorn  # noqa: F401
from transformers import (  # noqa: F401
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2ForCausalLM,
)

import vtbench.models.batching
import vtbench.models.checkpoint
import vtbench.models.server  # noqa: F401


def warm() -> None:
    """What each server would otherwise do once per fork: transformers' table of weight
    renamings (hundreds of regexes, ~40 ms), its check of each model class's source for a
    settable attention (it reads and searches the whole modeling file, ~20 ms), the FastAPI
    app, uvicorn's loaded config and its event-loop modules (~25 ms)."""
    import contextlib

    from vtbench.models.server import server_config

    with contextlib.suppress(ImportError, AttributeError):
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping

        get_checkpoint_conversion_mapping("llama")
    for model_class in (LlamaForCausalLM, Qwen2ForCausalLM):
        for check in ("_can_set_attn_implementation", "_can_set_experts_implementation"):
            with contextlib.suppress(AttributeError):
                getattr(model_class, check)()  # the class caches the answer
    config = server_config()
    with contextlib.suppress(AttributeError):
        config.get_loop_factory()  # imports the loop's modules (uvloop), starts no loop

