"""Runs every ```python block of the user documentation (README.md, docs/en/**/*.md
and docs/zh/**/*.md) as its own test case, each in a fresh namespace.

A block whose first line is ``# doc-example: skip`` is collected but skipped
(for code that needs hardware this machine does not have). Test ids are
``<path relative to docs/>:<line of the opening fence>``.
"""
import pathlib
import re

import pytest

import mx_sparse  # noqa: F401  (one-time import and op registration, outside the timed examples)

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
SKIP_MARK = "# doc-example: skip"
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


def python_blocks(path: pathlib.Path):
    """Yields (line number of the opening fence, code) of each ```python block."""
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
        if lang == "python":
            yield start, "\n".join(body) + "\n"


def collect():
    pages = [DOCS.parent / "README.md"]
    for lang in ("en", "zh"):
        pages += sorted((DOCS / lang).rglob("*.md"))
    cases = []
    for path in pages:
        for line, code in python_blocks(path):
            cases.append(pytest.param(path, line, code, id=f"{path.relative_to(DOCS.parent)}:{line}"))
    return cases


CASES = collect()


def test_docs_have_examples():
    assert CASES, f"no ```python blocks found under {DOCS}"


@pytest.mark.parametrize("path,line,code", CASES)
def test_doc_example(path, line, code):
    if code.lstrip().startswith(SKIP_MARK):
        pytest.skip(f"{path.name}:{line} is marked '{SKIP_MARK}'")
    # Leading blank lines make traceback line numbers those of the .md file.
    compiled = compile("\n" * line + code, str(path), "exec")
    namespace = {"__name__": "__doc_example__"}
    exec(compiled, namespace)  # noqa: S102 - executing our own documentation examples
