"""The file path is the import path: every Python module of the package lies at the path its
dotted name says (``mx_sparse/_cuda/launch.py`` is ``mx_sparse._cuda.launch``), setup.py remaps
nothing (no ``package_dir``), and ``kernels/`` holds no Python package (only compiled sources
and their build tools). The import system is asked where each module's file is found (the path
finder over its parent package's ``__path__``), so the check fails if any name were served from
elsewhere."""
import ast
import importlib
import importlib.machinery
import os

import mx_sparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "mx_sparse")


def package_modules():
    """(dotted name, file) of every .py file under mx_sparse/, from the tree itself."""
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = os.path.relpath(folder, ROOT).split(os.sep)
        if not os.path.exists(os.path.join(folder, "__init__.py")):
            dirs[:] = []   # not a package: nothing below it is importable as mx_sparse.*
            continue
        for f in sorted(files):
            if f.endswith(".py"):
                parts = rel if f == "__init__.py" else rel + [f[:-3]]
                yield ".".join(parts), os.path.join(folder, f)


def file_spec(name):
    """Where the import system finds the file of ``name``: the path finder over its parent
    package's ``__path__`` (the parent imported first), not ``sys.modules`` -- where an old name
    (``mx_sparse.conv``) or a documented alias (``mx_sparse.ops``) stands for the module of its new
    name (mx_sparse/_core/old_paths.py), which is the alias working, not a remapped file."""
    parent, _, last = name.rpartition(".")
    if not parent:
        return importlib.machinery.PathFinder.find_spec(name, [ROOT])
    return importlib.machinery.PathFinder.find_spec(last, importlib.import_module(parent).__path__)


def test_every_module_is_found_at_its_own_path():
    modules = list(package_modules())
    assert len(modules) > 50   # the walk saw the package (and its _accelerator, _cuda, compat parts)
    names = {name for name, _ in modules}
    assert {"mx_sparse._accelerator.registration", "mx_sparse._cuda.launch", "mx_sparse._core.contract"} <= names
    wrong = []
    for name, path in modules:
        spec = file_spec(name)
        if spec is None or os.path.realpath(spec.origin) != os.path.realpath(path):
            wrong.append((name, path, spec and spec.origin))
    assert not wrong, wrong
    assert os.path.realpath(mx_sparse.__file__) == os.path.realpath(os.path.join(PACKAGE, "__init__.py"))


def test_setup_py_remaps_no_package():
    tree = ast.parse(open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read())
    keywords = {k.arg: k.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "setup" for k in node.keywords}
    assert "packages" in keywords and "package_dir" not in keywords
    assert "mx_sparse" in ast.unparse(keywords["packages"])


def test_kernels_holds_no_python_package():
    packages = [folder for folder, _, files in os.walk(os.path.join(ROOT, "kernels")) if "__init__.py" in files]
    assert packages == []


def test_top_level_is_the_package_map():
    """The package's top level lists its groups (docs/en/architecture.md, "Package map") and no
    module beside them: no file stands in for an old module name (those are served by
    mx_sparse/_core/old_paths.py, without a file)."""
    entries = [e for e in os.listdir(PACKAGE) if e != "__pycache__" and not e.startswith(("_C.", "_C_npu", "_ascend_opp"))]
    modules = sorted(e for e in entries if e.endswith(".py"))
    groups = sorted(e for e in entries if os.path.isfile(os.path.join(PACKAGE, e, "__init__.py")))
    assert modules == ["__init__.py", "__main__.py"], modules
    assert groups == ["_accelerator", "_core", "_cuda", "compat", "functional", "models", "nn", "runtime", "synthetic"], groups
    assert sorted(modules + groups) == sorted(entries), entries


def test_old_names_have_no_file_and_name_existing_modules():
    from mx_sparse._core.old_paths import ALIASES, MOVED
    for old, new in {**MOVED, **ALIASES}.items():
        old_path = os.path.join(ROOT, *old.split("."))
        assert not os.path.exists(old_path + ".py") and not os.path.isdir(old_path), old
        assert file_spec(new) is not None, (old, new)
