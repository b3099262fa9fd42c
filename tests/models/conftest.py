"""Checkpoints built for the model tests: ones that attack the loader, and small real models
trained to say what a test needs."""

import json
import shutil
from pathlib import Path


def memory_bomb(source: Path, target: Path, intermediate_size: int = 150_000) -> Path:
    """A copy of the checkpoint ``source`` whose config asks for a huge MLP while its
    weights leave the MLP out: a few MB on disk that transformers would fill with
    ``layers × 3 × hidden × intermediate_size`` freshly initialised floats."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target)
    weights = target / "model.safetensors"
    kept = {name: tensor for name, tensor in load_file(weights).items() if ".mlp." not in name}
    save_file(kept, weights, metadata={"format": "pt"})
    config = json.loads((target / "config.json").read_text())
    config["intermediate_size"] = intermediate_size
    (target / "config.json").write_text(json.dumps(config))
    return target


def train_to_say(pairs: list[tuple[str, str]], out: Path, max_steps: int = 150) -> Path:
    """A small Llama over the character tokenizer, trained until greedy decoding of each
    prompt gives its reply then EOS (a real model that says what a test needs), saved as a
    checkpoint in ``out``. Deterministic: one thread, a fixed seed."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from vtbench.models.tiny import save_checkpoint
    from vtbench.models.tokenizer import build_char_tokenizer

    torch.set_num_threads(1)
    tokenizer = build_char_tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True))
    rows = []
    for prompt, reply in pairs:
        prompt_ids = list(tokenizer(prompt).input_ids)
        reply_ids = [*tokenizer(reply, add_special_tokens=False).input_ids,
                     tokenizer.eos_token_id]
        rows.append((prompt_ids + reply_ids, [-100] * len(prompt_ids) + reply_ids))
    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(i)) + i for i, _ in rows])
    labels = torch.tensor([[-100] * (width - len(i)) + t for i, t in rows])
    mask = (ids != tokenizer.pad_token_id).long()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    targets = labels[:, 1:] != -100
    for _ in range(max_steps):
        step = model(input_ids=ids, attention_mask=mask, labels=labels)
        # Every next token the most likely one: greedy decoding then says exactly the reply.
        if (step.logits[:, :-1].argmax(-1) == labels[:, 1:])[targets].all():
            break
        loss = step.loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    save_checkpoint(model.eval(), out)
    return out
