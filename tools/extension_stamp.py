"""Whether mx_sparse's C++ extension must be rebuilt, from the content of its sources.

The build (setup.py) writes a stamp beside the compiled module: the SHA-256 of every file
the extension is compiled from (setup.py and the C/C++ sources and headers under kernels/,
any folder named ``build`` or hidden left out). run.sh rebuilds only when that digest
changed: files that tests and tools write (downloaded headers under build folders, logs,
caches) and timestamps (a checkout, a copy, ``touch``) never trigger a rebuild.

    python tools/extension_stamp.py digest       # the digest of the sources now
    python tools/extension_stamp.py check        # exit 0: the extension is up to date;
                                                 # 1: a rebuild is needed (the reason on stdout)
Standard library only: run.sh calls it before any environment exists.
"""
import glob
import hashlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_SUFFIXES = (".cpp", ".cc", ".h", ".hpp", ".inc")
STAMP_NAME = "_C.sources.sha256"   # beside mx_sparse/_C*.so


def source_files(root=ROOT):
    """setup.py and the C/C++ files under kernels/, relative to root, sorted; folders named
    ``build``, ``__pycache__`` or starting with a dot are skipped (outputs, not sources)."""
    files = ["setup.py"]
    for here, dirs, names in os.walk(os.path.join(root, "kernels")):
        dirs[:] = sorted(d for d in dirs if d not in ("build", "__pycache__") and not d.startswith("."))
        files += [os.path.relpath(os.path.join(here, n), root) for n in names if n.endswith(SOURCE_SUFFIXES)]
    return sorted(f.replace(os.sep, "/") for f in files)


def digest(root=ROOT):
    """SHA-256 over each source's path and content, in path order."""
    h = hashlib.sha256()
    for rel in source_files(root):
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def write_stamp(folder, value):
    with open(os.path.join(folder, STAMP_NAME), "w") as f:
        f.write(value + "\n")


def rebuild_reason(root=ROOT):
    """None when mx_sparse/_C*.so exists and its stamp matches the sources, else why not."""
    pkg = os.path.join(root, "mx_sparse")
    if not glob.glob(os.path.join(pkg, "_C*.so")):
        return "no compiled extension (mx_sparse/_C*.so)"
    stamp = os.path.join(pkg, STAMP_NAME)
    if not os.path.exists(stamp):
        return f"no source stamp (mx_sparse/{STAMP_NAME}; extensions built before the stamp existed have none)"
    with open(stamp) as f:
        if f.read().strip() != digest(root):
            return "a C++ source or setup.py changed since the last build"
    return None


def main(argv):
    if argv == ["digest"]:
        print(digest())
        return 0
    if argv == ["check"]:
        reason = rebuild_reason()
        print(reason or "up to date")
        return 0 if reason is None else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
