"""The Chinese documentation carries the same content as the English one: for every page of
docs/en (and README.md) the page at the same place in docs/zh (README.zh.md) exists and has the
same number of headings at each level and the same code blocks, in the same order, equal once
comments are removed (commands and examples are copied, only their comments are translated).
Pages without a counterpart are reported by name."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^\s*```(\S*)\s*$")
COMMENT = {  # line comments per code-block language (text / json blocks have none)
    "python": "#", "bash": "#", "sh": "#", "shell": "#", "console": "#", "yaml": "#", "ini": "#", "toml": "#",
    "cpp": "//", "c": "//", "c++": "//", "cmake": "#",
    "": "#",   # signature listings: Python-like, annotated with # comments
}


def parse(path: pathlib.Path):
    """(headings per level, [(language, code without comments)]) of a markdown page."""
    headings, blocks = {}, []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            lang, body = m.group(1).lower(), []
            i += 1
            while i < len(lines) and not FENCE.match(lines[i]):
                body.append(lines[i])
                i += 1
            blocks.append((lang, strip_comments(lang, body)))
        else:
            h = re.match(r"^(#{1,6})\s", lines[i])
            if h:
                headings[len(h.group(1))] = headings.get(len(h.group(1)), 0) + 1
        i += 1
    return headings, blocks


def strip_comments(lang: str, body):
    mark = COMMENT.get(lang)
    out = []
    for line in body:
        if mark:
            # a comment starts a line or follows code after whitespace; a mark inside a string
            # (e.g. "a#b") has no space before it and stays
            line = re.sub(r"(^|\s)" + re.escape(mark) + r"(?!!).*$", "", line)
        line = line.rstrip()
        if line.strip():
            out.append(line)
    return "\n".join(out)


def pairs():
    found = [(ROOT / "README.md", ROOT / "README.zh.md")]
    for en in sorted((DOCS / "en").rglob("*.md")):
        found.append((en, DOCS / "zh" / en.relative_to(DOCS / "en")))
    return found


def test_every_zh_page_has_an_en_page():
    orphans = [str(p.relative_to(DOCS)) for p in (DOCS / "zh").rglob("*.md")
               if not (DOCS / "en" / p.relative_to(DOCS / "zh")).exists()]
    assert not orphans, f"Chinese pages without an English one: {orphans}"


@pytest.mark.parametrize("en,zh", pairs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_zh_page_matches_en_structure(en, zh):
    assert zh.exists(), f"{en.relative_to(ROOT)} has no Chinese counterpart {zh.relative_to(ROOT)}"
    h_en, b_en = parse(en)
    h_zh, b_zh = parse(zh)
    assert h_en == h_zh, f"headings per level differ: {en.name} {h_en} vs {zh.name} {h_zh}"
    assert [lang for lang, _ in b_en] == [lang for lang, _ in b_zh], \
        f"code blocks differ in number or language: {[l for l, _ in b_en]} vs {[l for l, _ in b_zh]}"
    for n, ((lang, a), (_, b)) in enumerate(zip(b_en, b_zh)):
        assert a == b, f"code block {n + 1} ({lang}) differs beyond comments:\n--- en\n{a}\n--- zh\n{b}"
