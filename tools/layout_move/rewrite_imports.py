"""Rewrites imports and paths that name a module moved by issue 34's grouping of the package's top
level (MOVED below: old dotted name -> new one) to the new names. For merging code written against
the old layout: the old names keep importing (mx_sparse/_core/old_paths.py), but the tree names each
module by where it is. Run from the repository root on the files to fix (default: every tracked
.py/.md/.sh/.cpp/.h file except CHANGELOG.md, whose old entries name the files as they were, and
KEEPS_OLD_NAMES, which name the old modules on purpose):

    python tools/layout_move/rewrite_imports.py [FILE ...]

What it rewrites:
- relative imports inside mx_sparse/ (``from ..conv import X``, ``from . import _contract``),
  resolved against the importing file's package and written relative to it again; in a file that
  itself moved, an import that does not resolve from its new place is resolved from its old one
  (mx_sparse), so the script can run on moved files edited on another branch, and again;
- dotted names ``mx_sparse.<old>`` (but the public ``mx_sparse.voxelize`` and ``mx_sparse.cpu_memory``)
  and file paths ``mx_sparse/<old>.py`` anywhere;
- ``from mx_sparse import <old>[, ...]`` (one moved name per statement, else the line is reported).
The documented aliases ``mx_sparse.ops`` and ``mx_sparse.spconv`` are rewritten only in relative
imports inside the package (elsewhere they are the names users are told to write).
"""
import ast
import os
import re
import subprocess
import sys

GROUPS = {
    "nn": ["sparse_tensor", "conv", "modules", "batch_norm_relu", "given_outputs", "conv_padding",
           "weight_init", "layouts", "indice_data", "packed_map", "saved_tensors", "serialization",
           "validation", "compile_support"],
    "functional": ["importance", "voxelize"],
    "runtime": ["config", "environment", "device", "version", "cpu_memory", "ascend_build_info", "ascend"],
}
MOVED = {f"mx_sparse.{m}": f"mx_sparse.{g}.{m}" for g, ms in GROUPS.items() for m in ms}
MOVED["mx_sparse._op_registration"] = "mx_sparse._core.op_registration"
MOVED["mx_sparse._contract"] = "mx_sparse._core.contract"
ALIASES = {"mx_sparse.ops": "mx_sparse.compat.mmcv", "mx_sparse.spconv": "mx_sparse.compat.mx_driving.spconv"}
# names of the package's public attributes that equal an old module name: mx_sparse.voxelize is the
# function, mx_sparse.cpu_memory the module (both from mx_sparse/__init__.py); written as they are
PUBLIC_NAMES = ("mx_sparse.voxelize", "mx_sparse.cpu_memory")
# files that name old modules on purpose (the alias table, its tests, the docs' list of old names):
# never rewritten by default
KEEPS_OLD_NAMES = ("mx_sparse/_core/old_paths.py", "tests/compat/test_import_paths.py", "tests/test_package_layout.py",
                   "docs/en/architecture.md", "docs/zh/architecture.md")
# files that moved, by their new module name -> old module name (to resolve their relative imports)
OLD_NAME_OF = {new: old for old, new in MOVED.items()}
OLD_NAME_OF["mx_sparse.functional"] = "mx_sparse.functional"


def new_name(name, inside_package):
    table = dict(MOVED, **ALIASES) if inside_package else MOVED
    for old in sorted(table, key=len, reverse=True):
        if name == old or name.startswith(old + "."):
            return table[old] + name[len(old):]
    return name


def module_of(path):
    parts = os.path.splitext(path)[0].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path, module):
    return module if path.endswith("__init__.py") else module.rpartition(".")[0]


def relative(from_package, target):
    """``target`` written relative to ``from_package`` (both dotted), e.g. mx_sparse.nn, mx_sparse._core.x
    -> ``.._core.x``."""
    a, b = from_package.split("."), target.split(".")
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    return "." * (len(a) - common + 1) + ".".join(b[common:])


