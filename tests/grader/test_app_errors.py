"""The one exception -> status table of the grader app, entry by entry."""

import pytest

from vtbench.errors import GraderError, VtbenchError
from vtbench.grader.app import ERROR_STATUS, status_for

DETAIL = "validation 7 belongs to episode ep-secret"


@pytest.mark.parametrize(("kind", "expected"), list(ERROR_STATUS.items()),
                         ids=[kind.__name__ for kind in ERROR_STATUS])
def test_each_error_maps_to_its_status_and_denials_hide_their_detail(
    kind: type[VtbenchError], expected: tuple[int, str | None]
) -> None:
    status, public = status_for(kind(DETAIL, hint="the fix"))
    assert status == expected[0]
    if expected[1] is None:
        assert public == f"{DETAIL} (the fix)"
    else:
        assert public == expected[1] and "ep-secret" not in public


def test_denials_are_vague() -> None:
    vague = {status for status, public in ERROR_STATUS.values() if public is not None}
    assert vague == {401, 404}


def test_an_unmapped_error_is_a_vague_500() -> None:
    class Surprise(GraderError):
        pass

    assert status_for(Surprise(DETAIL)) == (500, "internal error")
