"""dsl scorer (trusted): the share of hidden inputs the predicted program maps correctly.

The program is run by the pristine task's interpreter, never the candidate harness's copy.
"""

from pathlib import Path

from vtbench.tasks.registry import import_file

dsl = import_file(Path(__file__).parent / "public" / "harness" / "dsl.py", "dsl_scorer_language")


def score(item: dict, output: str) -> float:
    hidden = item["label"]["hidden"]
    if dsl.parse(output) is None:
        return 0.0
    return sum(dsl.run(output, source) == target for source, target in hidden) / len(hidden)
