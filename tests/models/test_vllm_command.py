"""The vLLM backend's command line (vLLM itself is not installed here: its interpreter is
named by ``$VTBENCH_VLLM_PYTHON``, and only the command is checked)."""

from pathlib import Path

import pytest

from vtbench.models.serving import VllmServer


def test_vllm_answers_to_the_names_harnesses_send_and_reads_tool_calls_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTBENCH_VLLM_PYTHON", str(tmp_path / "vllm-venv" / "bin" / "python"))
    model = tmp_path / "tuned-a"
    model.mkdir()
    command = VllmServer(model, tmp_path / "model.sock").command()
    names = command[command.index("--served-model-name") + 1:][:2]
    assert names == ["tuned-a", "candidate"]
    assert command[command.index("--tool-call-parser") + 1] == "hermes"
    assert "--enable-auto-tool-choice" in command and "--uds" in command
