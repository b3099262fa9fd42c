"""``scripts/setup`` names every system tool it needs before it installs anything."""

import subprocess
from pathlib import Path

from vtbench import layout


def test_setup_without_git_says_so_and_stops(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with none of the tools, as on a bare machine
    bin_dir.mkdir()
    (bin_dir / "dirname").symlink_to("/usr/bin/dirname")
    fake_id = bin_dir / "id"  # an unprivileged user: setup asks instead of installing
    fake_id.write_text("#!/bin/sh\necho 1000\n")
    fake_id.chmod(0o755)

    done = subprocess.run(["/bin/bash", str(layout.REPO_ROOT / "scripts" / "setup")],
                          env={"PATH": str(bin_dir)}, capture_output=True, text=True,
                          timeout=60)

    assert done.returncode == 1
    assert "please install" in done.stderr and " git" in done.stderr.split("(")[0]
