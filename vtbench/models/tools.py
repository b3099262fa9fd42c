"""Tool calling on chat completions: tools and tool turns into the prompt, calls out of the
reply.

Rendering. A chat template that renders tools (its prompt with a tool differs from its
prompt without) gets them as HF templates take them: ``apply_chat_template(..., tools=...)``
with assistant ``tool_calls`` whose arguments are objects and ``tool`` messages as they
are. A template that ignores tools (SmolLM2-Instruct's, the tiny character tokenizer's)
gets them as text in the Hermes format that Qwen and Hermes models are trained on:

- the tools in a system message (appended to the first one, or a new one first)::

      You may call these functions:
      <tools>
      {"name": ..., "description": ..., "parameters": ...}
      </tools>
      To call one, answer <tool_call>
      {"name": <function-name>, "arguments": <arguments-object>}
      </tool_call>

- an assistant turn's calls as ``<tool_call>`` blocks after its text;
- a ``tool`` message as a user turn ``<tool_response>\\n...\\n</tool_response>`` (templates
  may know only system, user and assistant).

Reading. A reply is a call when it consists of ``<tool_call>`` blocks (the last one may
lack its closing tag) or is one bare JSON value, each block or value a JSON object or list
of objects ``{"name": <declared function>, "arguments": <object>}`` (``parameters`` is read
as ``arguments``); text outside the blocks stays ``content``. Anything else (broken JSON,
an undeclared function) leaves the whole reply as ``content``: no text is ever dropped.

``tool_choice`` ``none`` still shows the tools (as OpenAI and vLLM do) but never reads the
reply as calls. Forcing: ``required`` and a named function end the prompt with the opening of a call
(``<tool_call>\\n{"name": "`` and, named, the name and ``"arguments": ``), so the model
writes only the rest; the reply is read from that opening on. This is not constrained
decoding: a reply that still does not parse comes back as ``content``.
"""

import json
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from vtbench.models.wire import BadRequest, ChatMessage, ChatRequest

if TYPE_CHECKING:
    from vtbench.models.batching import Completion

CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "\n</tool_call>"
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_PROBE_TOOL = {"type": "function", "function": {
    "name": "probe", "description": "probe", "parameters": {"type": "object", "properties": {}}}}


@dataclass(frozen=True)
class ToolUse:
    """The tools a chat request offers and how the reply is to use them."""

    tools: list[dict[str, Any]]
    choice: Literal["auto", "none", "required", "function"]
    parallel: bool = True
    function: str | None = None
    """With ``choice`` ``function``: the function that must be called."""

    @property
    def reads_calls(self) -> bool:
        return self.choice != "none"

    @property
    def names(self) -> set[str]:
        if self.function is not None:
            return {self.function}
        return {tool["function"]["name"] for tool in self.tools}

    def opening(self) -> str:
        """What the prompt ends with, the reply's forced start."""
        if self.function is not None:
            return CALL_OPEN + '{"name": ' + json.dumps(self.function) + ', "arguments": '
        return CALL_OPEN + '{"name": "' if self.choice == "required" else ""


@dataclass(frozen=True)
class Reply:
    content: str | None
    tool_calls: list[dict[str, Any]]


def tool_use(body: ChatRequest) -> ToolUse | None:
    """The request's tool use; None when it offers no tools."""
    choice = body.tool_choice
    if not body.tools:
        if choice not in (None, "none"):
            raise BadRequest("tool_choice needs tools", "tool_choice")
        return None
    tools = [tool.model_dump(exclude_none=True) for tool in body.tools]
    if choice is None or isinstance(choice, str):
        return ToolUse(tools, choice or "auto", body.parallel_tool_calls)
    name = choice.function.name
    if name not in {tool.function.name for tool in body.tools}:
        raise BadRequest(f"tool_choice names {name!r}, which is not among the tools",
                         "tool_choice")
    return ToolUse(tools, "function", body.parallel_tool_calls, name)


def template_renders_tools(tokenizer: Any) -> bool:
    """Whether the chat template shows tools (a probe tool changes its prompt)."""
    probe = [{"role": "user", "content": "x"}]
    try:
        with_tool = tokenizer.apply_chat_template(probe, tools=[_PROBE_TOOL], tokenize=False,
                                                  add_generation_prompt=True)
        without = tokenizer.apply_chat_template(probe, tokenize=False,
                                                add_generation_prompt=True)
    except Exception:  # a template may raise anything: then it cannot take tools either
        return False
    return bool(with_tool != without)


