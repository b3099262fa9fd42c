"""Reading tool calls out of a reply and writing tools into a prompt, without a server."""

import json

import pytest

from vtbench.models.tokenizer import build_char_tokenizer
from vtbench.models.tools import ToolUse, chat_text, read_reply, template_renders_tools
from vtbench.models.wire import ChatMessage

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {}}},
         {"type": "function", "function": {"name": "mul", "parameters": {}}}]
AUTO = ToolUse(TOOLS, "auto")


def calls(text: str, use: ToolUse = AUTO) -> list[tuple[str, dict[str, object]]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in read_reply(text, use).tool_calls]


def test_tool_call_blocks_are_read_in_order_and_the_rest_stays_content() -> None:
    text = ('Let me compute.\n<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'
            '\n<tool_call>{"name": "mul", "arguments": "{\\"b\\": 2}"}</tool_call>')
    reply = read_reply(text, AUTO)
    assert calls(text) == [("add", {"a": 1}), ("mul", {"b": 2})]
    assert reply.content == "Let me compute."
    assert len({c["id"] for c in reply.tool_calls}) == 2


@pytest.mark.parametrize("text", [
    '<tool_call>[{"name": "add", "arguments": {"a": 1}}, {"name": "mul", "parameters": {}}]',
    '[{"name": "add", "arguments": {"a": 1}}, {"name": "mul", "arguments": {}}]',
])
def test_a_list_a_bare_json_reply_and_a_missing_closing_tag_are_calls(text: str) -> None:
    assert [name for name, _ in calls(text)] == ["add", "mul"]
    assert read_reply(text, AUTO).content is None


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "add", "arguments": {"a": 1}</tool_call>',  # broken JSON
    '<tool_call>{"name": "rm", "arguments": {}}</tool_call>',  # not a declared tool
    '<tool_call>{"name": "add", "arguments": [1]}</tool_call>',  # arguments not an object
    '<tool_call>[]</tool_call>',
    '{"answer": 42}',
    "The answer is 42.",
])
def test_a_reply_that_is_no_valid_call_stays_content_whole(text: str) -> None:
    reply = read_reply(text, AUTO)
    assert reply.tool_calls == [] and reply.content == text


def test_a_named_choice_reads_only_that_function_and_parallel_false_keeps_the_first() -> None:
    both = '[{"name": "add", "arguments": {}}, {"name": "mul", "arguments": {}}]'
    assert calls(both, ToolUse(TOOLS, "function", function="add")) == []
    assert calls(both, ToolUse(TOOLS, "required", parallel=False)) == [("add", {})]


def test_forcing_opens_the_call_in_the_prompt_and_the_reply_is_read_from_there() -> None:
    tokenizer = build_char_tokenizer()
    messages = [ChatMessage(role="user", content="1+2?")]
    mul = ToolUse(TOOLS, "function", function="mul")
    named = chat_text(tokenizer, messages, mul, native=False)
    required = chat_text(tokenizer, messages, ToolUse(TOOLS, "required"), native=False)
    assert named.endswith('assistant:<tool_call>\n{"name": "mul", "arguments": ')
    assert required.endswith('assistant:<tool_call>\n{"name": "')
    assert calls(mul.opening() + '{"b": 2}}', mul) == [("mul", {"b": 2})]


def test_a_system_message_gets_the_tools_after_its_own_text() -> None:
    messages = [ChatMessage(role="system", content="Be brief."),
                ChatMessage(role="user", content="hi")]
    text = chat_text(build_char_tokenizer(), messages, AUTO, native=False)
    assert text.startswith("system: Be brief.\n\nYou may call these functions:\n<tools>\n"
                           '{"name": "add", "parameters": {}}\n{"name": "mul", "parameters": {}}'
                           "\n</tools>\n")
    assert text.count("system:") == 1


def test_the_char_and_smollm2_style_templates_do_not_render_tools() -> None:
    tokenizer = build_char_tokenizer()
    assert not template_renders_tools(tokenizer)
    tokenizer.chat_template = (  # SmolLM2-Instruct's template, as its GGUF ships it
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
        "Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
        "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\n' }}{% endif %}")
    assert not template_renders_tools(tokenizer)
    tokenizer.chat_template = ("{{ tools | tojson }}"
                               "{% for m in messages %}{{ m.content }}{% endfor %}")
    assert template_renders_tools(tokenizer)
