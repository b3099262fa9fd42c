"""``vtbench prepare --system``: which of the calibration's systems a run builds."""

import pytest

from vtbench.cli.prepare import calibration_systems
from vtbench.errors import VtbenchError
from vtbench.prepare.systems import CALIBRATION_SYSTEMS


def test_without_a_named_system_the_calibration_builds_all_of_its_systems() -> None:
    assert calibration_systems(None, True, CALIBRATION_SYSTEMS) == CALIBRATION_SYSTEMS
    assert "light" in CALIBRATION_SYSTEMS and "initial" not in CALIBRATION_SYSTEMS


def test_named_systems_are_the_only_ones_built() -> None:
    assert calibration_systems(["light", "data"], True, CALIBRATION_SYSTEMS) == ("light", "data")


def test_a_named_system_without_calibrate_is_refused() -> None:
    with pytest.raises(VtbenchError, match="add --calibrate"):
        calibration_systems(["light"], False, CALIBRATION_SYSTEMS)


def test_an_unknown_system_is_refused_with_the_known_ones() -> None:
    with pytest.raises(VtbenchError, match="ligth") as refused:
        calibration_systems(["ligth"], True, CALIBRATION_SYSTEMS)
    assert refused.value.hint is not None and "light" in refused.value.hint
