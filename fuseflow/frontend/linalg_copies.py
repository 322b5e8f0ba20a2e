"""Lower a repeated block once and splice its lowered copies into the lowered model.

torch-mlir's lowering costs the same for every copy of a block (GPT-3 Small: twelve decoders,
0.05 s each, most of the 12-decoder import). `replicate.export_templated` keeps each outermost
copy as a call; here each call becomes a ``func.call`` of a declared function, the model and
each distinct block are lowered once (in parallel child processes), and each call is replaced,
in the printed linalg, by the block's lowered body:

- its values renamed apart (``%c3_12``), its arguments bound to the call's operands, its result
  named as the call's;
- its location names (``node|module path|origin``) the copy's, as a trace of the whole model
  names them (`replicate.Copy.names`);
- the outermost frame of its locations (the exported wrapper's) replaced by the call's frames,
  which is where a whole-model trace puts the block's frames;
- its leading constants hoisted among the model's, in the order the program first uses them
  (where the canonicalizer of a whole-model lowering lists them).

CSE then merges what the copies share (constants, empty tensors, ops on the same inputs), as
torch-mlir's CSE does over the whole model. The module is the whole-model lowering's up to the
locations of generic bodies' block arguments and of shared constants, which nothing reads
(tests/e2e/test_replicate.py). Anything outside this shape raises `NotReplicable`, and the
caller copies the blocks before lowering instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fuseflow.frontend.replicate import Copy, NotReplicable
from fuseflow.mlir import PassManager, ir

CALLEE = "fuseflow_copy_{}"
_REPLICA = '"torch.fuseflow.replica"'

_TOKEN = re.compile(r'%(?P<ssa>[\w$.-]+)|#(?P<alias>[A-Za-z_][\w$.-]*)|"(?P<name>[^"|\n]*)\|[^"|\n]*\|[^"\n]*"')
_CALL = re.compile(
    r"^[ \t]*%(?P<res>[\w$.-]+) = (?:func\.)?call @fuseflow_copy_(?P<t>\d+)\((?P<args>[^)]*)\) : [^\n]*\n", re.M
)
_DECLARATION = re.compile(r"^[ \t]*func\.func private @fuseflow_copy_\d+\([^\n]*\n", re.M)
_ALIAS_LINE = re.compile(r"^#([\w$.-]+) = ")
_CONSTANT = re.compile(r"^\s*%[\w$.-]+ = arith\.constant [^\n]*$")
_RETURN = re.compile(r"^\s*(?:func\.)?return %([\w$.-]+) : [^\n]*$")


def declare_calls(module: ir.Module, templates: Sequence[int]) -> None:
    """Replace the imported ``fuseflow.replica`` operators of `module`'s ``main`` (in order) by
    calls of ``fuseflow_copy_<template>`` on the list's elements, each callee declared private."""
    main = module.body.operations[0]
    block = main.regions[0].blocks[0]
    replicas = [
        op
        for op in block.operations
        if op.operation.name == "torch.operator" and str(op.operation.attributes["name"]) == _REPLICA
    ]
    if len(replicas) != len(templates):
        raise NotReplicable(f"{len(replicas)} block calls imported, {len(templates)} expected")
    declared: dict[int, ir.FunctionType] = {}
    with module.context:
        for op, t in zip(replicas, templates):
            listed = op.operation.operands[0].owner
            if not isinstance(listed, ir.Operation) and hasattr(listed, "operation"):
                listed = listed.operation
            if listed.name != "torch.prim.ListConstruct":
                raise NotReplicable("a block call's activations are not a list")
            args = list(listed.operands)
            ftype = ir.FunctionType.get([a.type for a in args], [op.operation.results[0].type])
            if declared.setdefault(t, ftype) != ftype:
                raise NotReplicable("calls of one block differ in type")
            call = ir.Operation.create(
                "func.call",
                results=[op.operation.results[0].type],
                operands=args,
                attributes={"callee": ir.FlatSymbolRefAttr.get(CALLEE.format(t))},
                loc=op.operation.location,
                ip=ir.InsertionPoint(op.operation),
            )
            op.operation.results[0].replace_all_uses_with(call.results[0])
            op.operation.erase()
        first = module.body.operations[0]
        for t, ftype in sorted(declared.items()):
            ir.Operation.create(
                "func.func",
                regions=1,
                attributes={
                    "sym_name": ir.StringAttr.get(CALLEE.format(t)),
                    "function_type": ir.TypeAttr.get(ftype),
                    "sym_visibility": ir.StringAttr.get("private"),
                },
                loc=ir.Location.unknown(),
                ip=ir.InsertionPoint(first),
            )


