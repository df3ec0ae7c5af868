"""The page's catalogue (api/web/js/i18n.js): every text a script of the page says through
`t("...")` has its Chinese, so a Chinese reader never meets an English label the
catalogue forgot. (Texts chosen from a table, `t(LABELS[key])`, are the browser tests'
to check: tests/browser/test_page_third_pass_words.py walks them in Chinese.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duragent

WEB = Path(duragent.__file__).parent / "api" / "web" / "js"
KEY = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"\s*:', re.MULTILINE)
SAID = re.compile(r'\bt\(\s*"((?:[^"\\]|\\.)*)"')


def chinese_keys() -> set[str]:
    source = (WEB / "i18n.js").read_text(encoding="utf-8")
    table = source[source.index("const ZH = {") : source.index("\n};")]
    return {json.loads(f'"{key}"') for key in KEY.findall(table)}


def test_every_text_the_page_says_has_its_chinese() -> None:
    known = chinese_keys()
    untranslated = {
        f"{path.name}: {text}"
        for path in sorted(WEB.glob("*.js"))
        if path.name != "i18n.js"
        for text in map(lambda raw: json.loads(f'"{raw}"'), SAID.findall(path.read_text("utf-8")))
        if text not in known
    }
    assert not untranslated, sorted(untranslated)


def test_the_catalogue_is_read_as_the_page_reads_it() -> None:
    # A sample the page shows, so a change of the table's layout cannot make the test above
    # pass by finding no keys at all.
    known = chinese_keys()
    assert {"Send", "Waits for your approval", "{n}% cache hits"} <= known
    assert len(known) > 200
