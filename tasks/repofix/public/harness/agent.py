"""The agent loop: ask the model for an action, run it, show it what happened, repeat.

It fits on one screen on purpose: the model continues the transcript with one action
(``transcript.py``), the loop runs it in the instance's repository and appends what it
printed, until the model submits or the step limit is reached. The answer is the diff of
every change. Settings come from ``harness.toml``.

Why a loop of our own and not mini-swe-agent: that one needs litellm, datasets, pandas
and textual (a 755 MB environment, none of it in the harness sandbox), retries for about
8 s per call offline unless told not to, and its templates take 834 of SmolLM2's 8,192
tokens; this one needs the standard library only (``client.py`` speaks the server's
OpenAI-compatible wire format), and its transcript is exactly the training rows' format.
"""

from pathlib import Path

import transcript
from client import complete


def solve(issue: str, repository: str, folder: Path, base_url: str, settings: dict) -> dict:
    """One episode on one instance: the diff and the trajectory."""
    before = transcript.snapshot(folder)
    text = transcript.start(issue, repository, settings["issue_chars"])
    steps = []
    for _ in range(settings["max_steps"]):
        reply = complete(base_url, text, settings["decoding"], stop=transcript.STOP)
        action = transcript.first_action(reply["texts"][0])
        observation = act(action, folder, settings)
        steps.append({"action": action, "observation": observation,
                      "seconds": reply["call"]["seconds"]})
        if action.strip() == "submit":
            break
        text = transcript.add_turn(text, action, observation)
    return {"diff": transcript.diff(before, folder), "steps": steps}


def act(action: str, folder: Path, settings: dict) -> str:
    if action.strip() == "submit":
        return ""
    if action.startswith("$ "):
        return transcript.run_shell(action[2:], folder, settings["command_seconds"],
                                    settings["observation_chars"])
    if action.startswith("edit "):
        return transcript.edit(folder, action)
    return "unknown action: write `$ COMMAND`, `edit PATH START END` or `submit`"
