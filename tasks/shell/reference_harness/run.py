"""shell reference harness: sample several commands, try each on a scratch copy, vote.

Protocol: python run.py --inputs IN.jsonl --base-url URL --out OUT.jsonl (see the initial
harness). For each instance it
1. unpacks the file system into a scratch folder and explores it read-only (``find``
   over each top-level folder), and drops a sampled command that names a path under
   those folders whose folder does not exist;
2. asks the model for a greedy reply and ``samples`` sampled ones, and keeps the first
   line of each that looks like a command (prose lines and code fences skipped);
3. runs each distinct command in its own fresh scratch copy, with the image's absolute
   paths (``/testbed/...``) pointed at the copy, a timeout and the instance's share of CPU
   time, and rejects the ones that fail (non-zero exit, an error message) or do nothing;
4. groups the rest by outcome (the lines printed, in any order, and the tree left) and
   answers with the command of the group that most samples reached (the greedy one on a
   tie); where every command was rejected, the greedy one.
"""

import argparse
import base64
import hashlib
import io
import json
import os
import re
import resource
import shutil
import subprocess
import tarfile
import tempfile
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client import complete

HERE = Path(__file__).parent
THREADS = 8
PROSE = re.compile(r"^(sure|here|you can|to do|the |this |use |it |i |for example)", re.I)


def chat_prompt(settings: dict, query: str) -> str:
    request = settings["request"].replace("{query}", query)
    return (f"<|im_start|>system\n{settings['system']}<|im_end|>\n"
            f"<|im_start|>user\n{request}<|im_end|>\n<|im_start|>assistant\n")


def command_of(reply: str) -> str:
    """The first line of a reply that looks like a command."""
    for line in reply.strip().splitlines():
        if line.strip().startswith("```"):
            continue
        line = line.strip().strip("`").strip()
        if line.startswith("$ "):
            line = line[2:]
        if line and not PROSE.match(line) \
                and not line.endswith(":"):
            return line
    return ""


def unpack(image_text: str, root: Path) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(image_text)), mode="r:gz") as tar:
        tar.extractall(root, filter="tar")
        return sorted({name.split("/", 1)[0] for name in tar.getnames()})


def explore(root: Path, tops: list[str]) -> list[str]:
    """Read-only: ``find`` over the image's folders, every path as the command sees it."""
    if not tops:
        return []
    found = subprocess.run(["find", *tops], cwd=root, capture_output=True, text=True,
                           timeout=10, check=False)
    return sorted("/" + line for line in found.stdout.splitlines() if line)


def pointed(command: str, tops: list[str], root: Path) -> str:
    """The command with the image's absolute paths pointed at the scratch copy."""
    for top in tops:
        command = re.sub(rf"(?<![\w./-])/{re.escape(top)}(?=/|\b|$)", f"{root}/{top}", command)
    return command


def plausible(command: str, tops: list[str], paths: set[str]) -> bool:
    """Every path the command names under the image's folders lies in a folder the image
    has (a command about a folder that does not exist is a wrong guess)."""
    for top in tops:
        for named in re.findall(rf"(?<![\w./-])/{re.escape(top)}(?:/[\w.*?-]+)*", command):
            parent = named.rstrip("/").rsplit("/", 1)[0] or named
            if named.rstrip("/") not in paths and parent not in paths:
                return False
    return True


def tree_state(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(path.relative_to(root).as_posix().encode())
        if path.is_file() and not path.is_symlink():
            digest.update(oct(path.stat().st_mode).encode() + path.read_bytes()[:1 << 20])
    return digest.hexdigest()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def try_command(image_text: str, command: str, settings: dict) -> tuple | None:
    """The outcome of ``command`` on a fresh scratch copy, or None where it failed or did
    nothing."""
    scratch = Path(tempfile.mkdtemp(prefix="shell-try-"))
    try:
        tops = unpack(image_text, scratch)
        before = tree_state(scratch)
        try:
            done = subprocess.run(["bash", "-c", pointed(command, tops, scratch)],
                                  cwd=scratch, capture_output=True,
                                  timeout=settings["command_timeout"],
                                  env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                       "HOME": str(scratch), "LANG": "C.UTF-8"})
        except subprocess.TimeoutExpired:
            return None
        if done.returncode != 0 or done.stderr.strip():
            return None
        printed = done.stdout.decode("utf-8", "replace").replace(str(scratch), "")
        after = tree_state(scratch)
        lines = tuple(sorted(line.rstrip() for line in printed.splitlines() if line.strip()))
        if not lines and after == before:
            return None
        return lines, after
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def vote(image_text: str, commands: list[str], settings: dict) -> tuple[str, dict]:
    """The command whose outcome most samples reached; commands[0] (greedy) on a tie."""
    counts = Counter(c for c in commands if c)
    started = children_cpu()
    outcomes: dict[str, tuple | None] = {}
    for command in sorted(counts, key=lambda c: (-counts[c], c != commands[0])):
        if children_cpu() - started > settings["cpu_per_instance"]:
            break
        outcomes[command] = try_command(image_text, command, settings)
    votes: Counter = Counter()
    for command, outcome in outcomes.items():
        if outcome is not None:
            votes[outcome] += counts[command]
    if not votes:
        return commands[0], {"tried": len(outcomes), "kept": 0}
    best = max(votes.values())
    for command in [commands[0], *sorted(counts, key=lambda c: -counts[c])]:
        if outcomes.get(command) is not None and votes[outcomes[command]] == best:
            return command, {"tried": len(outcomes), "kept": len(votes), "votes": best}
    return commands[0], {"tried": len(outcomes), "kept": len(votes)}


def solve(instance: dict, settings: dict, base_url: str) -> dict:
    query, image_text = instance["input"]["query"], instance["input"]["image"]
    prompt = chat_prompt(settings, query)
    greedy = complete(base_url, prompt, settings["decoding"], stop=settings["stop"])
    sampled = complete(base_url, prompt, settings["sampling"], stop=settings["stop"],
                       n=settings["samples"], seed=settings["seed"])
    commands = [command_of(text) for text in greedy["texts"] + sampled["texts"]]
    with tempfile.TemporaryDirectory(prefix="shell-explore-") as scratch:
        tops = unpack(image_text, Path(scratch))
        paths = set(explore(Path(scratch), tops))
    kept = [c if plausible(c, tops, paths) else "" for c in commands]
    answer, notes = vote(image_text, [commands[0], *kept[1:]], settings)
    return {"id": instance["id"], "output": answer,
            "trajectory": {"calls": [greedy["call"], sampled["call"]], "paths": len(paths),
                           "commands": commands, **notes}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--decoding", default=None, help="ignored: this harness decides")
    args = parser.parse_args()
    settings = tomllib.loads((HERE / "harness.toml").read_text())
    instances = [json.loads(line) for line in args.inputs.read_text().splitlines() if line]
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        results = pool.map(lambda i: solve(i, settings, args.base_url), instances)
        with args.out.open("w") as out:
            for result in results:
                out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