def chat_text(tokenizer: Any, messages: list[ChatMessage], use: ToolUse | None,
              native: bool) -> str:
    """The prompt: ``messages`` (and the tools of ``use``) through the chat template, natively
    or as text (see the module docstring), then the opening a forced call starts with."""
    rendered = template_messages(messages, native)
    extra: dict[str, Any] = {}
    if use is not None and native:
        extra["tools"] = use.tools
    elif use is not None:
        rendered = with_tools_prompt(rendered, use.tools)
    try:
        text = tokenizer.apply_chat_template(rendered, tokenize=False,
                                             add_generation_prompt=True, **extra)
    except Exception as err:  # a template may raise anything (jinja, missing template)
        raise BadRequest(f"cannot apply the chat template: {err}", "messages") from err
    return str(text) + (use.opening() if use is not None else "")


def has_tool_turns(messages: list[ChatMessage]) -> bool:
    return any(m.tool_calls or m.role == "tool" for m in messages)


def template_messages(messages: list[ChatMessage], native: bool) -> list[dict[str, Any]]:
    """The messages as the chat template gets them (see the module docstring)."""
    if native:
        return [_native(m) for m in messages]
    return [_as_text(m) for m in messages]


def _native(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.text()}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name,
                          "arguments": _arguments_object(call.function.arguments)}}
            for call in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def _arguments_object(arguments: str) -> Any:
    """HF templates write arguments as objects (``| tojson``); a string that is no JSON
    object is passed on as it is."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return value if isinstance(value, dict) else arguments


def _as_text(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "user", "content": f"<tool_response>\n{message.text()}\n</tool_response>"}
    parts = [message.text()] if message.text() else []
    parts += [call_text(call.function.name, _arguments_object(call.function.arguments))
              for call in message.tool_calls or ()]
    return {"role": message.role, "content": "\n".join(parts)}


def call_text(name: str, arguments: Any) -> str:
    """One call as the fallback rendering writes it and the reader reads it."""
    return f"{CALL_OPEN}{json.dumps({'name': name, 'arguments': arguments})}{CALL_CLOSE}"


def tools_prompt(tools: list[dict[str, Any]]) -> str:
    """The system text that offers ``tools`` to a template without tools support."""
    signatures = "\n".join(json.dumps(tool["function"], ensure_ascii=False) for tool in tools)
    return (f"You may call these functions:\n<tools>\n{signatures}\n</tools>\n"
            f'To call one, answer {CALL_OPEN}{{"name": <function-name>, '
            f'"arguments": <arguments-object>}}{CALL_CLOSE}')


def with_tools_prompt(messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    offer = tools_prompt(tools)
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        joined = f"{first['content']}\n\n{offer}" if first["content"] else offer
        return [{**first, "content": joined}, *messages[1:]]
    return [{"role": "system", "content": offer}, *messages]


def assistant_message(completion: "Completion",
                      use: ToolUse | None) -> tuple[dict[str, Any], str]:
    """The reply message of ``completion`` and its finish reason (``tool_calls`` when the
    reply is read as calls)."""
    if use is None or not use.reads_calls:
        return {"role": "assistant", "content": completion.text}, completion.finish_reason
    reply = read_reply(use.opening() + completion.text, use)
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if not reply.tool_calls:
        return message, completion.finish_reason
    return {**message, "tool_calls": reply.tool_calls}, "tool_calls"


def read_reply(text: str, use: ToolUse) -> Reply:
    """The reply's calls and remaining content; no calls: all of ``text`` is content."""
    found = _calls_in(text, use.names)
    if found is None:
        return Reply(text, [])
    content, calls = found
    return Reply(content or None, calls if use.parallel else calls[:1])


def _calls_in(text: str, names: set[str]) -> tuple[str, list[dict[str, Any]]] | None:
    if "<tool_call>" not in text:
        bare = _call_objects(text, names)
        return ("", bare) if bare else None
    calls: list[dict[str, Any]] = []
    for block in _BLOCK.finditer(text):
        objects = _call_objects(block.group(1), names)
        if not objects:
            return None
        calls += objects
    return _BLOCK.sub("", text).strip(), calls


def _call_objects(raw: str, names: set[str]) -> list[dict[str, Any]] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, dict) or item.get("name") not in names:
            return None
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            arguments = _arguments_object(arguments)
        if not isinstance(arguments, dict):
            return None
        calls.append({"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                      "function": {"name": item["name"],
                                   "arguments": json.dumps(arguments, ensure_ascii=False)}})
    return calls or None
