"""Checkpoints that an interruption cannot destroy, and an output folder checked before work.

``save_atomic`` writes the whole checkpoint to a temporary file in the target's folder,
flushes and fsyncs it, then renames it over the target (``os.replace`` is atomic on POSIX
and Windows within one file system) and fsyncs the folder so the rename itself survives a
power cut. A kill at any moment leaves either the previous checkpoint or the new one,
never a truncated file; a leftover temporary file is removed by the next save.
"""
import glob
import io
import os
import shutil

import torch

TEMP_SUFFIX = ".partial"


def save_atomic(obj, path: str):
    """torch.save(obj, path) so that ``path`` is always a complete checkpoint."""
    folder = os.path.dirname(os.path.abspath(path))
    for stale in glob.glob(os.path.join(folder, f".{os.path.basename(path)}.*{TEMP_SUFFIX}")):
        os.remove(stale)                                      # left by an interrupted save
    temp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}{TEMP_SUFFIX}")
    try:
        with open(temp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise
    fsync_folder(folder)


def fsync_folder(folder: str):
    """Make a rename in ``folder`` durable (no-op where folders cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_bytes(obj) -> int:
    """Size of ``obj`` as torch.save writes it (measured in memory)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.tell()


def check_output_folder(folder: str, needed_bytes: int, option: str = "--out"):
    """Create ``folder`` and prove it can take a checkpoint: writable, and room for two (the
    old one stays until the new one is complete). SystemExit with one line otherwise."""
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".write-test.{os.getpid()}{TEMP_SUFFIX}")
        with open(probe, "wb") as f:
            f.write(b"\0" * min(needed_bytes, 1 << 20))
            f.flush()
            os.fsync(f.fileno())
        os.remove(probe)
    except OSError as e:
        raise SystemExit(f"{option}: cannot write checkpoints to {folder}: {e.strerror or e} "
                         f"(choose a writable folder with --out DIR)")
    free = shutil.disk_usage(folder).free
    if free < 2 * needed_bytes:
        raise SystemExit(f"{option}: {folder} has {free / 2**20:.1f} MiB free; a checkpoint takes "
                         f"{needed_bytes / 2**20:.1f} MiB and an atomic save needs room for two "
                         f"({2 * needed_bytes / 2**20:.1f} MiB): free some space or choose another --out")
