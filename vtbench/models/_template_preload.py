"""Imported by the model-server template process only (:mod:`vtbench.models.template`):
sets the offline environment, then imports what every server needs, so that each forked
server starts with it all in memory. Importing this module anywhere else is a mistake."""

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
