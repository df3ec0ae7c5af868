"""The README and the docs as a reader meets them: a README short enough to be a front
door, and no relative link, in it or in docs/, that leads to a missing file.

The docs site's own build (`make docs`, strict) checks its pages' links and anchors too;
this test also covers the README, which the site does not build, and runs with the tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250

# [text](target) and ![alt](target), the target up to a space (a title may follow) or `)`;
# and reference definitions, `[name]: target`.
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+).*?\1")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans blanked: a link
    written inside code is an example, not a link."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif fence is not None and stripped.startswith(fence):
            fence = None
        elif fence is None:
            lines.append(CODE_SPAN.sub("", line))
    return lines


def relative_links(text: str) -> list[str]:
    """The targets of the links in `text` that name a file of the repository (no scheme,
    no bare anchor), without their `#anchor` or `?query`."""
    targets: list[str] = []
    for line in prose_lines(text):
        found = INLINE_LINK.findall(line)
        reference = REFERENCE_LINK.match(line)
        if reference:
            found.append(reference.group(1))
        for target in found:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
                continue  # https:, mailto:, ... or an anchor on the same page
            path = re.split(r"[#?]", target, maxsplit=1)[0]
            if path:
                targets.append(path)
    return targets


def broken_links(page: Path) -> list[str]:
    """`page: target` for each relative link of `page` whose file does not exist."""
    return [
        f"{page.relative_to(ROOT)}: {target}"
        for target in relative_links(page.read_text(encoding="utf-8"))
        if not (page.parent / target).exists()
    ]


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, more than {README_MAX_LINES}: move the detail "
        "to a page of docs/ and link it"
    )


def test_relative_links_lead_to_files_that_exist() -> None:
    assert len(pages()) > 1, "no pages in docs/"
    broken = [link for page in pages() for link in broken_links(page)]
    assert broken == [], "links to missing files:\n" + "\n".join(broken)


def test_a_missing_target_is_found() -> None:
    """The check itself: a link to a missing file is reported, one in code is not."""
    page = ROOT / "docs" / "x.md"
    text = (
        "[ok](concepts.md#steering-a-running-session) [gone](nowhere.md) "
        "[web](https://example.com/a.md) [here](#top) `[code](not-a-link.md)`\n"
        "```md\n[example](also-not-a-link.md)\n```\n"
        "[ref]: ../LICENSE\n"
    )
    missing = [t for t in relative_links(text) if not (page.parent / t).exists()]
    assert relative_links(text) == ["concepts.md", "nowhere.md", "../LICENSE"]
    assert missing == ["nowhere.md"]
