"""What the lightweight baselines know about the training rows of the tiny tasks, bfcl, shell
and humaneval: the harness's prompt format, the other formats the public data writes the same
content in, and how a row's label can be checked against its own input.

A check never makes a label: :meth:`RowCheck.normalise` rewrites a row into the format the
harness prompts with (``Q: …\\nA:`` → ``Question: …\\nAnswer:``, a Python dict → JSON)
keeping every value it holds, and :meth:`RowCheck.consistent` only says whether a row's
label agrees with its input (extract: every value appears in the sentence; arith: the worked
arithmetic checks out on the question's numbers; bfcl: the calls fit the listed documents;
shell: the command names the request's files). A row whose label cannot be checked does not
pass. Everything here is read from public files (the task's README, its harness and its
training data), as a careful agent in the research sandbox would.
"""

import ast
import json
import operator
import re
import shlex
import tomllib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import ClassVar, Protocol

Pair = tuple[str, str]
"""(prompt, completion) of one training row."""
OPERATIONS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul}


class RowCheck(Protocol):
    prompt: str
    """The harness's prompt template (its ``harness.toml``), which normalised rows follow."""

    def normalise(self, row: Pair) -> Pair | None:
        """The row in the harness's format with the same content; None when its format is
        not one the task's data is known to use."""
        ...

    def consistent(self, rows: Sequence[Pair]) -> list[bool]:
        """Whether each normalised row's label checks out against its input."""
        ...


def numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def one_input(prompt: str, formats: Sequence[re.Pattern[str]]) -> str | None:
    """The input text of a prompt written in one of ``formats`` (one group each)."""
    for pattern in formats:
        match = pattern.fullmatch(prompt)
        if match:
            return match[1]
    return None


class RowByRow:
    """A check whose verdict on a row reads that row alone (:meth:`checks_out`)."""

    def consistent(self, rows: Sequence[Pair]) -> list[bool]:
        return [self.checks_out(prompt, completion) for prompt, completion in rows]

    def checks_out(self, prompt: str, completion: str) -> bool:
        raise NotImplementedError


class Arith(RowByRow):
    """Worked answers ``" 8+23=31. 31-9=22. Answer: 22"``: both steps are right, they use
    the question's three numbers, and the answer is the second step's result."""

    prompt = "Question: {question}\nAnswer:"
    FORMATS = (re.compile(r"Question: (.+)\nAnswer:", re.S), re.compile(r"Q: (.+)\nA:", re.S))
    WORKED = re.compile(r" (\d+)([-+*])(\d+)=(\d+)\. (\d+)([-+*])(\d+)=(-?\d+)\. Answer: (-?\d+)")

    def normalise(self, row: Pair) -> Pair | None:
        question = one_input(row[0], self.FORMATS)
        if question is None or not self.WORKED.fullmatch(row[1]):
            return None
        return self.prompt.format(question=question), row[1]

    def checks_out(self, prompt: str, completion: str) -> bool:
        question, worked = one_input(prompt, self.FORMATS), self.WORKED.fullmatch(completion)
        if question is None or worked is None:
            return False
        a, op1, b, ab, ab2, op2, c, total, answer = worked.groups()
        return (OPERATIONS[op1](int(a), int(b)) == int(ab) == int(ab2)
                and OPERATIONS[op2](int(ab), int(c)) == int(total) == int(answer)
                and sorted(numbers(question)) == sorted(map(int, (a, b, c))))


