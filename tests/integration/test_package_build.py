"""The package as it is published: `python -m build` makes the sdist and, from it, the
wheel, without a packaging warning; `twine check` passes both; the wheel holds what the
code reads at run time besides its modules (the web page, the migrations, the offline
model's scripts, the price table, `py.typed`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from processes import REPO

DATA = ("api/web", "store/migrations", "offline_model/scripts", "domain/prices.toml", "py.typed")
"""What the wheel must hold besides the modules, as the repository has it."""


def source_copy(to: Path) -> Path:
    """The repository's files as a fresh clone has them (with what is not committed yet),
    copied: a build writes into its source folder, which other tests read."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    return to


def expected_data() -> set[str]:
    found: set[str] = set()
    for part in DATA:
        path = REPO / part
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        found |= {
            f"duragent/{file.relative_to(REPO)}"
            for file in files
            if "__pycache__" not in file.parts and file.suffix != ".pyc"
        }
    return found


def test_build_makes_a_quiet_sdist_and_a_wheel_with_the_page_and_py_typed(
    tmp_path: Path,
) -> None:
    source = source_copy(tmp_path / "source")
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, output[-4000:]
    for warning in ("is absent from the `packages` configuration", "Package would be ignored"):
        assert warning not in output, output[output.index(warning) - 200 :][:2000]
    assert "SetuptoolsDeprecationWarning" not in output

    (wheel,) = dist.glob("duragent-*.whl")
    (sdist,) = dist.glob("duragent-*.tar.gz")
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    expected = expected_data()
    assert {"duragent/py.typed", "duragent/api/web/index.html"} <= expected
    assert any(name.startswith("duragent/api/web/js/") for name in expected)
    assert not expected - in_wheel, sorted(expected - in_wheel)
    assert "duragent/__main__.py" in in_wheel
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        in_sdist = {name.removeprefix(top + "/") for name in archive.getnames()}
    assert {name.removeprefix("duragent/") for name in expected} <= in_sdist
