"""The model server through the official ``openai`` client, as a harness author calls it:
streaming, tool calls, tool turns in the history, model names.

The model is a small real Llama trained (in the fixture, ~10 s) to answer a few prompts
with known text, one of them with a tool call in the format the server documents.
"""

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.models.conftest import train_to_say
from vtbench.models.serving import ModelServer, serve_model
from vtbench.models.tokenizer import build_char_tokenizer
from vtbench.models.tools import ToolUse, chat_text
from vtbench.models.wire import ChatMessage

STORY = " upon a time, a fox said: 'stop here', then ran.\n\nThe end."
GREETING = " Hi there! How can I help you today?"
WEATHER: Any = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
ASK: Any = [{"role": "user", "content": "Weather in Paris?"}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def tool_prompt() -> str:
    """The prompt the server writes for ``ASK`` with ``WEATHER`` offered (tool_choice auto)."""
    use = ToolUse([WEATHER], "auto")
    messages = [ChatMessage.model_validate(m) for m in ASK]
    return chat_text(build_char_tokenizer(), messages, use, native=False)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pairs = [("Once", STORY), ("user: Hello\nassistant:", GREETING), (tool_prompt(), CALL)]
    return train_to_say(pairs, tmp_path_factory.mktemp("talking") / "talker")


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ModelServer]:
    # A patient window, so that requests sent together share a batch.
    with serve_model(model_dir, port=0,
                     extra_args=["--window-ms", "1500", "--gap-ms", "300"]) as running:
        yield running


def openai_client(server: ModelServer) -> openai.OpenAI:
    """The official client at the server's base URL (TCP on 127.0.0.1), as a harness has it."""
    return openai.OpenAI(base_url=server.base_url, api_key="unused", timeout=120,
                         max_retries=0)


@pytest.fixture(scope="module")
def client(server: ModelServer) -> openai.OpenAI:
    return openai_client(server)


def test_the_model_says_what_it_was_trained_to(client: openai.OpenAI) -> None:
    answer = client.completions.create(model="talker", prompt="Once", max_tokens=80,
                                       temperature=0)
    assert answer.choices[0].text == STORY
    assert answer.choices[0].finish_reason == "stop"


def test_streamed_completions_add_up_to_the_unstreamed_text(client: openai.OpenAI) -> None:
    for stop in (None, ["here"], ["\n\n"]):
        plain = client.completions.create(model="talker", prompt="Once", max_tokens=80,
                                          temperature=0, stop=stop)
        chunks = list(client.completions.create(model="talker", prompt="Once", max_tokens=80,
                                                temperature=0, stop=stop, stream=True))
        assert all(c.object == "text_completion" for c in chunks)
        assert "".join(c.choices[0].text for c in chunks) == plain.choices[0].text
        assert len(chunks) > 10  # token by token, not one lump
        assert [c.choices[0].finish_reason for c in chunks][-2:] == [None, "stop"]