def exists(name):
    """Whether ``name`` is a module or package of the tree as it is now (the compiled _C included)."""
    path = os.path.join(*name.split("."))
    return name == "mx_sparse._C" or os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def written_for_new_place(node, package):
    """Whether a relative import of a moved file already names modules from the file's new place
    (so the script can run again, and on moved files that others edited after the move)."""
    base = package.split(".")
    source = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
    if node.module:
        return exists(source)
    return all(exists(f"{source}.{a.name}") for a in node.names)


def rewrite_relative_imports(path, text):
    module = module_of(path)
    new_package = package_of(path, module)
    moved_here = module in OLD_NAME_OF   # was a module of the top level (functional.py included)
    lines = text.split("\n")
    problems = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        old_package = "mx_sparse" if moved_here and not written_for_new_place(node, new_package) else new_package
        base = old_package.split(".")
        base = base[:len(base) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else []))
        line = lines[node.lineno - 1]
        old_from = "from " + "." * node.level + (node.module or "") + " import "
        if old_from not in line:
            problems.append(f"{path}:{node.lineno}: not rewritten (import not on one line): {line.strip()}")
            continue
        table = dict(MOVED, **ALIASES)
        moved_names = [a for a in node.names if f"{source}.{a.name}" in table]
        if moved_names:
            if len(node.names) != 1:
                problems.append(f"{path}:{node.lineno}: several names, some moved: {line.strip()}")
                continue
            alias = moved_names[0]
            target = new_name(f"{source}.{alias.name}", True)
            parent, _, last = target.rpartition(".")
            local = alias.asname or alias.name
            rest = line.split(old_from, 1)[1]
            rest = re.sub(r"^%s(\s+as\s+\w+)?" % re.escape(alias.name),
                          last + ("" if local == last else f" as {local}"), rest)
            lines[node.lineno - 1] = line.split(old_from, 1)[0] + f"from {relative(new_package, parent)} import " + rest
        else:
            target = new_name(source, True)
            if target != source or old_package != new_package:
                lines[node.lineno - 1] = line.replace(old_from, f"from {relative(new_package, target)} import ", 1)
    return "\n".join(lines), problems


def rewrite_absolute(path, text):
    inside = False   # the aliases mx_sparse.ops / .spconv stay as written in text (they are documented names)
    problems = []
    for old in sorted(MOVED, key=len, reverse=True):
        new = MOVED[old]
        if old not in PUBLIC_NAMES:
            text = re.sub(r"(?<![\w.])%s(?![\w])" % re.escape(old), new, text)
        text = re.sub(r"(?<![\w/])%s\.py\b" % re.escape(old.replace(".", "/")), new.replace(".", "/") + ".py", text)

    def from_import(match):
        names = [n.strip() for n in match.group(2).split(",")]
        moved = [n for n in names if "mx_sparse." + n.split(" as ")[0].strip() in MOVED]
        if not moved:
            return match.group(0)
        if len(names) != 1:
            problems.append(f"{path}: several names, some moved: {match.group(0).strip()}")
            return match.group(0)
        name, _, asname = names[0].partition(" as ")
        parent, _, last = new_name("mx_sparse." + name.strip(), inside).rpartition(".")
        local = asname.strip() or name.strip()
        return f"{match.group(1)}from {parent} import {last}" + ("" if local == last else f" as {local}")
    text = re.sub(r"(^[ \t>]*)from mx_sparse import ([\w ,]+?)[ \t]*(?=$|#)", from_import, text, flags=re.M)
    return text, problems


def main(files):
    if not files:
        listed = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
        files = [f for f in listed if f.endswith((".py", ".md", ".sh", ".cpp", ".h", ".ini", ".txt", ".cfg"))
                 and f != "CHANGELOG.md" and not f.startswith("tools/layout_move/")
                 and not f.startswith("tests/compat/data/") and f not in KEEPS_OLD_NAMES]
    problems = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = text
        if path.startswith("mx_sparse" + os.sep) and path.endswith(".py"):
            new, found = rewrite_relative_imports(path, new)
            problems += found
        new, found = rewrite_absolute(path, new)
        problems += found
        if new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print("rewrote", path)
    for p in problems:
        print("CHECK BY HAND:", p, file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
