"""Evaluation of one target system (model + harness) on one split of a task.

The model is served by our model server (trusted code, untrusted safetensors weights); the
harness runs sandboxed and sees instance inputs only; the trusted scorer reads the labels
after the harness has exited.
"""

from vtbench.evaluation.evaluate import evaluate
from vtbench.evaluation.result import EvaluationResult, InstanceResult

__all__ = ["EvaluationResult", "InstanceResult", "evaluate"]
