"""The web page ships inside the package, asks no other host for anything, and never
turns strings into markup or code."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

import pytest

from duragent.api.web import WEB_DIR

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
ASSETS = sorted(p for p in WEB_DIR.rglob("*") if p.is_file())


def _matches(path: PurePosixPath, pattern: str) -> bool:
    """setuptools' package-data glob: `*` stays within one path segment."""
    wanted = PurePosixPath(pattern).parts
    return len(path.parts) == len(wanted) and all(map(fnmatchcase, path.parts, wanted))


def test_pip_install_ships_every_asset() -> None:
    """Every file of the page is package data of `api` or a folder below it (what `pip
    install` copies; tests/integration/test_package_build.py checks a built wheel)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = [
        "/".join([*package.split(".")[2:], pattern])  # duragent.api.web.js: web/js/<pattern>
        for package, globs in config["tool"]["setuptools"]["package-data"].items()
        if package.startswith("duragent.api")
        for pattern in globs
    ]
    missing = [
        str(p)
        for p in ASSETS
        if not any(
            _matches(PurePosixPath(p.relative_to(WEB_DIR.parent).as_posix()), g) for g in patterns
        )
    ]
    assert ASSETS and not missing


def test_no_asset_refers_to_another_host() -> None:
    for asset in ASSETS:
        text = asset.read_text()
        # The SVG namespace is a name, not a request.
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.\w+", text)) - {"http://www.w3.org"}
        assert not urls, (asset.name, urls)


def test_scripts_never_parse_strings_as_markup_or_code() -> None:
    forbidden = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
        r"setAttribute\(\s*[\"']on|setAttribute\(\s*[\"']style"
    )
    for script in WEB_DIR.glob("js/*.js"):
        assert not forbidden.findall(script.read_text()), script.name
    assert "<script" not in (WEB_DIR / "index.html").read_text().replace(
        '<script type="module" src="/web/js/app.js"></script>', ""
    )
