from pathlib import Path

import pytest

from vtbench.models.tiny import new_tiny_model, save_checkpoint


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real (randomly initialised) tiny checkpoint: safetensors, config, tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-model")
    save_checkpoint(new_tiny_model(seed=0), folder)
    return folder


def write_harness(folder: Path, body: str) -> Path:
    """A harness folder whose run.py follows the harness protocol with ``body`` as logic."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.py").write_text(
        "import argparse, json, os, sys\n"
        "p = argparse.ArgumentParser()\n"
        "for flag in ('--inputs', '--base-url', '--out', '--decoding'):\n"
        "    p.add_argument(flag)\n"
        "args = p.parse_args()\n"
        "instances = [json.loads(l) for l in open(args.inputs)]\n"
        "def answer(outputs):\n"
        "    with open(args.out, 'w') as out:\n"
        "        for i, o in zip(instances, outputs):\n"
        "            row = {'id': i['id'], 'output': o, 'trajectory': {}}\n"
        "            out.write(json.dumps(row) + '\\n')\n"
        + body
    )
    return folder
