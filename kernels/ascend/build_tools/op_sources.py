"""What mx_sparse's AscendC op sources declare, parsed from the sources themselves (no compiler):

  OpDef       kernels/ascend/<op>/op_host/<op>_cann.cpp: inputs / outputs (names, dtype columns), attrs
  aclnn       the prototype CANN generates from an OpDef (order: inputs, attrs, outputs;
              ASCENDC_REFERENCE.md §6.5): aclnn<Op>GetWorkspaceSize(...)
  kernel      kernels/ascend/<op>/op_kernel/<op>.cpp: the extern "C" entry, its GM arguments,
              the tiling struct it registers and reads, the element types of its tiling-key branches
  tiling      kernels/ascend/<op>/op_host/<op>_tiling_data.h: the plain struct (field types, offsets)
  binding     EXEC_NPU_CMD(aclnn<Op>, args...) calls of kernels/ascend/binding/*.cpp, each argument's
              kind resolved from its declaration

Used by the build (kernels/ascend/build_tools/build_ops.py writes msopgen's op description from
the OpDefs) and by the consistency check (tools/ascend_consistency/check_interfaces.py).
"""
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

GE_DTYPES = {"DT_FLOAT": "float", "DT_FLOAT16": "float16", "DT_BF16": "bfloat16", "DT_INT32": "int32",
             "DT_INT64": "int64", "DT_INT8": "int8", "DT_UINT8": "uint8", "DT_INT16": "int16", "DT_BOOL": "bool"}
KERNEL_TYPES = {"float": "float", "half": "float16", "bfloat16_t": "bfloat16"}
ATTR_ACLNN = {"Int": ("int64_t", "int"), "ListInt": ("const aclIntArray*", "int_list"), "Float": ("double", "float"),
              "Bool": ("bool", "bool"), "String": ("char*", "string")}
C_SIZES = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4, "int64_t": 8,
           "uint64_t": 8, "float": 4}


@dataclass
class Tensor:
    name: str
    dtypes: List[str]


@dataclass
class Attr:
    name: str
    kind: str   # Int, ListInt, Float, Bool


@dataclass
class OpDef:
    op_type: str
    source: Path
    inputs: List[Tensor] = field(default_factory=list)
    outputs: List[Tensor] = field(default_factory=list)
    attrs: List[Attr] = field(default_factory=list)
    tiling_structs: List[str] = field(default_factory=list)   # structs the glue stores as tiling

    @property
    def snake(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.op_type).lower()

    def aclnn_params(self) -> List[Tuple[str, str, str]]:
        """(C type, name, kind) of aclnn<Op>GetWorkspaceSize before workspaceSize/executor."""
        ps = [("const aclTensor*", t.name, "tensor") for t in self.inputs]
        ps += [(ATTR_ACLNN[a.kind][0], a.name, ATTR_ACLNN[a.kind][1]) for a in self.attrs]
        if len(self.outputs) == 1:
            ps.append(("aclTensor*", "out", "tensor"))
        else:
            ps += [("aclTensor*", f"{t.name}Out", "tensor") for t in self.outputs]
        return ps

    def aclnn_prototype(self) -> str:
        args = ", ".join(f"{c} {n}" for c, n, _ in self.aclnn_params())
        return (f"aclnnStatus aclnn{self.op_type}GetWorkspaceSize({args}, uint64_t* workspaceSize, "
                f"aclOpExecutor** executor);")


@dataclass
class KernelEntry:
    name: str
    source: Path
    params: List[str]
    registered_tiling: Optional[str]
    read_tiling: List[str]
    branch_types: List[str]   # element types of the TILING_KEY_IS branches, in key order (a kernel with
                              # several variants, e.g. GatherMm's weight layouts, lists each variant's)


@dataclass
class TilingStruct:
    name: str
    source: Path
    fields: List[Tuple[str, str]]   # (type, name)


@dataclass
class BindingCall:
    op_type: str
    source: Path
    line: int
    args: List[str]
    kinds: List[Optional[str]]      # tensor / int / int_list / float / bool / None (unresolved)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _dtype_list(chain: str) -> List[str]:
    m = re.search(r"\.DataType\(\{([^}]*)\}\)", chain)
    if not m:
        return []
    return [GE_DTYPES.get(d.strip().split("::")[-1], d.strip()) for d in m.group(1).split(",") if d.strip()]


def parse_opdef(path: Path) -> OpDef:
    text = _strip_comments(path.read_text())
    m = re.search(r"class\s+(\w+)\s*:\s*public\s+OpDef", text)
    if not m:
        raise ValueError(f"{path}: no `class <Op> : public OpDef`")
    op = OpDef(m.group(1), path)
    for kind, name, chain in re.findall(r"this->(Input|Output|Attr)\(\"(\w+)\"\)([^;]*);", text):
        if kind == "Attr":
            t = re.search(r"\.(ListInt|Int|Float|Bool|String)\(\)", chain)
            op.attrs.append(Attr(name, t.group(1) if t else "?"))
        else:
            (op.inputs if kind == "Input" else op.outputs).append(Tensor(name, _dtype_list(chain)))
    op.tiling_structs = re.findall(r"\b(\w+TilingData)\s+\w+\s*;", text)
    return op


