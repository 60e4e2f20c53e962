"""Runs the parts of a benchmark each in its own subprocess with a hard timeout, and collects
what they measure as JSON lines in one file.

Why subprocesses: on a lent GPU machine one part that hangs (a library autotuning hundreds of
kernel variants), crashes (a refused CUDA-graph capture can leave the CUDA context unusable) or
runs out of memory must not lose what the other parts measured. Each part:

- runs as ``argv`` in a new session (its whole process group is killed at its timeout);
- appends its own result records to the results file as it measures them (``emit``: one JSON
  object a line, flushed and synced at once), so a part killed half-way keeps its first lines;
- gets a closing ``{"record": "part", ...}`` line from the runner: status ``ok``, ``failed``
  (its exit status), ``timeout`` or ``skipped`` (the overall budget was spent), its seconds,
  its timeout and the last lines of its output (also kept whole in ``<out>/<part>.log``).

Parts run one after the other, never two at once (one GPU, and timings must not overlap).
"""
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

RESULTS = "results.jsonl"
# The environment variable through which a part learns where to append its records.
RESULTS_ENV = "MXS_PROFILE_RESULTS"
# A part is not started with less time left than this (its imports alone take seconds).
MIN_PART_SECONDS = 10.0
TAIL_LINES = 20


@dataclass
class Part:
    name: str
    argv: List[str]
    timeout: float
    env: Dict[str, str] = field(default_factory=dict)      # set for this part only


def emit(record: dict, path: Optional[str] = None) -> dict:
    """Appends ``record`` as one JSON line to the results file (``path``, else $MXS_PROFILE_RESULTS)
    and echoes it on stdout; flushed and synced, so it survives the process being killed next."""
    path = path or os.environ.get(RESULTS_ENV)
    line = json.dumps(record, default=str)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
    return record


def read_records(path: str) -> List[dict]:
    """The records of a results file; a line cut short by a kill is skipped."""
    records = []
    if not os.path.exists(path):
        return records
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-TAIL_LINES:])
    except OSError:
        return ""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_part(part: Part, out_dir: str, timeout: Optional[float] = None) -> dict:
    """Runs one part to its end or its timeout; returns (and appends) its closing record."""
    results = os.path.join(out_dir, RESULTS)
    log = os.path.join(out_dir, f"{part.name}.log")
    limit = part.timeout if timeout is None else min(part.timeout, timeout)
    env = dict(os.environ, **part.env, **{RESULTS_ENV: results})
    started = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(part.argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
            status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, status = None, "timeout"
        except BaseException:           # Ctrl-C on the runner: the part goes too
            _kill_group(proc)
            raise
    record = {"record": "part", "part": part.name, "status": status, "rc": rc,
              "seconds": round(time.perf_counter() - started, 2), "timeout_s": limit, "log": log,
              "tail": _tail(log)}
    return emit(record, results)


def run_parts(parts: List[Part], out_dir: str, budget: Optional[float] = None) -> List[dict]:
    """Runs ``parts`` in order, each in its own subprocess; with a ``budget`` (seconds for all of
    them), a part gets at most what is left and none starts with under MIN_PART_SECONDS left."""
    os.makedirs(out_dir, exist_ok=True)
    deadline = None if budget is None else time.perf_counter() + budget
    closing = []
    for part in parts:
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left < MIN_PART_SECONDS:
            closing.append(emit({"record": "part", "part": part.name, "status": "skipped", "rc": None,
                                 "seconds": 0.0, "timeout_s": part.timeout,
                                 "tail": f"not started: {max(left, 0):.0f} s of the budget left"},
                                os.path.join(out_dir, RESULTS)))
            continue
        print(f"part {part.name}: started (timeout {part.timeout if left is None else min(part.timeout, left):.0f} s)",
              file=sys.stderr, flush=True)
        closing.append(run_part(part, out_dir, left))
        print(f"part {part.name}: {closing[-1]['status']} in {closing[-1]['seconds']:.1f} s", file=sys.stderr,
              flush=True)
    return closing
