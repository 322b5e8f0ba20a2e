"""Lower one index-notation assignment to a sam graph (docs/architecture.md, "Design: lowering").

For each index variable in dataflow order, the expression's *iteration tree* at that variable
says how operands co-iterate: multiplication intersects, addition unions, an op with f(0) != 0
iterates the full range; dense operands under an intersection are reached with ``locate``.
Accesses that lack the variable are repeated along it. After the last variable, values are
loaded, combined by ALUs, reduced (``reduce`` innermost, ``spacc`` otherwise) and written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from fuseflow.analysis.absent import absent, identity
from fuseflow.analysis.alpha import AlphaKeys, share_equivalent
from fuseflow.analysis.index_notation import COMMUTATIVE, UNIT, Access, Assign, Call, Const, Expr, Reduce
from fuseflow.analysis.nests import NestPlan, SharedInTwoNests, plan
from fuseflow.analysis.storage_order import storage_vars
from fuseflow.conversion.iteration_trees import Full, IterCtx, Leaf, Union_, VLeaf, iteration, shared_over_renamed
from fuseflow.dialects.sam_ir import REF, VAL, GraphBuilder, SamGraph, TensorEntry, tile_type
from fuseflow.errors import DiscordantError, UnsupportedError
from fuseflow.formats import Format


@dataclass
class TensorInfo:
    """A tensor as the lowering sees it: name, shape, format and role (input or output)."""

    name: str
    shape: tuple[int, ...]
    fmt: Format
    role: str  # "input" | "output"


def _relaid(t: TensorInfo, wanted: tuple[int, ...]) -> Format:
    """`t`'s format in another level order. The jointly sparse modes (those up to the last
    compressed level) keep their level kinds by position: CSR read by columns is CSC. A dense
    mode stored below a compressed level (the feature axis of a per-edge message, t(i,k,j) with
    k compressed) stays dense wherever it moves: handing it the compressed kind would leave the
    sparse mode dense (a 16 x N x N loop instead of 16 x nnz, found on PyG GCN over Cora). A
    level over a size-1 dimension is dense, as the frontend stores declared formats."""
    levels, order = t.fmt.levels, t.fmt.mode_order
    last_c = max((i for i, k in enumerate(levels) if k == "compressed"), default=len(levels))
    inner_dense = {m for i, m in enumerate(order) if i > last_c}  # dense below the last compressed level
    group = iter(k for k, m in zip(levels, order) if m not in inner_dense)
    kinds = tuple("dense" if m in inner_dense else next(group) for m in wanted)
    kinds = tuple("dense" if t.shape[m] == 1 else k for k, m in zip(kinds, wanted))
    return Format(kinds, wanted, t.fmt.block)


def _retarget(e: Expr, use: int, name: str) -> Expr:
    """`e` with the access of the given use reading tensor `name`."""
    if isinstance(e, Access):
        return Access(name, e.vars, e.use) if e.use == use else e
    if isinstance(e, Call):
        return Call(e.op, tuple(_retarget(a, use, name) for a in e.args))
    if isinstance(e, Reduce):
        return Reduce(e.kind, e.vars, _retarget(e.body, use, name))
    return e


# --- graph building --------------------------------------------------------------------------------
_RANGE = object()  # payload owner of a dense range generator (no tensor behind it)


@dataclass
class _State:
    ref: str
    level: int = 0


class SamLowering:
    """Builds the sam graph text of one region from its assignments."""

    def __init__(self, name: str, tensors: dict[str, TensorInfo], node_budget: int = 100_000, block: int = 0):
        self.name = name
        self.block = block  # > 0: iterate b x b blocks, values are dense tiles (the block pass)
        self.vaxes: dict[str, tuple[str, ...]] = {}  # value stream -> its tile's axes (blocked)
        self._scans: dict = {}
        # References that may be absent (N): a union's payload for an operand that does not
        # cover the union, and everything read below one. A dense level under such a reference
        # is not the full range (an absent fiber has no coordinates).
        self._maybe_absent: set[str] = set()
        self.tensors = tensors
        self.g = GraphBuilder()
        self.node_budget = node_budget
        self.outputs: dict[str, TensorInfo] = {}
        self.notes: list[str] = []
        self.aliases: dict[str, str] = {}  # re-laid copy -> the tensor whose data it holds
        self.scanned: set[str] = set()  # tensors an earlier assignment of this region already reads
        self.declared: dict[str, Format] = {}  # outputs declared sparse: written in that format, zeros dropped
        self.copy_of: str | None = None  # the region this lowering is a renamed copy of (`renamed`)
        self.renames: dict[str, str] = {}  # ... and its tensors' new names (old -> new)

    # -- per-variable iteration ------------------------------------------------------------------
    def _fmt(self, a: Access) -> Format:
        return self.tensors[a.tensor].fmt

    def _level(self, a: Access, st: _State) -> tuple[str, int, int, int]:
        fmt = self._fmt(a)
        while a.vars[fmt.mode_order[st.level]] == UNIT:  # size-1 dense levels: the ref passes through
            if fmt.levels[st.level] != "dense":
                raise UnsupportedError(f"tensor {a.tensor}: a compressed level of size 1 is not supported")
            st.level += 1
        mode = fmt.mode_order[st.level]
        dim = self.tensors[a.tensor].shape[mode]
        return fmt.levels[st.level], mode, st.level, (dim // self.block if self.block and dim != 1 else dim)

    def _compressed_at(self, a: Access, v: str) -> bool:
        """Can `a` skip coordinates of v: a compressed level, or any level under a maybe-absent ref."""
        fmt = self._fmt(a)
        st = self.state.get(a) if hasattr(self, "state") else None
        if st is not None and st.ref in self._maybe_absent:
            return True
        return fmt.levels[fmt.mode_order.index(a.vars.index(v))] == "compressed"

    def _scan(self, a: Access, v: str) -> tuple[str, dict, bool]:
        # A shared (alpha-equivalent) subexpression can put one access twice in an iteration
        # tree: it is scanned once per variable.
        key = (a, v, self.state[a].ref)
        if key in self._scans:
            return self._scans[key]
        self._scans[key] = out = self._scan_level(a, v)
        return out

    def _scan_level(self, a: Access, v: str) -> tuple[str, dict, bool]:
        st = self.state[a]
        kind, mode, level, dim = self._level(a, st)
        ref, crd = self.g.scan(st.ref, tensor=a.tensor, mode=mode, level=level, format=kind, dim=dim, index_var=v)
        if st.ref in self._maybe_absent:
            self._maybe_absent.add(ref)
            return crd, {a: ref}, False
        return crd, {a: ref}, kind == "dense"

    def _range(self, v: str) -> tuple[str, dict, bool]:
        """A dense coordinate generator over v's full range (for ops with f(0) != 0)."""
        parent = self.g.root("")
        for crd in [self.crd_of[u] for u in self.prefix]:  # bring the generator to this nesting depth
            parent = self.g.repeat(parent, self._sig(crd))
        ref, crd = self.g.scan(parent, tensor="", mode=0, level=0, format="dense", dim=self.dims[v], index_var=v)
        return crd, {_RANGE: ref}, True

    def _joiner(self, kind: str, parts: list, v: str):
        if len({p[0] for p in parts}) == 1:  # one coordinate stream (CSE'd scans): nothing to join
            merged = {a: r for p in parts for a, r in p[1].items()}
            full = all(p[2] for p in parts) if kind == "intersect" else any(p[2] for p in parts)
            return parts[0][0], merged, full
        triples = [(crd, r, a) for crd, rs, _ in parts for a, r in rs.items()]
        triples.sort(key=lambda t: self.g.type_of(t[1]) != REF)  # ref payloads first, then values
        crds, refs, owners = [t[0] for t in triples], [t[1] for t in triples], [t[2] for t in triples]
        join = self.g.intersect if kind == "intersect" else self.g.union
        crd, outs = join(crds, refs, index_var=v)
        for r_in, r_out in zip(refs, outs):  # value payloads keep their tile axes
            if r_in in self.vaxes:
                self.vaxes[r_out] = self.vaxes[r_in]
        merged = {a: r for a, r in zip(owners, outs) if a is not _RANGE}
        full = all(p[2] for p in parts) if kind == "intersect" else any(p[2] for p in parts)
        if kind == "union":
            covering = {a for _, rs, f in parts if f for a in rs}
            self._maybe_absent.update(
                r_out for a, r_in, r_out in zip(owners, refs, outs) if a not in covering or r_in in self._maybe_absent
            )
        else:  # an intersection passes each reference through: one that may be absent still may
            # (a union with the full range, then a product with another tensor; found by the
            # message-passing fuzzer: exp of a gathered value whose whole fiber was zero)
            self._maybe_absent.update(r_out for r_in, r_out in zip(refs, outs) if r_in in self._maybe_absent)
        return crd, merged, full

    def _lower(self, t, v: str):
        if isinstance(t, Leaf):
            return self._scan(t.access, v)
        if isinstance(t, VLeaf):
            r = t.reduce
            k, (_, inner) = r.vars[0], self.plan.spacc[id(r)]
            val = self._value(r.body, self.plan.body_nest[id(r)])
            axes = self._minus(self.vaxes.get(val, ()), k)
            (crd,), out = self.g.spacc(
                [self.crd_of[inner]],
                self.crd_of[k],
                val,
                kind=r.kind,
                index_var=k,
                axes=self._axes_attr(axes),
                type=self._vtype(axes),
            )
            self.vaxes[out] = axes
            return crd, {r: out}, False
        if isinstance(t, Full):
            if t.part is None:
                return self._range(v)
            p = self._lower(t.part, v)
            return p if p[2] else self._joiner("union", [p, self._range(v)], v)
        if isinstance(t, Union_):
            return self._joiner("union", [self._lower(p, v) for p in t.parts], v)
        # Intersection: dense leaves are located at the coordinates of the others.
        dense = [
            p for p in t.parts if isinstance(p, Leaf) and self._level(p.access, self.state[p.access])[0] == "dense"
        ]
        rest = [p for p in t.parts if p not in dense]
        if not rest:
            rest, dense = [dense[0]], dense[1:]
        parts = [self._lower(p, v) for p in rest]
        crd, refs, full = parts[0] if len(parts) == 1 else self._joiner("intersect", parts, v)
        for leaf in dense:
            a = leaf.access
            st = self.state[a]
            _, mode, level, dim = self._level(a, st)
            refs[a] = self.g.locate(crd, st.ref, tensor=a.tensor, mode=mode, level=level, dim=dim, index_var=v)
            if st.ref in self._maybe_absent:
                self._maybe_absent.add(refs[a])
        return crd, refs, full

    def _sig(self, crd: str) -> str:
        return self.g.repsiggen(crd)

    # -- whole assignment --------------------------------------------------------------------------
    def _plan_concordant(self, expr: Expr, out_vars: tuple[str, ...], asg: Assign, order) -> NestPlan:
        """Plan `expr`, re-laying out tensors (or single uses) the loop nest reads discordantly."""
        relaid: set[str] = set()
        while True:
            try:
                p = plan(
                    expr,
                    out_vars,
                    lambda a: [v for v in storage_vars(a.vars, self._fmt(a).mode_order) if v != UNIT],
                    asg.loc,
                    order,
                )
                return p
            except DiscordantError as e:  # noqa: PERF203
                # Re-lay the tensor out in the order the loop nest needs (its data is packed at run
                # time, so this is a format conversion, reported as a note). If another use already
                # needs the first re-layout, this use reads its own re-laid copy.
                if e.tensor not in self.tensors or len(relaid) > 16:
                    raise
                t = self.tensors[e.tensor]
                if e.tensor not in relaid and e.tensor not in self.scanned:
                    relaid.add(e.tensor)
                    self.tensors[e.tensor] = replace(t, fmt=_relaid(t, e.wanted))
                    self.notes.append(
                        f"{self.name}: {e.tensor} stored as {self.tensors[e.tensor].fmt} "
                        f"(was {t.fmt}) to keep the loop nest concordant"
                    )
                else:
                    alias = f"{self.aliases.get(e.tensor, e.tensor)}@{len(self.aliases) + 1}"
                    if alias in relaid:
                        raise
                    relaid.add(alias)
                    self.aliases[alias] = self.aliases.get(e.tensor, e.tensor)
                    self.tensors[alias] = replace(t, name=alias, fmt=_relaid(t, e.wanted))
                    expr = _retarget(expr, e.use, alias)
                    self.notes.append(
                        f"{self.name}: one use of {e.tensor} reads a copy stored as {self.tensors[alias].fmt}"
                    )

    def lower(self, asg: Assign, order: list[str] | None = None) -> list[str]:
        """Add the graph of one assignment; returns the root loop order.

        An internal failure (a known one: a degree sum whose variable a Gustavson spacc renamed,
        scanned past its last level, on some orders of a fused two-layer PyG GCN) becomes an
        `UnsupportedError` naming the order, so the order ranker skips that order and a user who
        forced it gets one line instead of a traceback."""
        try:
            return self._lower_assign(asg, order)
        except (IndexError, KeyError) as e:
            raise UnsupportedError(
                f"region {self.name}: the lowering failed on order {','.join(order) if order else 'plain'} "
                f"(internal {type(e).__name__}: {e}); another order or schedule avoids it",
                asg.loc,
            ) from e

    def _plan_shared(self, asg: Assign, out_vars: tuple[str, ...], order: list[str] | None) -> NestPlan:
        """Plan `asg` with alpha-equivalent reductions shared. A shared reduction that a
        Gustavson body reads under renamed coordinates is split into one copy per use, and
        only that one: unsharing everything re-plans every softmax statistic of a fused
        decoder separately. Shared copies that land in different nests unshare everything."""
        snapshot = (dict(self.tensors), dict(self.aliases), list(self.notes))
        apart: frozenset[int] = frozenset()
        keys = AlphaKeys()
        while True:
            shared = share_equivalent(asg.expr, apart, keys)
            try:
                p = self._plan_concordant(shared, out_vars, asg, order)
            except SharedInTwoNests:  # shared copies land in different nests: keep them apart
                break
            bad = shared_over_renamed(shared, p.renamed, keys) if shared is not asg.expr else set()
            if not bad:
                return p
            apart |= bad
            self.tensors, self.aliases, self.notes = dict(snapshot[0]), dict(snapshot[1]), list(snapshot[2])
        self.tensors, self.aliases, self.notes = dict(snapshot[0]), dict(snapshot[1]), list(snapshot[2])
        return self._plan_concordant(asg.expr, out_vars, asg, order)

    def _lower_assign(self, asg: Assign, order: list[str] | None) -> list[str]:
        """Plan the assignment's nests, iterate every trie node, reduce at the root, write the
        output; returns the root loop order."""
        p, cx = self._plan_assign(asg, order)
        full_of = self._iterate(asg, p, cx)
        self.scanned.update(a.tensor for a in p.access_nest)  # a later assignment must not re-lay these out
        val, out_crds = self._root_reductions(asg, p, full_of)
        self._write(asg, [v for v in p.root_nest if v in out_crds], out_crds, full_of, val)
        return list(p.root_nest)

    def _plan_assign(self, asg: Assign, order: list[str] | None) -> tuple[NestPlan, IterCtx]:
        """Phase 1: the nests (alpha-equivalent reductions shared) and the iteration context;
        every access gets its root reference."""
        self.dims = asg.dims
        if self.block:
            self.dims = self._block_dims(asg)
        out_vars = tuple(v for v in asg.vars if v != UNIT)
        p = self._plan_shared(asg, out_vars, order)
        self.plan = p
        self.virtual = {rid: a for rid, (a, _) in p.spacc.items()}
        for inner, orig in p.renamed.items():
            self.dims[inner] = self.dims[orig]
        self.vval: dict[Reduce, str] = {}
        cx = IterCtx(
            self.virtual,
            p.bound,
            compressed_at=self._compressed_at,
            accumulated={rid: a2 for rid, (_, a2) in p.spacc.items()},
        )
        for a in p.access_nest:
            real = [v for v in a.vars if v != UNIT]  # size-1 dimensions all share the unit variable
            if len(set(real)) != len(real):
                raise UnsupportedError(f"tensor {a.tensor} is indexed on its diagonal; not supported", asg.loc)
        self.state = {a: _State(self.g.root(a.tensor)) for a in p.access_nest}
        self.crd_of: dict[str, str] = {}
        return p, cx

    def _iterate(self, asg: Assign, p: NestPlan, cx: IterCtx) -> dict[str, bool]:
        """Phase 2: every trie node's iteration (scans, joins), each access's reference carried
        down (repeated where the nest does not iterate it); returns which variables cover their
        full range."""
        expr = p.expr
        full_of: dict[str, bool] = {}
        # A root reduction whose skipped entries are not its identity visits its whole range, and so
        # must every variable iterated inside it (a spacc would otherwise skip them).
        dense_inside: set[str] = set()
        if isinstance(expr, Reduce):
            rn = list(p.root_nest)
            for rv in expr.vars:
                if absent(expr.body, rv, self.virtual) != identity(expr.kind):
                    dense_inside.update(rn[rn.index(rv) + 1 :])
        under: dict[tuple[str, ...], list[Access]] = {}
        for a in p.access_nest:
            n = p.access_nest[a]
            for k in range(1, len(n) + 1):
                under.setdefault(n[:k], []).append(a)
        for prefix in p.prefixes():
            v = prefix[-1]
            self.prefix = prefix[:-1]
            owner = p.owner[v]
            tree = iteration(owner, v, cx)
            if (
                owner is expr
                and v not in (expr.vars if isinstance(expr, Reduce) else ())
                and absent(expr, v, self.virtual) != 0.0
            ):
                tree = Full(tree)  # written outputs are 0 where absent
            elif v in dense_inside:
                tree = Full(tree)
            if tree is None:
                tree = Full(None)
            crd, refs, full = self._lower(tree, v)
            self.crd_of[v], full_of[v] = crd, full
            for key, payload in refs.items():
                if isinstance(key, Reduce):
                    self.vval[key] = payload
            sig = None
            for a in under.get(prefix, ()):
                st = self.state[a]
                if a in refs:
                    st.ref = refs[a]
                    st.level += 1
                else:
                    sig = sig or self._sig(crd)
                    absent_before = st.ref in self._maybe_absent
                    st.ref = self.g.repeat(st.ref, sig, tensor=a.tensor, index_var=v)
                    if absent_before:
                        self._maybe_absent.add(st.ref)
            if self.g.nodes > self.node_budget:
                raise UnsupportedError(
                    f"region {self.name}: the fused graph exceeds the node budget of "
                    f"{self.node_budget} nodes (at index variable {v}); split the region",
                    asg.loc,
                )
        return full_of

    def _root_reductions(self, asg: Assign, p: NestPlan, full_of: dict[str, bool]) -> tuple[str, dict[str, str]]:
        """Phase 3: the root's value, reduced over the root's reduced variables (innermost ones
        reduce, an outer one needs a sparse accumulator); returns the value stream and each
        output variable's coordinate stream."""
        expr = p.expr
        assert expr is not None  # a plan always holds its expression
        order = list(p.root_nest)
        red_kind, red_vars, body = (expr.kind, expr.vars, expr.body) if isinstance(expr, Reduce) else ("", (), expr)
        val = self._value(body, p.root_nest)
        out_crds = {v: self.crd_of[v] for v in order if v not in red_vars}
        pos = {v: i for i, v in enumerate(order)}
        for v in sorted(red_vars, key=lambda x: -pos[x]):
            after = [u for u in order[pos[v] + 1 :] if u not in red_vars]
            if not after:
                parent = [self.crd_of[order[pos[v] - 1]]] if pos[v] > 0 else []
                val = self._reduce(val, parent, red_kind, v)
            elif len(after) <= 2 and all(u not in red_vars for u in order[pos[v] + 1 :]):
                inner = [out_crds[u] for u in after]
                axes = self._minus(self.vaxes.get(val, ()), v)
                crds, val = self.g.spacc(
                    inner,
                    self.crd_of[v],
                    val,
                    kind=red_kind,
                    index_var=v,
                    axes=self._axes_attr(axes),
                    type=self._vtype(axes),
                )
                self.vaxes[val] = axes
                for u, c in zip(after, crds):
                    out_crds[u] = c
                    full_of[u] = False
            else:
                raise UnsupportedError(
                    f"reduction over {v} with {len(after)} inner variables needs a spacc of "
                    f"order {len(after)} (only 1 and 2 exist)",
                    asg.loc,
                )
        return val, out_crds

    def _write(
        self, asg: Assign, out_order: list[str], out_crds: dict[str, str], full_of: dict[str, bool], val: str
    ) -> None:
        """Phase 4: the writers, in the loop order, and the output's format (dense where the
        level covers its full range, or as declared)."""
        mode_of = {v: i for i, v in enumerate(asg.vars) if v != UNIT}
        unit_modes = [i for i, v in enumerate(asg.vars) if v == UNIT]
        kinds = ["dense" if full_of[v] else "compressed" for v in out_order]
        decl = self.declared.get(asg.out)
        if decl is not None:
            kinds, val = self._drop_zeros(asg, decl, out_order, out_crds, val)
        levels = []
        prev = None
        for lvl, v in enumerate(out_order):
            kind = kinds[lvl]
            levels.append(kind)
            self.g.write_crd(out_crds[v], prev, tensor=asg.out, mode=mode_of[v], level=lvl, format=kind)
            prev = out_crds[v]
        self.g.write_val(val, tensor=asg.out, axes=self._axes_attr(out_order))
        shape = tuple(1 if v == UNIT else self.dims[v] * max(1, self.block) for v in asg.vars)
        fmt = Format(
            tuple(levels) + ("dense",) * len(unit_modes), tuple(mode_of[v] for v in out_order) + tuple(unit_modes)
        )
        self.outputs[asg.out] = TensorInfo(asg.out, shape, fmt, "output")

    def _drop_zeros(self, asg: Assign, decl: Format, out_order: list[str], out_crds: dict, val: str):
        """A result declared sparse: its levels take the declared kinds (in the loop order they
        are written in), zeros are dropped from the innermost level (`val_drop`) and coordinates
        whose fiber became empty from every compressed level above it (`crd_drop`)."""
        if self.block:
            raise UnsupportedError(f"{asg.out}: a declared-sparse result inside a blocked region", asg.loc)
        if len(decl.levels) != len(asg.vars):
            raise UnsupportedError(f"{asg.out}: declared format {decl} does not fit its {len(asg.vars)} dimensions")
        kinds = [decl.levels[decl.mode_order.index(mode)] for mode in (asg.vars.index(v) for v in out_order)]
        want = tuple(v for v in (asg.vars[m] for m in decl.mode_order) if v != UNIT)
        if tuple(out_order) != want:
            self.notes.append(f"{asg.out}: declared {decl} but written in loop order {','.join(out_order)}")
        if not out_order:
            return kinds, val
        if kinds[-1] == "compressed":
            last = out_order[-1]
            out_crds[last], val = self.g.val_drop(out_crds[last], val)
        for lvl in reversed(range(len(out_order) - 1)):
            if kinds[lvl] == "compressed":
                u, w = out_order[lvl], out_order[lvl + 1]
                out_crds[u], out_crds[w] = self.g.crd_drop(out_crds[u], out_crds[w])
        return kinds, val

    def _value(self, e: Expr, ctx: tuple[str, ...]) -> str:
        """The value stream of `e`, aligned with the loop nest `ctx`."""
        if isinstance(e, Access):
            axes = tuple(self._orig(v) for v in storage_vars(e.vars, self._fmt(e).mode_order) if v != UNIT)
            return self._load(self.state[e].ref, e.tensor, axes)
        if isinstance(e, Const):
            raise UnsupportedError("a region output that is a constant is not supported")
        if isinstance(e, Reduce):
            p = self.plan
            body_nest, value_nest = p.body_nest[id(e)], p.value_nest[id(e)]
            if id(e) in p.spacc:
                val = self.vval[e]
                for u in ctx[len(value_nest) :]:
                    val = self._repeat_val(val, u)
                return val
            val = self._value(e.body, body_nest)
            for k in range(len(body_nest) - 1, len(value_nest) - 1, -1):
                parent = [self.crd_of[body_nest[k - 1]]] if k > 0 else []
                val = self._reduce(val, parent, e.kind, body_nest[k])
            if value_nest != ctx[: len(value_nest)]:
                raise UnsupportedError("internal: a reduction's value is consumed outside its loop nest")
            for u in ctx[len(value_nest) :]:  # a hoisted reduction: repeat its values along the rest
                val = self._repeat_val(val, u)
            return val
        if len(e.args) == 1:
            return self._alu([self._value(e.args[0], ctx)], e.op, 0.0)
        a, b = e.args
        if isinstance(b, Const):
            return self._alu([self._value(a, ctx)], e.op, float(b.value))
        if isinstance(a, Const):
            op = e.op if e.op in COMMUTATIVE else {"sub": "rsub", "div": "rdiv"}[e.op]
            return self._alu([self._value(b, ctx)], op, float(a.value))
        return self._alu([self._value(a, ctx), self._value(b, ctx)], e.op, 0.0)

    # -- value ops: scalar streams, or tiles with named axes in a blocked region ---------------------
    def _orig(self, v: str) -> str:
        """A variable renamed for a spacc is the same tile axis as the original."""
        return self.plan.renamed.get(v, v)

    def _minus(self, axes: tuple[str, ...], v: str) -> tuple[str, ...]:
        return tuple(x for x in axes if x != self._orig(v))

    def _vtype(self, axes: tuple[str, ...]) -> str:
        return tile_type(self.block, len(axes)) if self.block else VAL

    def _axes_attr(self, axes) -> list[str] | None:
        """A blocked value op's `axes` attribute (None: a scalar region has none)."""
        return [self._orig(v) for v in axes] if self.block else None

    def _typed(self, out: str, axes: tuple[str, ...]) -> str:
        self.vaxes[out] = axes
        return out

    def _load(self, ref: str, tensor: str, axes: tuple[str, ...]) -> str:
        out = self.g.load(ref, tensor=tensor, axes=self._axes_attr(axes), type=self._vtype(axes))
        return self._typed(out, axes)

    def _alu(self, vals: list[str], op: str, scalar: float) -> str:
        seen = [x for v in vals for x in self.vaxes.get(v, ())]
        axes = tuple(sorted(set(seen), key=seen.index))
        out = self.g.alu(*vals, op=op, scalar=scalar, axes=self._axes_attr(axes), type=self._vtype(axes))
        return self._typed(out, axes)

    def _reduce(self, val: str, parent: list[str], kind: str, v: str) -> str:
        axes = self._minus(self.vaxes.get(val, ()), v)
        out = self.g.reduce(val, *parent, kind=kind, index_var=v, axes=self._axes_attr(axes), type=self._vtype(axes))
        return self._typed(out, axes)

    def _repeat_val(self, val: str, u: str) -> str:
        out = self.g.repeat(val, self._sig(self.crd_of[u]), index_var=u)
        return self._typed(out, self.vaxes.get(val, ()))

    def _block_dims(self, asg: Assign) -> dict[str, int]:
        b, out = self.block, {}
        for v, d in asg.dims.items():
            if d != 1 and d % b:
                raise UnsupportedError(
                    f"region {self.name}: block size {b} does not divide index variable {v} "
                    f"(size {d}); choose a block size dividing every dimension",
                    asg.loc,
                )
            out[v] = d if d == 1 else d // b
        return out

    def entries(self) -> list[TensorEntry]:
        """The graph's tensors schema: every tensor it reads or writes."""
        out = []
        for t in list(self.tensors.values()) + list(self.outputs.values()):
            if self.block and t.fmt.block and t.fmt.block != self.block:
                raise UnsupportedError(
                    f"region {self.name}: tensor {t.name} is {t.fmt} but the region is blocked with size {self.block}"
                )
            out.append(
                TensorEntry(
                    t.name, t.role, tuple(t.shape), t.fmt.levels, t.fmt.mode_order, self.aliases.get(t.name), self.block
                )
            )
        return out

    def renamed(self, name: str, names: dict[str, str]) -> SamLowering | None:
        """This finished lowering as region `name` whose tensors are renamed (`names`: every
        tensor it reads or writes, old -> new), re-laid copies and notes included; None when a
        tensor is missing from `names`."""
        names = dict(names)
        for alias, base in self.aliases.items():  # a re-laid copy is named after its tensor
            if base not in names:
                return None
            names[alias] = names[base] + alias[len(base) :]
        if not (self.tensors.keys() | self.outputs.keys()) <= names.keys():
            return None
        out = SamLowering(name, {}, self.node_budget, self.block)
        out.tensors = {names[n]: replace(t, name=names[n]) for n, t in self.tensors.items()}
        out.outputs = {names[n]: replace(t, name=names[n]) for n, t in self.outputs.items()}
        out.aliases = {names[a]: names[b] for a, b in self.aliases.items()}
        out.g = self.g.renamed(names)
        out.declared = self.declared
        out.copy_of, out.renames = self.name, names
        if self.notes:
            words = {**names, self.name: name}
            pattern = re.compile(
                r"(?<![\w.@])(" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + r")(?![\w.@])"
            )
            out.notes = [pattern.sub(lambda m: words[m.group(1)], n) for n in self.notes]
        return out

    def text(self) -> str:
        """The region's sam graph as generic-form MLIR text."""
        return self.g.graph(self.name, self.entries())

    def typed(self) -> SamGraph:
        """The region's sam graph as `read_graph` reads `text()` back (no printing, no parsing)."""
        g = self.g.typed(self.name, self.entries())
        if self.copy_of is not None:
            g.renamed_from = (self.copy_of, self.renames)
        return g
