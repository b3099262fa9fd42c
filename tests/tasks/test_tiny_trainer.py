"""The shared tiny-task trainer (tasks/_tiny/trainer/train.py): batching and divergence."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from vtbench.layout import REPO_ROOT

TRAINER = REPO_ROOT / "tasks" / "_tiny" / "trainer"
BASE = REPO_ROOT / "models" / "tiny-base"


def trainer_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tiny_train", TRAINER / "train.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_padding_goes_after_the_tokens_and_never_counts_in_the_loss() -> None:
    train = trainer_module()
    batch = train.make_batch([([5, 6, 7], 1), ([8], 1)], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["labels"].tolist() == [[5, 6, 7], [8, -100, -100]]


def test_a_padded_row_is_seen_as_it_is_at_inference() -> None:
    """A short row batched with a long one gets the logits it gets alone: its tokens sit at
    positions 0.. as in generation (left padding shifted them by the padding width)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    train = trainer_module()
    tokenizer = AutoTokenizer.from_pretrained(BASE)
    model = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32).eval()
    short = train.encode(tokenizer, {"prompt": "Q: 2+3=", "completion": "5"}, 128)
    long = train.encode(tokenizer, {"prompt": "Q: what is 12 plus 30 minus 7?",
                                    "completion": "35"}, 128)
    batch = train.make_batch([short, long], tokenizer.pad_token_id)
    with torch.no_grad():
        together = model(input_ids=batch["input_ids"],
                         attention_mask=batch["attention_mask"]).logits[0, :len(short[0])]
        alone = model(input_ids=torch.tensor([short[0]])).logits[0]
    assert torch.allclose(together, alone, atol=1e-4)


@pytest.mark.slow
def test_a_diverged_training_fails_and_saves_no_model(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"prompt": f"Q: {i}+1=", "completion": str(i + 1)} for i in range(16)]
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = (TRAINER / "config.toml").read_text()
    config = "\n".join("lr = 1e30" if line.startswith("lr =") else line
                       for line in config.splitlines())
    (tmp_path / "config.toml").write_text(config.replace("steps = ", "steps = 20 #", 1))
    out = tmp_path / "model"
    result = subprocess.run(
        [sys.executable, str(TRAINER / "train.py"), "--base", str(BASE), "--data", str(data),
         "--out", str(out), "--config", str(tmp_path / "config.toml")],
        capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "training diverged" in result.stderr
    assert not (out / "model.safetensors").exists()