class Extract:
    """One JSON object of the fields a sentence states: every value appears in the
    sentence, the name has a first and a last name (the README says so), and a field whose
    value the sentence holds is not missing (a number is an age; cities and jobs are the
    ones other rows' labels found in their sentences)."""

    prompt = "Text: {text}\nJSON:"
    FORMATS = (re.compile(r"Text: (.+)\nJSON:", re.S), re.compile(r"Sentence: (.+)\nOutput:", re.S))
    FIELDS = ("name", "age", "city", "job")

    def normalise(self, row: Pair) -> Pair | None:
        text, label = one_input(row[0], self.FORMATS), self.label(row[1])
        if text is None or label is None:
            return None
        return self.prompt.format(text=text), " " + json.dumps(label)

    @staticmethod
    def label(completion: str) -> dict[str, object] | None:
        """The object a completion writes (JSON, a Python dict, after ``Result:`` or before
        a ``//`` comment), with a number written as a string back to a number."""
        text = re.sub(r"\s*//[^\n]*$", "", completion.strip()).removeprefix("Result:").strip()
        try:
            found = json.loads(text)
        except ValueError:
            try:
                found = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
        if not isinstance(found, dict) or not all(isinstance(k, str) for k in found):
            return None
        return {key: number_or_same(value) for key, value in found.items()}

    def consistent(self, rows: Sequence[Pair]) -> list[bool]:
        parsed = [(one_input(prompt, self.FORMATS) or "", self.label(completion) or {})
                  for prompt, completion in rows]
        stated = [self.values_stated(text, label) for text, label in parsed]
        stated_labels = [label for (_, label), ok in zip(parsed, stated, strict=True) if ok]
        vocabulary = {field: {str(label[field]) for label in stated_labels if field in label}
                      for field in ("city", "job")}
        return [ok and self.complete(text, label, vocabulary)
                for (text, label), ok in zip(parsed, stated, strict=True)]

    def values_stated(self, text: str, label: dict[str, object]) -> bool:
        if not label or not set(label) <= set(self.FIELDS) or "name" not in label:
            return False
        name, age = label["name"], label.get("age")
        if not isinstance(name, str) or len(name.split()) < 2:
            return False
        if age is not None and (type(age) is not int or age not in numbers(text)):
            return False
        words = [label[f] for f in ("name", "city", "job") if f in label]
        return all(isinstance(w, str) and w.strip() and appears(w, text) for w in words)

    @staticmethod
    def complete(text: str, label: dict[str, object], vocabulary: dict[str, set[str]]) -> bool:
        if numbers(text) and "age" not in label:
            return False
        return all(field in label or not any(appears(word, text) for word in words)
                   for field, words in vocabulary.items())


def number_or_same(value: object) -> object:
    """A number written as a string (``"41"``) as the number; any other value as it is."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return value


def appears(words: str, text: str) -> bool:
    """Whether ``words`` occur in ``text`` as whole words."""
    return re.search(rf"(?<!\w){re.escape(words)}(?!\w)", text) is not None


class Toolcalc(RowByRow):
    """``Calc: EXPR=RESULT\\nAnswer: RESULT``: the expression uses the question's numbers
    (a count like "on 3 days" may be left out), multiplies exactly where the question
    names a product, and its result and the answer are right. A row that answers without
    the calculator cannot be checked, so it does not pass."""

    prompt = "Question: {question}\n"
    FORMATS = (re.compile(r"Question: (.+)\n", re.S), re.compile(r"Q: (.+)\n", re.S))
    CALC = re.compile(r"Calc: *([\d +*x]+?) *= *(\d+)")
    ANSWER = re.compile(r"(?:Answer:|answer=|The answer is) *(\d+)\.?")
    PRODUCT_WORDS = frozenset({"times", "multiply", "product", "hold", "holds", "each"})

    def normalise(self, row: Pair) -> Pair | None:
        question = one_input(row[0], self.FORMATS)
        lines = row[1].split("\n")
        if question is None or len(lines) > 2:
            return None
        prompt = self.prompt.format(question=question)
        answer = self.ANSWER.fullmatch(lines[-1])
        if len(lines) == 1:
            return (prompt, f"Answer: {answer[1]}") if answer else None
        calc = self.CALC.fullmatch(lines[0])
        if calc is None or answer is None:
            return None
        expression = calc[1].replace("x", "*").replace(" ", "")
        return prompt, f"Calc: {expression}={calc[2]}\nAnswer: {answer[1]}"

    def checks_out(self, prompt: str, completion: str) -> bool:
        question = one_input(prompt, self.FORMATS)
        found = re.fullmatch(r"Calc: (\d+(?:[+*]\d+)*)=(\d+)\nAnswer: (\d+)", completion)
        if question is None or found is None:
            return False
        expression, result, answer = found.groups()
        used, given = Counter(numbers(expression)), Counter(numbers(question))
        names_product = bool(self.PRODUCT_WORDS & set(re.findall(r"[a-z]+", question.lower())))
        return (value(expression) == int(result) == int(answer) and used <= given
                and used.total() >= given.total() - 1 and ("*" in expression) == names_product)


def value(expression: str) -> int:
    """A sum of products of integers."""
    total = 0
    for term in expression.split("+"):
        product = 1
        for factor in term.split("*"):
            product *= int(factor)
        total += product
    return total


class Dsl(RowByRow):
    """A program for three examples: written in the documented syntax (``a | b``, lower
    case), it reproduces every example with the task's own interpreter (``harness/dsl.py``)."""

    prompt = "{examples}program:"
    EXAMPLE = re.compile(r"in: (\S*) out: (\S*)")

    def __init__(self, interpreter: ModuleType) -> None:
        self.dsl = interpreter

    def examples(self, prompt: str) -> list[list[str]] | None:
        lines = prompt.split("\n")
        if lines[-1] != "program:" or len(lines) < 2:
            return None
        found = [self.EXAMPLE.fullmatch(line) for line in lines[:-1]]
        return [[m[1], m[2]] for m in found if m] if all(found) else None

    def normalise(self, row: Pair) -> Pair | None:
        if self.examples(row[0]) is None:
            return None
        steps = [step.strip() for step in re.split(r"[|,]", row[1].strip().lower())]
        return row[0], " " + " | ".join(steps)

    def checks_out(self, prompt: str, completion: str) -> bool:
        examples = self.examples(prompt)
        return bool(examples) and all(self.dsl.run(completion, source) == target
                                      for source, target in examples or [])


