"""The smol/full-scale trainer (tasks/_hf/trainer/train.py): trl's SFTTrainer under accelerate.

Every test trains or inspects a real tiny Llama (random weights, the character tokenizer)
on CPU; the two-process run goes through ``accelerate launch`` and gloo like a run on
several GPUs goes through it and NCCL.
"""

import copy
import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import tomli_w
import torch

from tests.evaluation.conftest import tiny_model  # noqa: F401
from tests.grader.conftest import GraderProcess, grader, small_task  # noqa: F401
from vtbench.layout import REPO_ROOT
from vtbench.models.checkpoint import load_checkpoint, load_tokenizer
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import import_file

TRAINER = REPO_ROOT / "tasks" / "_hf" / "trainer"
ROWS = [{"prompt": f"Q: {a}+{b}=", "completion": f" {a + b}"} for a in range(16)
        for b in range(8)]


@pytest.fixture(scope="module")
def train() -> Iterator[ModuleType]:
    """The trainer as a module, run in this process on one thread as train.py pins it
    (two threads collapse whenever another process competes for the cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield import_file(TRAINER / "train.py", "hf_train")
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-init Llama (2 layers, hidden 64) with the character tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from vtbench.models.tokenizer import build_char_tokenizer

    folder = tmp_path_factory.mktemp("hf-base")
    tokenizer = build_char_tokenizer()
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=128, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hf-data")
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return folder


def settings(**changes: object) -> dict:
    """The shipped config.toml with ``changes`` (a few fast steps on one process by default)."""
    config = tomllib.loads((TRAINER / "config.toml").read_text())
    config.update(steps=30, lr=3e-3, warmup_steps=5, max_length=32, processes=1, log_every=10)
    config.update(changes)
    return config


def first_batch(train: ModuleType, base: Path, data: Path, tmp_path: Path, **changes: object):
    trainer = train.build_trainer(base, data, 0, train.read_config(write(tmp_path, **changes)),
                                  tmp_path / "work")
    return trainer, next(iter(trainer.get_train_dataloader()))


def write(folder: Path, **changes: object) -> Path:
    path = folder / "config.toml"
    path.write_text(tomli_w.dumps(settings(**changes)))
    return path


def test_only_completion_tokens_and_the_eos_carry_the_loss(train, base, data, tmp_path) -> None:
    trainer, batch = first_batch(train, base, data, tmp_path)
    tokenizer = trainer.processing_class
    completions = {row["prompt"]: row["completion"] for row in ROWS}
    for ids, labels in zip(batch["input_ids"], batch["labels"], strict=True):
        text = tokenizer.decode(ids[ids != tokenizer.pad_token_id], skip_special_tokens=True)
        prompt = text[:text.index("=") + 1]
        assert tokenizer.decode(labels[labels != -100]) == completions[prompt] + "<eos>"


def test_with_completion_only_loss_off_every_token_carries_the_loss(
        train, base, data, tmp_path) -> None:
    _, batch = first_batch(train, base, data, tmp_path, completion_only_loss=False)
    real = batch["attention_mask"] == 1
    assert torch.equal(batch["labels"][real], batch["input_ids"][real])
    assert (batch["labels"][~real] == -100).all()


def test_packed_rows_keep_completion_only_labels_and_do_not_see_each_other(
        train, base, data, tmp_path) -> None:
    trainer, batch = first_batch(train, base, data, tmp_path, packing=True)
    tokenizer = trainer.processing_class
    starts = [*(batch["position_ids"][0] == 0).nonzero().flatten().tolist(),
              batch["input_ids"].shape[1]]
    assert len(starts) > 17, "a packed batch of 16 sequences holds more than 16 rows"
    labelled = tokenizer.decode(batch["labels"][batch["labels"] != -100])
    assert "Q:" not in labelled and labelled.count("<eos>") == len(starts) - 1
    model = trainer.model.eval()
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"],
                       position_ids=batch["position_ids"]).logits[0]
        row = slice(starts[3], starts[4])
        alone = model(input_ids=batch["input_ids"][:, row]).logits[0]
    assert torch.allclose(packed[row], alone, atol=1e-5)


def test_wrapped_packing_cuts_rows_laid_end_to_end_into_sequences_of_max_length(
        train, base, data, tmp_path) -> None:
    trainer, batch = first_batch(train, base, data, tmp_path, packing=True,
                                 packing_strategy="wrapped")
    assert batch["input_ids"].shape == (16, 32) and "position_ids" not in batch
    text = trainer.processing_class.decode(batch["input_ids"][0])
    assert text.count("Q:") >= 2, "a sequence holds more than one row"


def test_an_unknown_packing_strategy_is_refused_naming_the_choices(tmp_path) -> None:
    result = run_trainer(tmp_path, tmp_path, tmp_path / "out",
                         write(tmp_path, packing=True, packing_strategy="greedy"))
    assert result.returncode == 1
    assert "packing_strategy = 'greedy', expected one of bfd, wrapped" in result.stderr


@pytest.mark.slow
def test_two_cpu_processes_under_accelerate_train_a_checkpoint_the_loader_accepts(
        base, data, tmp_path) -> None:
    out = tmp_path / "model"
    result = run_trainer(base, data, out, write(tmp_path, processes=2, steps=40))
    assert result.returncode == 0, result.stderr[-2000:]
    log = json.loads((out / "train_log.json").read_text())
    assert (log["processes"], log["backend"], log["device"]) == (2, "gloo", "cpu")
    assert log["rows"] == len(ROWS) and log["tokens"] > 0
    losses = [loss for _, loss in log["loss_curve"]]
    assert [step for step, _ in log["loss_curve"]] == [10, 20, 30, 40]
    assert losses[-1] < 0.7 * losses[0]
    assert log["command"][:2] == ["python", "trainer/train.py"]
    assert sorted(p.name for p in out.iterdir() if p.suffix in (".safetensors", ".bin")) == [
        "model.safetensors"]
    assert_loads_with_new_weights(base, out)


def test_lora_saves_full_weights_with_the_adapter_merged_in(train, base, data, tmp_path) -> None:
    from safetensors import safe_open

    out = tmp_path / "model"
    config = train.read_config(write(tmp_path, lora={"enabled": True, "r": 4, "alpha": 8}))
    log = train.train(base, data, out, 0, config)
    assert log and log["loss_curve"][-1][1] < log["loss_curve"][0][1]
    names = {p.name for p in out.iterdir()}
    assert "adapter_config.json" not in names and "adapter_model.safetensors" not in names
    with safe_open(out / "model.safetensors", "pt") as merged, \
            safe_open(base / "model.safetensors", "pt") as original:
        assert set(merged.keys()) == set(original.keys())
    assert_loads_with_new_weights(base, out)



def test_a_lora_trained_on_a_bf16_base_is_merged_into_the_full_precision_base(
        train, base, data, tmp_path) -> None:
    """On a GPU the frozen base trains in bf16; the merge must not round what the adapter
    leaves alone, and must add the same update as a merge in float32."""
    from safetensors.torch import load_file

    config = train.read_config(write(tmp_path, steps=5, lora={"enabled": True, "r": 4}))
    trainer = train.build_trainer(base, data, 0, config, tmp_path / "work")
    trainer.train()
    on_bf16 = copy.deepcopy(trainer.model)
    for name, weight in on_bf16.named_parameters():
        if "lora_" not in name:
            weight.data = weight.data.to(torch.bfloat16)
    merged = train.merged_lora(on_bf16, base, torch.float32).state_dict()
    expected = trainer.model.merge_and_unload().state_dict()
    original = load_file(base / "model.safetensors")
    for name, weight in merged.items():
        assert weight.dtype == torch.float32
        assert torch.allclose(weight, expected[name], atol=1e-6), name
    assert torch.equal(merged["model.embed_tokens.weight"], original["model.embed_tokens.weight"])
    assert not torch.equal(merged["model.layers.0.self_attn.q_proj.weight"],
                           original["model.layers.0.self_attn.q_proj.weight"])


def test_a_diverged_training_fails_and_saves_no_model(train, base, data, tmp_path,
                                                       capsys) -> None:
    out = tmp_path / "model"
    with pytest.raises(SystemExit):
        train.train(base, data, out, 0, train.read_config(write(tmp_path, lr=1e30)))
    assert "training diverged" in capsys.readouterr().err
    assert not (out / "model.safetensors").exists()


def test_an_unknown_setting_is_refused_with_its_name(train, tmp_path, capsys) -> None:
    path = write(tmp_path, learning_rate=1e-4, lora={"rank": 8})
    with pytest.raises(SystemExit):
        train.read_config(path)
    assert "unknown settings learning_rate, lora.rank" in capsys.readouterr().err


def run_trainer(base: Path, data: Path, out: Path, config: Path,
                cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VTBENCH_THREADS": "1", "VTBENCH_DEVICE": "cpu"}
    return subprocess.run(
        [sys.executable, str(TRAINER / "train.py"), "--base", str(base), "--data", str(data),
         "--out", str(out), "--config", str(config)],
        capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


def assert_loads_with_new_weights(base: Path, out: Path) -> None:
    trained, original = load_checkpoint(out), load_checkpoint(base)
    assert load_tokenizer(out).eos_token == "<eos>"
    changed = [name for name, weight in original.state_dict().items()
               if not torch.equal(weight, trained.state_dict()[name])]
    assert changed


@pytest.mark.slow
def test_a_candidate_trained_on_task_data_validates_through_the_grader(
        grader: GraderProcess, small_task: Path, tiny_model: Path, tmp_path: Path,  # noqa: F811
) -> None:
    task = find_task(str(small_task))
    workspace = tmp_path / "workspace"
    materialize(task, workspace, components=("data",))
    shutil.copytree(tiny_model, workspace / "models" / "base")
    config = write(tmp_path, processes=2, steps=20, lr=1e-3, max_length=256)
    result = run_trainer(workspace / "models" / "base", workspace / "data",
                         workspace / "models" / "hf", config, cwd=workspace)
    assert result.returncode == 0, result.stderr[-2000:]
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace, validations=1))
    answer = agent.post("/v1/validations", json={"model": "models/hf"})
    assert answer.status_code == 200, answer.text
    validation = answer.json()
    assert validation["state"] == "completed" and validation["n"] == 4
    assert 0.0 <= validation["score"] <= 1.0


def test_humaneval_trains_with_flawed_settings_that_its_reference_fixes(train, tmp_path) -> None:
    task = find_task("humaneval")
    materialize(task, tmp_path, components=("trainer",))
    trainer = tmp_path / "trainer"
    assert (trainer / "train.py").read_text() == (TRAINER / "train.py").read_text()
    initial = train.read_config(trainer / "config.toml")
    assert not initial["completion_only_loss"]
    assert (initial["schedule"], initial["warmup_steps"]) == ("constant", 0)
    task.reference.apply_trainer(trainer, task)
    improved = train.read_config(trainer / "config.toml")
    assert improved["completion_only_loss"] and improved["schedule"] == "cosine"
    assert improved["lr"] < initial["lr"] and improved["warmup_steps"] > 0
    assert improved["steps"] == initial["steps"]


@pytest.mark.slow
def test_a_compiled_training_runs_the_compiled_model_and_saves_plain_weights(
        train, base, data, tmp_path) -> None:
    out = tmp_path / "model"
    config = train.read_config(write(tmp_path, steps=5, compile=True))
    trainer = train.build_trainer(base, data, 0, config, tmp_path / "work")
    trainer.train()
    assert isinstance(trainer.model_wrapped, torch._dynamo.eval_frame.OptimizedModule)
    log = train.train(base, data, out, 0, config)
    assert log and all(math.isfinite(loss) for _, loss in log["loss_curve"])
    assert_loads_with_new_weights(base, out)