def test_streamed_chat_adds_up_to_the_unstreamed_message_and_reports_usage(
        client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": "Hello"}]
    plain = client.chat.completions.create(model="talker", messages=messages, temperature=0)
    assert plain.choices[0].message.content == GREETING
    chunks = list(client.chat.completions.create(
        model="talker", messages=messages, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == GREETING
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage == plain.usage
    assert all(c.usage is None for c in chunks[:-1])


def test_a_streamed_list_of_prompts_streams_every_choice_in_one_batch(
        server: ModelServer, client: openai.OpenAI) -> None:
    prompts = ["Once", "abc"]
    plain = client.completions.create(model="talker", prompt=prompts, n=2, max_tokens=20,
                                      temperature=0)
    before = server.stats()
    chunks = list(client.completions.create(model="talker", prompt=prompts, n=2,
                                            max_tokens=20, temperature=0, stream=True))
    assert server.stats()["generate_calls"] == before["generate_calls"] + 1
    streamed = {i: "".join(c.choices[0].text for c in chunks if c.choices[0].index == i)
                for i in range(4)}
    assert streamed == {c.index: c.text for c in plain.choices}


def test_streamed_and_plain_requests_share_a_batch(server: ModelServer,
                                                   client: openai.OpenAI) -> None:
    def streamed() -> str:
        chunks = openai_client(server).completions.create(
            model="talker", prompt="Once", max_tokens=30, temperature=0, stream=True)
        return "".join(c.choices[0].text for c in chunks)

    def plain() -> str:
        return openai_client(server).completions.create(
            model="talker", prompt="Once", max_tokens=30, temperature=0).choices[0].text

    before = server.stats()
    with ThreadPoolExecutor(2) as pool:
        texts = [f.result() for f in [pool.submit(streamed), pool.submit(plain)]]
    after = server.stats()
    assert texts[0] == texts[1] == STORY[:30]
    assert after["requests"] - before["requests"] == 2
    assert after["generate_calls"] - before["generate_calls"] == 1


def test_a_streamed_chat_with_logprobs_sends_them_with_the_text(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model="talker", messages=[{"role": "user", "content": "Hello"}], temperature=0,
        logprobs=True, top_logprobs=2, stream=True))
    with_text = [c for c in chunks if c.choices[0].delta.content]
    assert "".join(c.choices[0].delta.content or "" for c in with_text) == GREETING
    logprobs = []
    for chunk in with_text:
        assert chunk.choices[0].logprobs is not None
        logprobs += chunk.choices[0].logprobs.content or []
    assert "".join(t.token for t in logprobs) == GREETING
    assert all(len(t.top_logprobs) == 2 for t in logprobs)


def test_a_reply_that_is_a_tool_call_comes_back_as_tool_calls(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(model="talker", messages=ASK,
                                            tools=[WEATHER], temperature=0)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_a_required_or_named_tool_choice_starts_the_reply_with_the_call(
        client: openai.OpenAI) -> None:
    choices: list[Any] = ["required", {"type": "function", "function": {"name": "get_weather"}}]
    for choice in choices:
        answer = client.chat.completions.create(
            model="talker", messages=ASK, tools=[WEATHER],
            tool_choice=choice, temperature=0)
        [call] = answer.choices[0].message.tool_calls or []
        assert call.type == "function"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        client.chat.completions.create(
            model="talker", messages=ASK, tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "launch"}})


def test_a_streamed_tool_call_arrives_as_a_tool_call_delta(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model="talker", messages=ASK, tools=[WEATHER],
        temperature=0, stream=True))
    [call] = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert call.function is not None and call.function.arguments is not None
    assert (call.index, call.type, call.function.name) == (0, "function", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert not any(c.choices[0].delta.content for c in chunks)


def test_with_tool_choice_none_or_a_reply_that_is_no_call_the_text_stays_content(
        client: openai.OpenAI) -> None:
    kept = client.chat.completions.create(model="talker", messages=ASK,
                                          tools=[WEATHER], tool_choice="none",
                                          temperature=0).choices[0]
    assert kept.message.content == CALL and kept.message.tool_calls is None
    assert kept.finish_reason == "stop"
    # Cut at the city, the call is no longer JSON: all of it is content.
    cut = client.chat.completions.create(model="talker", messages=ASK,
                                         tools=[WEATHER], stop=["Paris"],
                                         temperature=0).choices[0]
    assert cut.message.content == CALL[:CALL.index("Paris")]
    assert cut.message.tool_calls is None
    assert cut.finish_reason == "stop"


def test_tool_turns_in_the_history_are_accepted_and_rendered_as_documented(
        client: openai.OpenAI) -> None:
    first = client.chat.completions.create(model="talker", messages=ASK,
                                           tools=[WEATHER], temperature=0)
    call = (first.choices[0].message.tool_calls or [])[0]
    history: Any = [*ASK, first.choices[0].message,  # the client's own message object
                    {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    answer = client.chat.completions.create(model="talker", messages=history, tools=[WEATHER],
                                            max_tokens=5, temperature=0)
    signature = json.dumps(WEATHER["function"])
    rendered = (
        "system: You may call these functions:\n<tools>\n" + signature + "\n</tools>\n"
        'To call one, answer <tool_call>\n{"name": <function-name>, "arguments": '
        "<arguments-object>}\n</tool_call>\n"
        "user: Weather in Paris?\n"
        f"assistant: {CALL}\n"
        "user: <tool_response>\nsunny, 21 C\n</tool_response>\n"
        "assistant:")
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == len(build_char_tokenizer()(rendered).input_ids)


def test_an_unknown_model_is_a_404_on_both_routes(client: openai.OpenAI) -> None:
    for stream in (False, True):
        with pytest.raises(openai.NotFoundError) as caught:
            client.completions.create(model="gpt-4o", prompt="x", max_tokens=2, stream=stream)
        assert caught.value.code == "model_not_found"
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="gpt-4o", stream=stream,
                                           messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_the_models_list_holds_the_one_served_id_and_candidate_is_accepted(
        client: openai.OpenAI, server: ModelServer) -> None:
    assert [m.id for m in client.models.list()] == ["talker"]
    assert client.models.retrieve("talker").id == "talker"
    answer = client.completions.create(model="candidate", prompt="Once", max_tokens=3,
                                       temperature=0)
    assert answer.choices[0].text == STORY[:3]
    with server.client() as http:  # a raw request without a model gets the served one
        raw = http.post("/v1/completions", json={"prompt": "Once", "max_tokens": 3})
    assert raw.status_code == 200 and raw.json()["model"] == "talker"


def test_a_template_that_renders_tools_gets_them_and_the_tool_turns_natively(
        model_dir: Path, tmp_path: Path) -> None:
    native = tmp_path / "native"
    native.mkdir()
    for path in model_dir.iterdir():
        (native / path.name).write_bytes(path.read_bytes())
    template = (
        "{% if tools %}tools: {{ tools | tojson }}{{ '\\n' }}{% endif %}"
        "{% for m in messages %}{{ m.role }}: {{ m.content }}"
        "{% for c in m.tool_calls or [] %}[{{ c.function.name }} {{ c.function.arguments "
        "| tojson }}]{% endfor %}{% if m.tool_call_id %} ({{ m.tool_call_id }}){% endif %}"
        "{{ '\\n' }}"
        "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")
    config_path = native / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = template
    config_path.write_text(json.dumps(config))
    (native / "chat_template.jinja").unlink(missing_ok=True)
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    with serve_model(native, port=0) as running:
        answer = openai_client(running).chat.completions.create(
            model="native", messages=history, tools=[WEATHER],
            max_tokens=2, temperature=0)
    expected = build_char_tokenizer().apply_chat_template(
        [*ASK, {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
         {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
        tools=[WEATHER], chat_template=template, tokenize=False, add_generation_prompt=True)
    assert 'assistant: [get_weather {"city": "Paris"}]\ntool: sunny (call_1)' in expected
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == len(build_char_tokenizer()(expected).input_ids)
