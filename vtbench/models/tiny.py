"""The shared tiny base model: a small Llama-class decoder over the character tokenizer."""

from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtbench.models.tokenizer import build_char_tokenizer

if TYPE_CHECKING:
    from transformers import LlamaForCausalLM

TINY_ARCHITECTURE: dict[str, Any] = {
    "hidden_size": 192,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 6,
    "num_key_value_heads": 6,
    "max_position_embeddings": 384,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
}


def new_tiny_model(seed: int) -> "LlamaForCausalLM":
    """A freshly initialised tiny model, identical for identical seeds."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_char_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY_ARCHITECTURE,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def save_checkpoint(model: Any, out: Path) -> None:
    """Save weights as safetensors with config and the character tokenizer."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    build_char_tokenizer().save_pretrained(out)