class Bfcl(RowByRow):
    """Calls of functions listed as JSON documents, in SmolLM2's chat format. A reply is
    rewritten to its list of calls alone (a code fence, a preamble or a repeated turn
    around it goes); it checks out when every called function is listed, every argument
    is a documented parameter of the declared type (a number is not a string), every
    required parameter is there, and a question that asks for the same again ("Do the
    same for ...") gets a call for each. A row that lists its functions as Python
    signatures cannot be rewritten into documents without inventing their types: it does
    not pass."""

    prompt = "{question}\n\nFunctions:\n{functions}"
    USER = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.S)
    TYPES: ClassVar[dict[str, tuple[type, ...]]] = {
        "string": (str,), "integer": (int,), "float": (int, float), "number": (int, float),
        "boolean": (bool,), "array": (list, tuple), "tuple": (list, tuple), "dict": (dict,),
        "object": (dict,)}

    def normalise(self, row: Pair) -> Pair | None:
        if self.documents(row[0]) is None:
            return None
        lines = re.split(r"\n|<\|im_(?:start|end)\|>", row[1])
        calls = next((line.strip() for line in lines if self.calls(line.strip())), None)
        return (row[0], calls) if calls else None

    def documents(self, prompt: str) -> tuple[str, dict[str, dict]] | None:
        """The question and the listed documents by name; None for another format."""
        user = self.USER.search(prompt)
        question, found, listing = (user[1] if user else "").partition("\n\nFunctions:\n")
        try:
            listed = json.loads(listing) if found else None
        except ValueError:
            return None
        if not isinstance(listed, list) or not all(
                isinstance(d, dict) and isinstance(d.get("name"), str) for d in listed):
            return None
        return question, {d["name"]: d for d in listed}

    @staticmethod
    def calls(text: str) -> list[tuple[str, dict[str, object]]] | None:
        """The calls of ``[f(a=1), g(b='x')]``, keyword arguments with literal values only."""
        try:
            tree = ast.parse(text, mode="eval").body
            if not isinstance(tree, ast.List) or not tree.elts or not all(
                    isinstance(n, ast.Call) and not n.args for n in tree.elts):
                return None
            return [(ast.unparse(n.func), {k.arg: ast.literal_eval(k.value)
                                           for k in n.keywords if k.arg})
                    for n in tree.elts if isinstance(n, ast.Call)]
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            return None

    def checks_out(self, prompt: str, completion: str) -> bool:
        found, calls = self.documents(prompt), self.calls(completion)
        if found is None or not calls:
            return False
        question, documents = found
        if len(calls) < 1 + question.count("Do the same for"):
            return False
        return all(name in documents and self.fits(arguments, documents[name])
                   for name, arguments in calls)

    def fits(self, arguments: dict[str, object], document: dict) -> bool:
        parameters = document.get("parameters") or {}
        properties = parameters.get("properties") or {}
        return (set(parameters.get("required") or []) <= set(arguments)
                and all(key in properties and self.typed(value, properties[key])
                        for key, value in arguments.items()))

    def typed(self, value: object, schema: dict) -> bool:
        kinds = self.TYPES.get(schema.get("type", ""))
        if kinds is None:
            return True
        return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


