"""Malformed requests against the real grader: never a 500, never a ledger change."""

import json
import os
import shutil
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.grader.conftest import GraderProcess
from vtbench import layout
from vtbench.grader import Ledger

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
PATHS = st.sampled_from(["", ".", "..", "/", "/etc", "models", "models/../..", "models/none",
                         "../workspace/models/good", "models/good/config.json", "a" * 600,
                         "models/\x00", "models//good/../good/.."]) | st.text(max_size=30)
BODIES = (
    JSON
    | st.fixed_dictionaries({"model": PATHS}, optional={"harness": PATHS | st.none(),
                                                         "wait": st.booleans() | JSON})
)


def ledger_counts() -> tuple[int, ...]:
    conn = sqlite3.connect(layout.grader_db())
    return tuple(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                 for table in ("episodes", "budget_rows", "validations", "submissions"))


@pytest.mark.slow
def test_malformed_requests_never_fail_the_server_or_change_the_ledger(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace), timeout=30)
    operator = grader.operator_client()
    before = ledger_counts()

    @settings(max_examples=120, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(body=BODIES, raw=st.binary(max_size=40), pick=st.integers(0, 4),
           ident=st.text(max_size=12))
    def send(body: object, raw: bytes, pick: int, ident: str) -> None:
        if isinstance(body, dict) and body.get("model") in ("models/good", "models/good/"):
            return  # a valid request; not what this test is about
        content = json.dumps(body).encode() if pick != 4 else raw
        headers = {"Content-Type": "application/json"}
        answer = [
            lambda: agent.post("/v1/validations", content=content, headers=headers),
            lambda: agent.post("/v1/submission", content=content, headers=headers),
            lambda: operator.post("/v1/operator/episodes", content=content, headers=headers),
            lambda: agent.get(f"/v1/validations/{quote(ident, safe='')}"),
            lambda: agent.post("/v1/validations", content=content, headers=headers),
        ][pick]()
        assert answer.status_code < 500, (body, answer.text)
        assert ledger_counts() == before, body

    send()


def test_a_path_that_is_not_utf8_is_refused_in_one_line_and_never_ledgered(
    grader: GraderProcess, small_task: Path, workspace: Path
) -> None:
    not_utf8 = os.fsdecode(b"models/\xff\xfe")
    shutil.copytree(workspace / "models" / "good", workspace / not_utf8)
    grader.start()
    agent = grader.client(grader.create_episode(small_task, workspace), timeout=60)
    before = ledger_counts()
    body = json.dumps({"model": not_utf8}).encode()  # JSON's \udcff escapes, as a raw client
    headers = {"Content-Type": "application/json"}
    for route in ("/v1/validations", "/v1/submission"):
        answer = agent.post(route, content=body, headers=headers)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"].startswith("bad request: model: ")
    merge = json.dumps({"method": "linear", "models": ["models/good", not_utf8],
                        "weights": [0.5, 0.5], "out": "models/merged"}).encode()
    answer = agent.post("/v1/merges", content=merge, headers=headers)
    assert 400 <= answer.status_code < 500 and "refused" in answer.json()["error"], answer.text
    assert ledger_counts() == before


HOSTILE_NAMES = ["models/rt/[/]", "models/[bold]b[/bold] \x1b[31mred %s%d {} {0}\nforged line"]


def validate_hostile_names(grader: GraderProcess, token: str) -> list[httpx.Response]:
    """What the attacked episode's agent sends: a name that is not UTF-8, then names made
    to hurt whoever prints them."""
    with grader.client(token) as agent:
        body = json.dumps({"model": os.fsdecode(b"models/\xff\xfe")}).encode()
        answers = [agent.post("/v1/validations", content=body,
                              headers={"Content-Type": "application/json"})]
        answers += [agent.post("/v1/validations", json={"model": name})
                    for name in HOSTILE_NAMES]
    return answers


@pytest.mark.slow  # three validations of two episodes on one real grader
def test_hostile_names_in_one_episode_leave_another_sharing_the_grader_scored(
    grader: GraderProcess, small_task: Path, workspace: Path, tmp_path: Path
) -> None:
    honest = tmp_path / "honest-workspace"
    shutil.copytree(workspace, honest)
    for index, name in enumerate([os.fsdecode(b"models/\xff\xfe"), *HOSTILE_NAMES]):
        shutil.copytree(workspace / "models" / "good", workspace / name)
        (workspace / name / "notes.json").write_text(json.dumps({"variant": index}))
    grader.start()
    token = grader.create_episode(small_task, workspace, validations=5)
    scoring = grader.client(grader.create_episode(small_task, honest, validations=5))
    with ThreadPoolExecutor(2) as pool:
        attacked = pool.submit(validate_hostile_names, grader, token)
        scored = pool.submit(scoring.post, "/v1/validations", json={"model": "models/good"})
        (refused, *named), score = attacked.result(), scored.result().json()
    assert refused.status_code == 422 and "\n" not in refused.json()["error"], refused.text
    for answer, name in zip(named, HOSTILE_NAMES, strict=True):
        assert answer.status_code == 200 and answer.json()["state"] == "completed", answer.text
        assert Ledger().validation(answer.json()["id"]).inputs["candidate"] == name
    assert grader.client(token).get("/v1/status").json()["validations_left"] == 3
    assert (score["state"], score["settlement"]) == ("completed", "charged"), score
    status = scoring.get("/v1/status").json()
    assert status["validations_left"] == 4
    (validation,) = Ledger().validations(status["episode"])
    assert validation.id == score["id"]
