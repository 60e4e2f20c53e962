#!/usr/bin/env python3
"""End-to-end interface consistency of the AscendC ops, parsed from the sources (no CANN needed):

  OpDef (op_host/*_cann.cpp)  <->  the aclnn prototype CANN generates from it
                              <->  the binding's EXEC_NPU_CMD(aclnn<Op>, ...) calls (count, and the
                                   kind of each argument where its declaration is visible)
                              <->  the kernel entry (name = snake_case(Op), GM arguments = inputs,
                                   outputs, workspace, tiling, by name)
                              <->  the tiling struct (registered with REGISTER_TILING_DEFAULT, read by
                                   the entry, stored by the glue; fields at offsets that are
                                   multiples of their size)
  and the dtype columns of the OpDef <-> the element types of the kernel's tiling-key branches (in
  key order, once per kernel variant).

    python tools/ascend_consistency/check_interfaces.py [--root REPO]    # exit 1 on any mismatch
"""
import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "kernels" / "ascend" / "build_tools"))
import op_sources  # noqa: E402


def check_kernel(op, k):
    problems = []
    if k is None:
        return [f"{op.op_type}: no op_kernel/*.cpp"]
    if k.name != op.snake:
        problems.append(f"{op.op_type}: kernel entry is `{k.name}`, CANN expects `{op.snake}` (snake_case of the OpDef)")
    want = [t.name for t in op.inputs + op.outputs] + ["workspace", "tiling"]
    if [p.lower() for p in k.params] != [w.lower() for w in want]:
        problems.append(f"{op.op_type}: kernel {k.name}({', '.join(k.params)}) does not take the OpDef's GM "
                        f"arguments in order ({', '.join(want)})")
    return problems


def check_tiling(op, k, structs):
    problems = []
    if k is None:
        return problems
    names = {s.name: s for s in structs}
    if k.registered_tiling is None:
        problems.append(f"{op.op_type}: kernel {k.name} does not register its tiling struct (REGISTER_TILING_DEFAULT)")
    used = {k.registered_tiling, *k.read_tiling} - {None}
    for s in sorted(used):
        if s not in names:
            problems.append(f"{op.op_type}: kernel {k.name} uses tiling struct {s}, not defined in its op_host/*_tiling_data.h")
        if s not in op.tiling_structs:
            problems.append(f"{op.op_type}: the glue's tiling function stores {op.tiling_structs or 'no struct'}, "
                            f"the kernel reads {s}")
    for s in structs:
        for fname, off, size in op_sources.field_layout(s):
            if size and off % size:
                problems.append(f"{op.op_type}: {s.name}.{fname} at byte {off} is not aligned to its size {size} "
                                f"(tiling fields must sit at multiples of their size)")
    return problems


def check_dtypes(op, k):
    problems = []
    cols = {len(t.dtypes) for t in op.inputs + op.outputs}
    if len(cols) > 1:
        problems.append(f"{op.op_type}: DataType lists of different lengths {sorted(cols)} (columns must align)")
    first = op.inputs[0].dtypes if op.inputs else []
    # one run of branches per kernel variant (GatherMm: the weight as is, read transposed), each
    # instantiating the dtype columns in key order
    variants = len(k.branch_types) // len(first) if k is not None and first else 0
    if k is not None and k.branch_types and (variants == 0 or k.branch_types != first * variants):
        problems.append(f"{op.op_type}: kernel tiling-key branches instantiate {k.branch_types}, "
                        f"the OpDef's dtype columns are {first} (once per kernel variant)")
    if k is not None and not k.branch_types and len(set(first)) > 1:
        problems.append(f"{op.op_type}: OpDef lists dtypes {first} but the kernel has no per-dtype tiling-key branch")
    return problems


def check_binding(ops_by_type, calls):
    problems, notes = [], []
    called = set()
    for c in calls:
        where = f"{c.source.name}:{c.line}"
        op = ops_by_type.get(c.op_type)
        if op is None:
            problems.append(f"{where}: EXEC_NPU_CMD(aclnn{c.op_type}) but no OpDef {c.op_type}")
            continue
        called.add(c.op_type)
        params = op.aclnn_params()
        if len(c.args) != len(params):
            problems.append(f"{where}: aclnn{c.op_type} called with {len(c.args)} arguments ({', '.join(c.args)}), "
                            f"the generated prototype takes {len(params)}: {op.aclnn_prototype()}")
            continue
        for arg, kind, (ctype, pname, want) in zip(c.args, c.kinds, params):
            if kind is None:
                notes.append(f"{where}: aclnn{c.op_type} argument `{arg}` ({pname}): declaration not resolved")
            elif kind != want:
                problems.append(f"{where}: aclnn{c.op_type} argument `{arg}` is {kind}, parameter {pname} is {ctype}")
    for t in sorted(set(ops_by_type) - called):
        problems.append(f"OpDef {t}: no EXEC_NPU_CMD(aclnn{t}) in the binding")
    return problems, notes


def check(root: Path = REPO):
    ascend = root / "kernels" / "ascend"
    ops = op_sources.discover(ascend)
    problems = []
    for entry in ops.values():
        op, k = entry["opdef"], entry["kernel"]
        problems += check_kernel(op, k) + check_tiling(op, k, entry["tiling_structs"]) + check_dtypes(op, k)
    calls = [c for f in sorted((ascend / "binding").glob("*.cpp")) for c in op_sources.parse_binding_calls(f)]
    bp, notes = check_binding({e["opdef"].op_type: e["opdef"] for e in ops.values()}, calls)
    return ops, calls, problems + bp, notes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=REPO)
    a = ap.parse_args(argv)
    ops, calls, problems, notes = check(a.root)
    for e in ops.values():
        print(f"op {e['opdef'].op_type}: {e['opdef'].aclnn_prototype()}")
    print(f"{len(ops)} OpDefs, {len(calls)} binding calls")
    for n in notes:
        print(f"note  {n}")
    for p in problems:
        print(f"FAIL  {p}")
    print("interfaces consistent" if not problems else f"{len(problems)} mismatch(es)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
