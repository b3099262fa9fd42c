"""A validation's model-server start: launch to ``/health``, for one checkpoint on the CPU.

Each case runs in a fresh process, as a fresh grader: ``cold`` starts the first server
with no template running (the template's imports are paid by that start, as the first
validation of every grader did), ``warm`` starts the template first, as the grader now
does when it starts, waits ``--agent-seconds`` (the agent's start and first training),
then starts its servers. Prints every start's seconds.

    python bench/server_start.py --model ~/.local/share/vtbench/base-models/smol/KEY
"""

import argparse
import subprocess
import sys
from pathlib import Path

CASE = """
import sys, time
from pathlib import Path
from vtbench.models.serving import serve_model
from vtbench.models.template import start_template
model, case, wait, starts = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
if case == "warm":
    start_template()
    time.sleep(wait)
for index in range(int(starts)):
    started = time.monotonic()
    with serve_model(model, device="cpu"):
        print(f"{time.monotonic() - started:.2f}", flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--agent-seconds", type=float, default=30.0)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    for case in ("cold", "warm"):
        done = subprocess.run([sys.executable, "-c", CASE, str(args.model), case,
                               str(args.agent_seconds), str(args.starts)],
                              capture_output=True, text=True, check=True)
        seconds = done.stdout.split()
        print(f"{case}: first start {seconds[0]} s, then {', '.join(seconds[1:])} s")


if __name__ == "__main__":
    main()
