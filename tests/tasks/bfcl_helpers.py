"""Shared by the bfcl tests: possible answers written as outputs, and bfcl-eval's own
evaluation of a prompting model's replies (``eval_runner``), to compare the scorer with."""

import ast
import copy
import functools
import inspect
import sys
import types

from vtbench.tasks import find_task

TASK = find_task("bfcl")
builder, scorer, package = TASK.builder, TASK.scorer, TASK.builder.package
make_data = builder.make_data()


# ------------------------------------------------------------------ ground truth as outputs

def first_option(options: list) -> tuple[bool, object]:
    for option in options:
        if option != "":
            return True, answer_value(option)
    return False, None


def answer_value(value: object) -> object:
    """A possible answer's value (a dict of options per key, lists, scalars) as a value."""
    if isinstance(value, dict):
        chosen = {key: first_option(options) for key, options in value.items()}
        return {key: found for key, (ok, found) in chosen.items() if ok}
    if isinstance(value, list):
        return [answer_value(v) for v in value]
    return value


def answer_calls(item: dict) -> list[dict]:
    """The possible answer as calls: each parameter's first accepted value, optional ones
    that may be left out left out."""
    documents = {f["name"]: f for f in item["label"]["functions"]}
    calls = []
    for call in item["label"]["ground_truth"]:
        (name, parameters), = call.items()
        required = set(documents[name]["parameters"].get("required", []))
        arguments = {}
        for key, options in parameters.items():
            ok, value = first_option(options)
            if ok and not ("" in options and key not in required):
                arguments[key] = value
        calls.append({name: arguments})
    return calls


@functools.cache
def backend_parameters() -> dict[str, list[str]]:
    """Each backend method's parameter names, in order."""
    config = package.module("constants.executable_backend_config")
    found = {}
    for class_name in {c for half in builder.MULTI_TURN_HALVES for c in half}:
        path = config.CLASS_FILE_PATH_MAPPING[class_name].removeprefix("bfcl_eval.")
        backend = getattr(package.module(path), class_name)
        for name, method in inspect.getmembers(backend, inspect.isfunction):
            found[name] = [p for p in inspect.signature(method).parameters if p != "self"]
    return found


def named(call: str) -> str:
    """A possible answer's call with every argument named (BFCL's own are partly
    positional, which its decoder would drop from a model's reply)."""
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    names = backend_parameters()[node.func.id]
    arguments = {names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
    return f"{node.func.id}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def truth_turns(item: dict) -> list[list[str]]:
    return [[named(call) for call in turn] for turn in item["label"]["ground_truth"]]


def as_text(calls: list[dict]) -> str:
    """Calls as a prompting model writes them (what bfcl-eval decodes)."""
    written = [f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
               for call in calls for name, arguments in call.items()]
    return "[" + ", ".join(written) + "]"


def steps_as_text(turns: list[list[list[str]]]) -> list[list[str]]:
    """A multi-turn output's steps as the reply texts a prompting model would write."""
    return [["[" + ", ".join(step) + "]" for step in turn] for turn in turns]


# ------------------------------------------------------------------ bfcl-eval's own evaluation

@functools.cache
def load_bfcl_runner():
    """bfcl-eval's ``eval_runner`` and a prompting handler's decoders, as BFCL evaluates a
    prompting model. Stand-ins only for what these paths never use: the ``overrides``
    decorators and the tree-sitter Java/JavaScript parsers (not installed)."""
    stand_ins = {"overrides": {"final": lambda f: f, "override": lambda f: f,
                               "EnforceOverrides": object},
                 "bfcl_eval.model_handler.parser.java_parser": {
                     "parse_java_function_call": None},
                 "bfcl_eval.model_handler.parser.js_parser": {
                     "parse_javascript_function_call": None}}
    added = []
    for name, attributes in stand_ins.items():
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__dict__.update(attributes)
            sys.modules[name] = module
            added.append(name)
    try:
        runner = package.module("eval_checker.eval_runner")
        utils = package.module("model_handler.utils")
    finally:
        for name in added:
            del sys.modules[name]
    handler = types.SimpleNamespace(decode_ast=utils.default_decode_ast_prompting,
                                    decode_execute=utils.default_decode_execute_prompting)
    return runner, handler


def bfcl_accepts_single(item: dict, text: str) -> bool:
    """bfcl-eval's verdict on a reply's text to a single-turn item."""
    runner, handler = load_bfcl_runner()
    enums = package.module("constants.enums")
    label = item["label"]
    entry = {"id": label["id"], "question": item["input"]["question"],
             "function": copy.deepcopy(label["functions"])}
    result = runner._evaluate_single_ast_entry(
        handler, label["id"], text, copy.deepcopy(label["ground_truth"]), entry,
        package.MODEL_NAME, label["category"], enums.Language.PYTHON, enums.ReturnFormat.PYTHON)
    return bool(result["valid"])


def bfcl_accepts_multi(item: dict, steps: list[list[str]], run: str) -> bool:
    """bfcl-eval's verdict on a multi-turn item's replies: per turn, per step, a reply's
    text (``[f(a=1), g()]``); ``run`` keeps its backends apart from other runs'."""
    runner, handler = load_bfcl_runner()
    label = item["label"]
    entry = {"id": label["id"], **copy.deepcopy(
        {k: item["input"][k] for k in ("initial_config", "involved_classes")})}
    result = runner._evaluate_single_multi_turn_entry(
        handler, label["id"], steps, copy.deepcopy(label["ground_truth"]), entry,
        f"bfcl-eval-{run}", "multi_turn_base")
    return bool(result["valid"])