@dataclass
class Block:
    """A lowered block's text, cut up once for its copies."""

    top: str  # alias definitions before the module
    constants: str  # the function's leading constants (hoisted to the model's, as canonicalize does)
    body: str  # the rest of the function's body, without its return
    bottom: str  # alias definitions after the module
    n_args: int
    result: str  # the returned value's name
    aliases: frozenset[str]
    leaf: str | None  # the alias of the outermost frame of the block's locations


def cut(text: str, outermost: tuple[str, int] | None) -> Block:
    """`text` (a lowered module of one function) cut into what each copy renames. `outermost`:
    the frame every location of the block starts from (file, line), or None."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if ln.startswith("module")]
    funcs = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("func.func")]
    if len(starts) != 1 or len(funcs) != 1:
        raise NotReplicable("a lowered block is not one function")
    m, f = starts[0], funcs[0]
    ends = [i for i in range(len(lines) - 1, f, -1) if lines[i].startswith("}")]
    ret = next((i for i in range(ends[0] if ends else len(lines) - 1, f, -1) if _RETURN.match(lines[i])), None)
    if not ends or ret is None or lines[ret + 1].strip()[:1] != "}" or ret + 2 != ends[0]:
        raise NotReplicable("a lowered block has an unexpected shape")
    if any(not ln.startswith("#") and ln.strip() for ln in lines[:m] + lines[ends[0] + 1 :]):
        raise NotReplicable("a lowered block holds more than aliases around its module")
    if any(ln.strip() and not ln.lstrip().startswith(("func.func", "module")) for ln in lines[m + 1 : f]):
        raise NotReplicable("a lowered block holds more than its function")
    aliases = frozenset(a.group(1) for ln in lines[:m] + lines[ends[0] + 1 :] if (a := _ALIAS_LINE.match(ln)))
    leaf = None
    if outermost is not None:
        want = f'loc("{outermost[0]}":{outermost[1]}:0)'
        for ln in lines[:m] + lines[ends[0] + 1 :]:
            a = _ALIAS_LINE.match(ln)
            if a and ln[a.end() :].strip() == want:
                leaf = a.group(1)
        if leaf is None:
            raise NotReplicable("a lowered block's outermost frame is not an alias")
    ret_match = _RETURN.match(lines[ret])
    assert ret_match is not None
    n_args = len(re.findall(r"%arg\d+: ", lines[f]))
    body = f + 1
    while body < ret and _CONSTANT.match(lines[body]):
        body += 1
    return Block(
        "".join(lines[:m]),
        "".join(lines[f + 1 : body]),
        "".join(lines[body:ret]),
        "".join(lines[ends[0] + 1 :]),
        n_args,
        ret_match.group(1),
        aliases,
        leaf,
    )


def _frames(frames: Sequence[tuple[str, int]]) -> str:
    """The location a trace of these frames (outermost first) gets, as the FX importer builds it."""
    locs = [ir.Location.file(f, line, 0) for f, line in frames]
    loc = locs[-1] if len(locs) == 1 else ir.Location.callsite(locs[-1], locs[-2::-1])
    return str(loc)


def splice(outer: str, blocks: Sequence[Block], copies: Sequence[Copy], context: ir.Context) -> str:
    """`outer` (the lowered model, its calls in `copies`' order) with each call replaced by its
    block's body renamed for that copy."""
    calls = list(_CALL.finditer(outer))
    if len(calls) != len(copies):
        raise NotReplicable(f"{len(calls)} block calls lowered, {len(copies)} expected")
    # The model's own leading constants, cut out and put back around the blocks' ones: the
    # canonicalizer lists a function's constants in the order the program first uses them.
    head = outer.index("\n", outer.index("func.func @main(")) + 1
    head_end = head
    while (end := outer.find("\n", head_end)) >= 0 and _CONSTANT.match(outer[head_end:end]):
        head_end = end + 1
    first_call = calls[0].start() if calls else len(outer)
    early: list[str] = []
    late: list[str] = []
    for line in outer[head:head_end].splitlines(keepends=True):
        name = re.escape(line.split("=", 1)[0].strip())
        use = re.compile(name + r"(?![\w$.-])").search(outer, head_end)
        (early if use is not None and use.start() < first_call else late).append(line)
    pieces: list[str] = [outer[:head], "", outer[head_end : calls[0].start() if calls else len(outer)]]
    tops: list[str] = []
    constants: list[str] = []
    bottoms: list[str] = []
    with context:
        for k, (call, copy) in enumerate(zip(calls, copies)):
            block = blocks[copy.template]
            if int(call.group("t")) != copy.template:
                raise NotReplicable("block calls lowered out of order")
            operands = [a.strip().lstrip("%") for a in call.group("args").split(",") if a.strip()]
            if len(operands) != block.n_args:
                raise NotReplicable("a block call's operands do not match its block")
            leaf = None if copy.frames is None else _frames(copy.frames)
            top, consts, body, bottom = _renamed(block, k, operands, call.group("res"), copy.names, leaf)
            if k:
                pieces.append(outer[calls[k - 1].end() : call.start()])
            pieces.append(body)
            tops.append(top)
            constants.append(consts)
            bottoms.append(bottom)
    if calls:
        pieces.append(outer[calls[-1].end() :])
    pieces[1] = "".join(early + constants + late)
    text = _DECLARATION.sub("", "".join(pieces))
    start = text.index("\nmodule") + 1 if not text.startswith("module") else 0
    return text[:start] + "".join(tops) + text[start:] + "".join(bottoms)


def _renamed(
    block: Block, k: int, operands: list[str], result: str, names: dict[str, str], leaf: str | None
) -> tuple[str, str, str, str]:
    """The block's alias definitions, constants and body for copy `k`."""
    prefix = f"c{k}_"

    def token(m: re.Match) -> str:
        ssa = m.group("ssa")
        if ssa is not None:
            if ssa == block.result:
                return "%" + result
            if ssa.startswith("arg") and ssa[3:].isdigit() and int(ssa[3:]) < block.n_args:
                return "%" + operands[int(ssa[3:])]
            return f"%{prefix}{ssa}"
        alias = m.group("alias")
        if alias is not None:
            return f"#{prefix}{alias}" if alias in block.aliases else m.group(0)
        name = m.group("name")
        if name not in names:
            raise NotReplicable(f"a lowered block's location {name!r} names no node of the block")
        return f'"{names[name]}"'

    top, consts, body, bottom = (
        _TOKEN.sub(token, part) for part in (block.top, block.constants, block.body, block.bottom)
    )
    if leaf is not None and block.leaf is not None:
        line = re.compile(rf"^#{re.escape(prefix + block.leaf)} = [^\n]*$", re.M)
        top, n_top = line.subn(lambda _: f"#{prefix}{block.leaf} = {leaf}", top)
        bottom, n_bottom = line.subn(lambda _: f"#{prefix}{block.leaf} = {leaf}", bottom)
        if n_top + n_bottom != 1:
            raise NotReplicable("a lowered block's outermost frame is defined more than once")
    return top, consts, body, bottom


def merge_shared(module: ir.Module) -> None:
    """CSE over the spliced function: what the copies compute alike from the same values."""
    with module.context:
        PassManager.parse("builtin.module(func.func(cse))").run(module.operation)