def parse_kernel(path: Path) -> KernelEntry:
    text = _strip_comments(path.read_text())
    m = re.search(r'extern\s+"C"\s+__global__\s+__aicore__\s+void\s+(\w+)\s*\(([^)]*)\)', text)
    if not m:
        raise ValueError(f"{path}: no extern \"C\" __global__ __aicore__ kernel entry")
    params = [p.split()[-1] for p in m.group(2).split(",") if p.strip()]
    body = text[m.end():]
    reg = re.search(r"REGISTER_TILING_DEFAULT\(\s*([\w:]+)\s*\)", body)
    read = re.findall(r"GET_TILING_DATA_WITH_STRUCT\(\s*([\w:]+)\s*,", body)
    # the element type is a branch's first template argument (`Kernel<half>`, `Kernel<half, true>`)
    branches = sorted((int(k), t) for k, t in re.findall(r"TILING_KEY_IS\((\d+)\)\)\s*\{[^}]*?<\s*(\w+)\s*[,>]", body))
    return KernelEntry(m.group(1), path, params, reg.group(1) if reg else None, read,
                       [KERNEL_TYPES.get(t, t) for _, t in branches])


def parse_tiling_struct(path: Path) -> List[TilingStruct]:
    text = _strip_comments(path.read_text())
    out = []
    for name, body in re.findall(r"struct\s+(\w+)\s*\{(.*?)\}\s*;", text, flags=re.S):
        fields = re.findall(r"^\s*([\w:]+)\s+(\w+)(?:\[[^\]]*\])?\s*(?:=[^;]*)?;", body, flags=re.M)
        out.append(TilingStruct(name, path, fields))
    return out


_DECL_TYPES = [(r"at::Tensor", "tensor"), (r"c10::IntArrayRef|at::IntArrayRef|std::vector<int64_t>", "int_list"),
               (r"u?int(?:8|16|32|64)_t|int|long", "int"), (r"double|float", "float"), (r"bool", "bool")]


def _arg_kind(before: str, name: str) -> Optional[str]:
    """Kind of the variable `name` from its nearest declaration in `before` (the source up to the call):
    a parameter `(TYPE [&] name,` / `, TYPE name)` or a local `TYPE a = ..., name = ...;`."""
    n = re.escape(name)
    for seg in reversed(re.split(r"[;{}]", before)):
        for pat, kind in _DECL_TYPES:
            t = rf"(?:const\s+)?(?:{pat})\s*[&*]?\s*"
            if re.search(rf"[(,]\s*{t}{n}\s*[,)=]", seg):                                     # parameter
                return kind
            if re.match(rf"\s*(?:static\s+)?{t}", seg) and re.search(rf"(?:{pat})\s*[&*]?\s*{n}\s*(=|,|$)|,\s*{n}\s*(=|,|$)", seg):
                return kind                                                                   # local
        m = re.search(rf"\bauto\s*[&*]?\s*{n}\s*=\s*(.*)", seg, flags=re.S)
        if m:   # `auto x = at::empty(...)` / `t.contiguous()` / `at::sort(...)`: tensors; anything else unresolved
            rhs = m.group(1)
            return "tensor" if re.match(r"\s*(at::(empty|zeros|ones|full|empty_like|zeros_like)\b|\w+\.(contiguous|to|clone|view|reshape)\()", rhs) else None
    return None


def parse_binding_calls(path: Path) -> List[BindingCall]:
    raw = path.read_text()
    text = _strip_comments(raw)
    calls = []
    for m in re.finditer(r"EXEC_NPU_CMD\(\s*aclnn(\w+)\s*,([^;]*)\)\s*;", text):
        args = [a.strip() for a in m.group(2).split(",") if a.strip()]
        before = text[: m.start()]
        calls.append(BindingCall(m.group(1), path, before.count("\n") + 1, args,
                                 [_arg_kind(before, a) if re.fullmatch(r"\w+", a) else None for a in args]))
    return calls


def field_layout(ts: TilingStruct) -> List[Tuple[str, int, int]]:
    """(field, offset, size) of the leading plain fields, laid out with no padding (what the struct
    must be: host and device copy it bytewise); stops at the first embedded struct."""
    out, off = [], 0
    for ctype, name in ts.fields:
        size = C_SIZES.get(ctype)
        if size is None:       # an embedded struct: its size is not known here, nor the offsets after it
            break
        out.append((name, off, size))
        off += size
    return out


def discover(ascend_dir: Path) -> Dict[str, dict]:
    """{op folder: {opdef, kernel, tiling_structs}} for every kernels/ascend/<op> with a _cann.cpp."""
    ops = {}
    for glue in sorted(ascend_dir.glob("*/op_host/*_cann.cpp")):
        folder = glue.parent.parent
        kernels = sorted((folder / "op_kernel").glob("*.cpp"))
        structs = []
        for h in sorted((folder / "op_host").glob("*_tiling_data.h")):
            structs += parse_tiling_struct(h)
        ops[folder.name] = {"opdef": parse_opdef(glue), "kernel": parse_kernel(kernels[0]) if kernels else None,
                            "tiling_structs": structs}
    return ops
