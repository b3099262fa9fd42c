"""VibeTraining-Bench: measures whether a research agent can improve an LLM system by
co-designing its training data, its trainer and its inference harness under a fixed budget.

Importing the package has no side effects and imports no heavy library.
"""

__version__ = "0.1.0"
