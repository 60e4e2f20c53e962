"""Runs every ```python block of the user documentation (README.md, README.zh.md,
docs/en/**/*.md and docs/zh/**/*.md) as its own test case, each in a fresh namespace.

Where a page shows what a block prints, the test compares: a ```text block that follows a
```python block (with nothing but blank lines between them) is that block's expected standard
output, compared exactly (trailing spaces and trailing blank lines aside).

A block whose first line is ``# doc-example: skip`` is collected but skipped
(for code that needs hardware this machine does not have). Test ids are
``<path relative to docs/>:<line of the opening fence>``.
"""
import contextlib
import io
import pathlib
import re

import pytest

import mx_sparse  # noqa: F401  (one-time import and op registration, outside the timed examples)

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
SKIP_MARK = "# doc-example: skip"
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


def fenced_blocks(path: pathlib.Path):
    """Yields (line of the opening fence, language, code, line after the closing fence)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1  # closing fence
        yield start, lang, "\n".join(body) + "\n", i


def python_blocks(path: pathlib.Path):
    """Yields (line number of the opening fence, code, expected output or None) of each
    ```python block; the expected output is a ```text block right after it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = list(fenced_blocks(path))
    for n, (start, lang, code, end) in enumerate(blocks):
        if lang != "python":
            continue
        expected = None
        if n + 1 < len(blocks):
            nxt_start, nxt_lang, nxt_code, _ = blocks[n + 1]
            if nxt_lang == "text" and all(not line.strip() for line in lines[end:nxt_start - 1]):
                expected = nxt_code
        yield start, code, expected


def normalised(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def collect():
    pages = [DOCS.parent / "README.md", DOCS.parent / "README.zh.md"]
    for lang in ("en", "zh"):
        pages += sorted((DOCS / lang).rglob("*.md"))
    cases = []
    for path in pages:
        for line, code, expected in python_blocks(path):
            cases.append(pytest.param(path, line, code, expected, id=f"{path.relative_to(DOCS.parent)}:{line}"))
    return cases


CASES = collect()


def test_docs_have_examples():
    assert CASES, f"no ```python blocks found under {DOCS}"


def test_docs_show_checked_output():
    """The convention is in use (a page shows a printed result the test compares)."""
    assert any(case.values[3] is not None for case in CASES)


@pytest.mark.parametrize("path,line,code,expected", CASES)
def test_doc_example(path, line, code, expected):
    if code.lstrip().startswith(SKIP_MARK):
        pytest.skip(f"{path.name}:{line} is marked '{SKIP_MARK}'")
    # Leading blank lines make traceback line numbers those of the .md file.
    compiled = compile("\n" * line + code, str(path), "exec")
    namespace = {"__name__": "__doc_example__"}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compiled, namespace)  # noqa: S102 - executing our own documentation examples
    if expected is not None:
        assert normalised(printed.getvalue()) == normalised(expected), (
            f"{path.name}:{line} prints\n{printed.getvalue()}\nbut the page shows\n{expected}")
