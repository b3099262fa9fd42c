"""The agent's transcript format and tools: one action per turn, in plain text.

A transcript starts with the task (the issue and the actions) and then holds turns, each
``>>> ACTION`` followed by what running it printed. The model continues a transcript with
one action; the training rows of ``data/`` are transcripts cut before an action. Actions:

    $ COMMAND              a shell command, run in the repository (bash, time-limited)
    edit PATH START END    replace lines START..END of PATH by the lines that follow it,
    ...                    up to a line ``end_edit``
    submit                 stop; the answer is the diff of every change made

Standard library only, so the harness runs wherever Python does.
"""

import difflib
import os
import subprocess
from pathlib import Path

PROMPT = """You are fixing a bug in the Python library {repository} (the current folder).

Issue:
{issue}
Actions, one per turn:
$ COMMAND            run a shell command in the repository
edit PATH START END  replace lines START to END of PATH by the lines that follow,
                     up to a line end_edit
submit               finish: your answer is the diff of the changes you made
"""
TURN = "\n>>> "
STOP = [TURN.rstrip(" ")]


def start(issue: str, repository: str, issue_chars: int) -> str:
    return PROMPT.format(repository=repository, issue=issue[:issue_chars]) + TURN


def add_turn(transcript: str, action: str, observation: str) -> str:
    return transcript + action.strip("\n") + "\n" + observation.rstrip("\n") + "\n" + TURN


def first_action(text: str) -> str:
    """The action a completion starts with (an edit keeps its lines up to ``end_edit``)."""
    text = text.lstrip("\n")
    if text.startswith("edit "):
        head, _, rest = text.partition("end_edit")
        return head + "end_edit" if rest or text.rstrip().endswith("end_edit") else head.rstrip()
    return text.split("\n", 1)[0].strip()


def python_env(folder: Path) -> dict[str, str]:
    """The environment in which the repository's package imports (``src/`` layouts too)."""
    return {**os.environ, "PYTHONPATH": str(folder / "src") if (folder / "src").is_dir()
            else str(folder), "PYTHONDONTWRITEBYTECODE": "1"}


def run_shell(command: str, folder: Path, timeout: float, limit: int) -> str:
    try:
        done = subprocess.run(["bash", "-c", command], cwd=folder, capture_output=True,
                              timeout=timeout, text=True, errors="replace",
                              env=python_env(folder))
        output = done.stdout + done.stderr + f"(exit status {done.returncode})"
    except subprocess.TimeoutExpired:
        output = f"(timed out after {timeout:.0f} s)"
    return truncate(output, limit)


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - limit} characters left out ...]\n" + text[-half:]


def edit(folder: Path, action: str) -> str:
    """Apply an ``edit`` action; says what it did or why not."""
    head, _, body = action.partition("\n")
    parts = head.split()
    if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
        return "usage: edit PATH START END, then the new lines, then end_edit"
    path = (folder / parts[1]).resolve()
    if folder.resolve() not in path.parents or not path.is_file():
        return f"no file {parts[1]}"
    first, last = int(parts[2]), int(parts[3])
    lines = path.read_text().splitlines(keepends=True)
    if not 1 <= first <= last + 1 or last > len(lines):
        return f"lines {first}-{last} are not in {parts[1]} ({len(lines)} lines)"
    new = body.removesuffix("end_edit").rstrip("\n")
    replacement = [line + "\n" for line in new.split("\n")] if new else []
    lines[first - 1:last] = replacement
    path.write_text("".join(lines))
    return f"replaced lines {first}-{last} of {parts[1]} with {len(replacement)} lines"


def snapshot(folder: Path) -> dict[str, str]:
    """The text of every Python file of the repository (for the final diff)."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        if "__pycache__" not in path.parts:
            found[path.relative_to(folder).as_posix()] = path.read_text(errors="replace")
    return found


def diff(before: dict[str, str], folder: Path) -> str:
    after = snapshot(folder)
    chunks = []
    for path in sorted(before):
        if after.get(path, "") != before[path]:
            chunks += difflib.unified_diff(before[path].splitlines(keepends=True),
                                           after.get(path, "").splitlines(keepends=True),
                                           f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)
