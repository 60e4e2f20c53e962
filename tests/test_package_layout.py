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
    package's ``__path__`` (the parent imported first), not ``sys.modules`` -- an alias module
    such as mx_sparse/ops.py replaces itself there by the surface it names (mx_sparse.compat.mmcv),
    which is the alias working, not a remapped file."""
    parent, _, last = name.rpartition(".")
    if not parent:
        return importlib.machinery.PathFinder.find_spec(name, [ROOT])
    return importlib.machinery.PathFinder.find_spec(last, importlib.import_module(parent).__path__)


def test_every_module_is_found_at_its_own_path():
    modules = list(package_modules())
    assert len(modules) > 50   # the walk saw the package (and its _accelerator, _cuda, compat parts)
    names = {name for name, _ in modules}
    assert {"mx_sparse._accelerator.registration", "mx_sparse._cuda.launch", "mx_sparse._contract"} <= names
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