class Shell(RowByRow):
    """One bash command for a request in SmolLM2's chat format. A reply that wraps its
    command in prose ("Sure! Here is the command:", "For example:", a code fence) is
    rewritten to the command alone; it checks out when every absolute path it names is one
    the request names, or lies under one, and every number but 0 and 1 is one the request
    states (a command copied from another row names other files)."""

    prompt = "Write one bash command that does this: {query}\nReply with the command only."
    QUERY = re.compile(r"<\|im_start\|>user\nWrite one bash command that does this: (.*?)\n"
                       r"Reply with the command only\.<\|im_end\|>", re.S)
    PROSE = (re.compile(r"```(?:bash)?\n(.+?)\n```", re.S),
             re.compile(r"(?:You can use the following command:|For example:) (.+)", re.S),
             re.compile(r"Sure! Here is the command:\n(.+)", re.S))
    PATH = re.compile(r"/[\w.\-/]*[\w.\-]")
    NUMBER = re.compile(r"(?<![\w./-])\d+(?![\w.])")

    def normalise(self, row: Pair) -> Pair | None:
        if not self.QUERY.search(row[0]):
            return None
        command = row[1].strip()
        for pattern in self.PROSE:
            found = pattern.search(command)
            if found:
                command = found[1].strip()
                break
        return (row[0], command) if command and "\n" not in command else None

    def checks_out(self, prompt: str, completion: str) -> bool:
        query, named = self.QUERY.search(prompt), self.paths(completion)
        if query is None or named is None:
            return False
        given = {path.rstrip("/") for path in self.PATH.findall(query[1])}
        numbers = set(self.NUMBER.findall(completion)) - {"0", "1"}
        return (all(any(p == g or p.startswith(g + "/") for g in given) for p in named)
                and numbers <= set(self.NUMBER.findall(query[1])))

    @staticmethod
    def paths(command: str) -> set[str] | None:
        """The absolute paths among the command's words (None: it does not split)."""
        try:
            words = shlex.split(command)
        except ValueError:
            return None
        return {part.rstrip("/*").rstrip("/") for word in words
                for part in re.split(r"[<>|;=]", word) if part.startswith("/")}


class Humaneval(RowByRow):
    """A function's body after its signature and docstring: a body indented with tabs or
    two spaces a level is rewritten to four; it checks out when the function parses, does
    something (not ``pass``, ``...`` or ``raise NotImplementedError``) and reads at least one
    of its own parameters where it has any besides ``self`` and ``cls`` (a body paired with
    another function's docstring reads that function's names instead)."""

    prompt = ""
    """The harness sends each prompt as it is; it is known by its stop strings instead."""
    STOP = ("\ndef", "\nclass", "\nif __name__", "\nprint")

    def normalise(self, row: Pair) -> Pair | None:
        body = self.four_spaces(row[1])
        return (row[0], body) if self.function(row[0], body) is not None else None

    @staticmethod
    def four_spaces(body: str) -> str:
        lines = body.splitlines(keepends=True)
        indents = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
        if any(line.startswith("\t") for line in lines):
            return "".join("    " * (len(line) - len(line.lstrip("\t"))) + line.lstrip("\t")
                           for line in lines)
        if indents and min(indents) == 2:
            return "".join(" " * (len(line) - len(line.lstrip(" "))) + line for line in lines)
        return body

    @staticmethod
    def function(prompt: str, body: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        try:
            tree = ast.parse(prompt + body)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return None
        return next((node for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)), None)

    def checks_out(self, prompt: str, completion: str) -> bool:
        function = self.function(prompt, completion)
        stripped = completion.strip()
        if function is None or stripped in ("pass", "...") \
                or stripped.startswith("raise NotImplementedError"):
            return False
        arguments = function.args
        named = [a.arg for a in (*arguments.posonlyargs, *arguments.args,
                                 *arguments.kwonlyargs, arguments.vararg, arguments.kwarg)
                 if a is not None and a.arg not in ("self", "cls")]
        read = {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}
        return not named or bool(read & set(named))


def load_interpreter(path: Path) -> ModuleType | None:
    """The workspace's public DSL interpreter, or None where the task has none. It is
    compiled here and no bytecode is written beside it: the harness stays as shipped."""
    if not path.is_file():
        return None
    module = ModuleType("workspace_dsl")
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


def row_check(workspace: Path) -> RowCheck | None:
    """The check of the task whose harness ``workspace`` holds, recognised by the prompt
    template of its ``harness/harness.toml`` as a careful agent would recognise it (a copy of
    a pack under another id gets its check too); None for a harness no check knows (only
    generic filtering)."""
    settings = harness_settings(workspace / "harness" / "harness.toml")
    prompt = harness_prompt(settings)
    if prompt is None and harness_stops(settings) == Humaneval.STOP:
        return Humaneval()
    if prompt == Dsl.prompt:
        interpreter = load_interpreter(workspace / "harness" / "dsl.py")
        return Dsl(interpreter) if interpreter else None
    checks: tuple[type[Arith | Extract | Toolcalc | Bfcl | Shell], ...] = (
        Arith, Extract, Toolcalc, Bfcl, Shell)
    return next((check() for check in checks if check.prompt == prompt), None)


def harness_settings(settings: Path) -> dict:
    try:
        return tomllib.loads(settings.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def harness_prompt(settings: dict) -> str | None:
    """The harness's prompt template: its ``prompt``, or its chat ``request``."""
    prompt = settings.get("prompt", settings.get("request"))
    return prompt if isinstance(prompt, str) else None


def harness_stops(settings: dict) -> tuple[str, ...] | None:
    """The stop strings of a harness that sends its prompts as they are."""
    stops = settings.get("stop")
    return tuple(stops) if isinstance(stops, list) else None
