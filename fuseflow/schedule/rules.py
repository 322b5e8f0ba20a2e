"""Schedules as data: ordered rules that say which ops fuse, kept outside the model
(docs/architecture.md, "Design: planning").

A `Schedule` is a list of `Rule`s. A rule `Match`es PyTorch-level ops (what ``prog.ops()``
lists) by op kind, by module class, by module path or by a sequence of these, and either fuses
them (``tag="fuse"``, grouped ``by`` one of `BY`), forces a boundary (``"materialize"``: the op's
result is written to memory and its consumers start a new region; ``"no-fuse"``: the op is a
region of its own), or only attaches per-region options (``order=``, ``par=``, ``block=``). The
first fusing rule that matches an op decides its region; an op no fusing rule matches is a
region of its own (``unfused``). The built-in schedules are rule sets (`BUILTIN`).

A schedule prints as Python (``repr``) and as JSON (`to_json`), and loads from either
(`load`), so a plan found by ``schedule="auto"`` can be saved, edited and reused.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fuseflow.errors import FuseflowError, UnsupportedError

TAGS = ("fuse", "materialize", "no-fuse")
BY = ("all", "op", "linalg-op", "layer", "module", "match")
"""How a fusing rule groups what it matches: ``all`` one region (named `Rule.name`), ``op`` one
per PyTorch op, ``linalg-op`` one per linalg op, ``layer`` one per top-level layer (the ``layer``
schedule), ``module`` one per instance of the matched module, ``match`` one per occurrence of a
sequence; ``module:Class`` one per enclosing instance of ``Class`` (say, per decoder block)."""


class ScheduleWarning(UserWarning):
    """A schedule rule that matches nothing (the schedule still applies)."""


@dataclass(frozen=True)
class Match:
    """Which PyTorch-level ops a rule selects; every given field must hold (an empty Match selects
    every op).

    - `kind`: regex, full match on the op kind (the FX node name without its ``_N`` suffix:
      ``linear``, ``matmul``, ``softmax``, ``layer_norm``, ``relu``, ...);
    - `module_class`: the class name (``LayerNorm`` or ``nn.LayerNorm``) of the op's module or of
      a module enclosing it;
    - `path`: regex, full match on the op's module path (``""`` for the top-level forward);
    - `index`: op indices of ``prog.ops()``;
    - `seq`: consecutive ops (in ``prog.ops()`` order) matching these in turn; each occurrence
      is one match (``by="match"``: one region each).
    """

    kind: str | None = None
    module_class: str | None = None
    path: str | None = None
    index: tuple[int, ...] = ()
    seq: tuple[Match, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "index", tuple(self.index))
        object.__setattr__(self, "seq", tuple(m if isinstance(m, Match) else Match(**m) for m in self.seq))
        for what in ("kind", "path"):
            pattern = getattr(self, what)
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise FuseflowError(f"schedule: Match({what}={pattern!r}) is not a valid regex: {e}") from None

    def selects(self, op: OpView) -> bool:
        """Whether one op satisfies this match's own fields (`seq` is matched by `Resolver`)."""
        if self.kind is not None and not re.fullmatch(self.kind, op.kind):
            return False
        if self.path is not None and not re.fullmatch(self.path, op.path):
            return False
        if self.index and op.index not in self.index:
            return False
        return self.module_class is None or op.instance_of(self.module_class) is not None

    def __repr__(self) -> str:
        return _repr(self)


@dataclass(frozen=True)
class Rule:
    """One schedule rule: what it matches (any of `match`), what it does, and region options.

    `order`: the dataflow order of the regions it covers (``auto``, ``plain``, ``i,k,j``);
    `par`: ``"i:4"`` runs those regions' work under index variable i in 4 lanes; `block`: lower
    them over b x b blocks.
    """

    match: Match | tuple[Match, ...] = Match()
    tag: str = "fuse"
    by: str = "all"
    name: str | None = None
    order: str | None = None
    par: str | None = None
    block: int | None = None

    def __post_init__(self):
        m = self.match
        ms = (m,) if isinstance(m, Match) else tuple(x if isinstance(x, Match) else Match(**x) for x in m)
        object.__setattr__(self, "match", ms)
        if self.tag not in TAGS:
            raise FuseflowError(f"schedule: unknown rule tag {self.tag!r}; expected one of {', '.join(TAGS)}")
        if self.by not in BY and not self.by.startswith("module:"):
            raise FuseflowError(f"schedule: unknown by={self.by!r}; expected one of {', '.join(BY)} or module:Class")
        if self.par is not None and not re.fullmatch(r"[\w,]+:\d+", self.par):
            raise FuseflowError(f"schedule: par={self.par!r} must be 'level:factor', e.g. 'i:4'")
        if self.block is not None and (not isinstance(self.block, int) or self.block < 1):
            raise FuseflowError(f"schedule: block={self.block!r} must be a positive integer")

    @property
    def alternatives(self) -> tuple[Match, ...]:
        """The Matches this rule fires on (`match`, normalised to a tuple by __post_init__)."""
        m = self.match
        return m if isinstance(m, tuple) else (m,)

    @property
    def options(self) -> dict[str, Any]:
        """The per-region options this rule sets (order, par, block)."""
        return {k: getattr(self, k) for k in ("order", "par", "block") if getattr(self, k) is not None}

    def __repr__(self) -> str:
        return _repr(self, unwrap_match=True)


def _repr(obj, unwrap_match: bool = False) -> str:
    """Constructor call with only the non-default fields (valid Python under `fuseflow.*`)."""
    parts = []
    for f in fields(obj):
        v = getattr(obj, f.name)
        default = f.default if f.default is not field else None
        if f.name == "match" and unwrap_match:
            if v == (Match(),):
                continue
            v = v[0] if len(v) == 1 else v
        elif v == default or (f.name in ("index", "seq") and not v):
            continue
        parts.append(f"{f.name}={v!r}")
    return f"{type(obj).__name__}({', '.join(parts)})"


class Schedule:
    """A fusion schedule: ordered rules (`Schedule.rules(...)`), or explicit groups.

    ``Schedule([["conv1"], ["conv2", 7]], names=[...])``: each group (module paths, covering the
    module and its children, and/or op indices of ``prog.ops()``) is one region; ops no group
    covers stay one region per PyTorch op. That is shorthand for one ``fuse`` rule per group.
    """

    def __init__(
        self,
        groups: Sequence[Sequence[str | int]] | None = None,
        names: Sequence[str] | None = None,
        *,
        rules: Sequence[Rule] | None = None,
        label: str | None = None,
    ):
        self.groups = [list(g) for g in groups] if groups is not None else None
        self.names = list(names) if names else None
        self.label = label
        if groups is not None:
            if not self.groups:
                raise UnsupportedError("a Schedule needs at least one group")
            self.ruleset = tuple(_group_rules(self.groups, self.names))
        else:
            self.ruleset = tuple(rules or ())

    @classmethod
    def rules(cls, *rules: Rule, label: str | None = None) -> Schedule:
        """A schedule from ordered rules (the first fusing rule matching an op decides its region)."""
        return cls(rules=rules, label=label)

    @classmethod
    def auto(cls, *rules: Rule) -> Schedule:
        """``schedule="auto"`` under constraints: the planner keeps ``materialize`` and ``no-fuse``
        boundaries and never separates what a ``fuse`` rule (``by="all"``) groups."""
        return cls(rules=rules, label="auto")

    @property
    def is_auto(self) -> bool:
        """Whether this is `Schedule.auto(...)`: rules that constrain the planner."""
        return self.label == "auto"

    @property
    def name(self) -> str:
        """What reports call it: a built-in's name, else ``custom``."""
        return self.label or "custom"

    def __eq__(self, other) -> bool:
        return isinstance(other, Schedule) and self.ruleset == other.ruleset

    def __hash__(self) -> int:
        return hash(self.ruleset)

    def __repr__(self) -> str:
        body = ",\n    ".join(repr(r) for r in self.ruleset)
        lab = f", label={self.label!r}" if self.label else ""
        return f"Schedule.rules(\n    {body}{lab}\n)" if body else f"Schedule.rules({lab.lstrip(', ')})"

    def to_json(self) -> dict[str, Any]:
        """The schedule as JSON (`load` reads it back)."""

        def match_json(m: Match) -> dict[str, Any]:
            d: dict[str, Any] = {k: getattr(m, k) for k in ("kind", "module_class", "path") if getattr(m, k)}
            if m.index:
                d["index"] = list(m.index)
            if m.seq:
                d["seq"] = [match_json(x) for x in m.seq]
            return d

        rules = []
        for r in self.ruleset:
            d: dict[str, Any] = {"match": [match_json(m) for m in r.alternatives]}
            if r.tag != "fuse":
                d["tag"] = r.tag
            if r.by != "all":
                d["by"] = r.by
            if r.name:
                d["name"] = r.name
            d.update(r.options)
            rules.append(d)
        out: dict[str, Any] = {"rules": rules}
        if self.label:
            out["label"] = self.label
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Schedule:
        """A schedule from `to_json`'s form; a malformed one is refused naming the field."""
        if not isinstance(d, dict) or not isinstance(d.get("rules"), list):
            raise FuseflowError('schedule JSON must be an object with a "rules" list')
        rules = []
        for i, r in enumerate(d["rules"]):
            try:
                rules.append(Rule(**{**r, "match": tuple(Match(**m) for m in r.get("match", [{}]))}))
            except TypeError as e:
                raise FuseflowError(f"schedule JSON rule {i}: {e}") from None
        return cls.rules(*rules, label=d.get("label"))

    def save(self, path: str | Path) -> None:
        """Write the schedule as JSON (``.json``) or as Python (``.py``, defining ``schedule``)."""
        p = Path(path)
        if p.suffix == ".py":
            p.write_text(f"from fuseflow import Match, Rule, Schedule\n\nschedule = {self!r}\n")
        else:
            p.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    @staticmethod
    def load(path: str | Path) -> Schedule:
        """Read a schedule written by `save` (or by hand): JSON, or Python defining ``schedule``."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise FuseflowError(f"cannot read schedule {p}: {e.strerror}") from None
        if p.suffix == ".py":
            scope: dict[str, Any] = {"Match": Match, "Rule": Rule, "Schedule": Schedule, "__name__": __name__}
            exec(compile(text, str(p), "exec"), scope)  # the user's own schedule file
            if not isinstance(scope.get("schedule"), Schedule):
                raise FuseflowError(f"{p}: defines no `schedule = Schedule...`")
            return scope["schedule"]
        try:
            return Schedule.from_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise FuseflowError(f"{p}: invalid JSON: {e}") from None


def _group_rules(groups: list[list[str | int]], names: list[str] | None) -> list[Rule]:
    out = []
    for gi, g in enumerate(groups):
        name = names[gi] if names and gi < len(names) else ("+".join(str(x) for x in g) or f"g{gi}")
        ms = [Match(path=re.escape(x) + r"(\..*)?") for x in g if isinstance(x, str)]
        idx = tuple(x for x in g if isinstance(x, int))
        if idx:
            ms.append(Match(index=idx))
        out.append(Rule(tuple(ms), name=name))
    return out


BUILTIN: dict[str, Schedule] = {
    "unfused": Schedule.rules(label="unfused"),
    "layer": Schedule.rules(Rule(by="layer"), label="layer"),
    "full": Schedule.rules(Rule(name="full"), label="full"),
    "op": Schedule.rules(Rule(by="linalg-op"), label="op"),
}
"""The built-in schedules as rule sets: one region per PyTorch op, per top-level layer, one for
everything, one per linalg op."""


def builtin_name(schedule: Schedule) -> str | None:
    """The built-in name of a schedule equal to one (None for any other)."""
    return next((n for n, s in BUILTIN.items() if s == schedule), None)


def as_schedule(schedule: str | Schedule) -> Schedule:
    """A built-in name, a schedule file (.json/.py), or a Schedule."""
    if isinstance(schedule, Schedule):
        return schedule
    if schedule in BUILTIN:
        return BUILTIN[schedule]
    if schedule.endswith((".json", ".py")):
        return Schedule.load(schedule)
    raise UnsupportedError(
        f"unknown schedule {schedule!r}; expected {', '.join(BUILTIN)}, auto, a schedule file (.json/.py) or a Schedule"
    )


# --- resolution --------------------------------------------------------------------------------
@dataclass
class OpView:
    """One PyTorch-level op as rules see it."""

    index: int
    node: str
    path: str
    classes: dict[str, str]  # module path -> class name ("" is the model itself)

    @property
    def kind(self) -> str:
        """The op kind: the FX node name without its `_N` suffix."""
        return re.sub(r"_\d+$", "", self.node)

    def enclosing(self) -> list[str]:
        """Module paths from the op's own module out to the model ("")."""
        parts = self.path.split(".") if self.path else []
        return [".".join(parts[:k]) for k in range(len(parts), -1, -1)]

    def instance_of(self, cls: str) -> str | None:
        """Path of the nearest module (own or enclosing) whose class is `cls` (``nn.`` optional)."""
        want = cls.split(".")[-1]
        return next((p for p in self.enclosing() if self.classes.get(p) == want), None)


@dataclass
class Resolution:
    """Region name per compute op, per-region options, and the rules that matched nothing."""

    names: list[str]
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    unmatched: list[Rule] = field(default_factory=list)


def matches(rule: Rule, views: list[OpView]) -> tuple[set[int], dict[int, int]]:
    """The PyTorch-level ops `rule` matches, and for sequences each op's occurrence number."""
    hit: set[int] = set()
    occ: dict[int, int] = {}
    for m in rule.alternatives:
        if m.seq:
            k, n = 0, 0
            while k + len(m.seq) <= len(views):
                if all(s.selects(views[k + j]) for j, s in enumerate(m.seq)) and m.selects(views[k]):
                    for j in range(len(m.seq)):
                        hit.add(k + j)
                        occ.setdefault(k + j, n)
                    k, n = k + len(m.seq), n + 1
                else:
                    k += 1
        else:
            hit.update(v.index for v in views if m.selects(v))
    return hit, occ


def resolve(
    schedule: Schedule,
    ops: list,
    info_of: list[int],
    views: list[OpView],
    linalg_name: list[str],
    producers: list[list[int]],
    layer_of,
    strict_groups: bool = False,
    materialized: frozenset[int] = frozenset(),
    ends_region: frozenset[int] = frozenset(),
) -> Resolution:
    """Apply `schedule` to the compute ops (`ops`, in program order).

    `info_of[i]`: the PyTorch-level op of compute op i; `views`: the PyTorch-level ops;
    `linalg_name[i]`: the ``op`` schedule's name for compute op i; `producers[i]`: earlier
    compute ops it reads; `layer_of(path)`: the ``layer`` schedule's region of a module path;
    `materialized`: PyTorch-level ops whose result must go to memory whatever the rules say
    (a result declared sparse is written in its format); `ends_region`: compute ops whose
    result must, even inside one PyTorch-level op (a GRU cell's gates are slices of one matmul).
    """
    rules = list(schedule.ruleset)
    found = [matches(r, views) for r in rules]
    matched = [hit for hit, _ in found]
    occurrence = [occ for _, occ in found]
    if strict_groups:
        _check_groups(schedule, views)
    unmatched = [r for r, hit in zip(rules, matched) if not hit]
    for r in unmatched:
        warnings.warn(ScheduleWarning(f"schedule rule {r!r} matches no op"), stacklevel=3)
    fusing = [j for j, r in enumerate(rules) if r.tag == "fuse"]
    no_fuse = [j for j, r in enumerate(rules) if r.tag == "no-fuse"]
    materialize = set(materialized).union(*(matched[j] for j, r in enumerate(rules) if r.tag == "materialize"))
    names: list[str] = []
    for i in range(len(ops)):
        k = info_of[i]
        v = views[k]
        own = f"r{k}_{v.node}"
        j = next((j for j in fusing if k in matched[j]), None)
        nf = next((x for x in no_fuse if k in matched[x]), None)
        if j is not None and nf is not None and rules[j].by not in ("op", "linalg-op") and rules[j].match != (Match(),):
            raise FuseflowError(
                f"schedule: conflicting rules: {rules[j]!r} fuses {v.node} but {rules[nf]!r} forbids it"
            )
        if nf is not None or j is None:
            names.append(own)
            continue
        r = rules[j]
        if r.by == "all":
            names.append(r.name or f"rule{j}")
        elif r.by == "op":
            names.append(own)
        elif r.by == "linalg-op":
            names.append(linalg_name[i])
        elif r.by == "layer":
            if v.path:
                names.append(layer_of(v.path))
            else:  # an op in the parent's forward joins its producer's region
                prods = [names[p] for p in producers[i]]
                names.append(prods[0] if prods else "main")
        elif r.by == "match":
            names.append(f"{r.name or 'match'}{occurrence[j].get(k, 0)}")
        else:  # module, module:Class
            if r.by == "module":
                cls = next((m.module_class for m in r.alternatives if m.module_class), None)
                inst = v.instance_of(cls) if cls else v.path
            else:
                inst = v.instance_of(r.by.split(":", 1)[1])
            inst = inst or ""
            base = r.name or ""
            names.append(".".join(x for x in (inst, base) if x) or "main")
    alone = set().union(*(matched[j] for j in no_fuse)) if no_fuse else set()
    if materialize or alone or ends_region:
        names = _split_at(names, info_of, producers, materialize, alone, ends_region)
    options = _region_options(rules, matched, info_of, names)
    return Resolution(names, {r: o for r, o in options.items() if o}, unmatched)


def _region_options(
    rules: list[Rule], matched: list[set[int]], info_of: list[int], names: list[str]
) -> dict[str, dict[str, Any]]:
    """Each region's options (``order``, ``block``, ``par``) from the rules matching its ops;
    two rules giving one region different values are refused, naming both."""
    options: dict[str, dict[str, Any]] = {}
    given_by: dict[tuple[str, str], Rule] = {}
    for j, r in enumerate(rules):
        for opt, value in r.options.items():
            for i, region in enumerate(names):
                if info_of[i] not in matched[j]:
                    continue
                prev = options.setdefault(region, {}).get(opt)
                if prev is not None and prev != value:
                    raise FuseflowError(
                        f"schedule: conflicting rules for region {region}: {given_by[(region, opt)]!r} sets "
                        f"{opt}={prev!r} but {r!r} sets {opt}={value!r}"
                    )
                options[region][opt] = value
                given_by[(region, opt)] = r
    return options


def _split_at(
    names: list[str],
    info_of: list[int],
    producers: list[list[int]],
    materialize: set[int],
    alone: set[int],
    ends_region: frozenset[int] = frozenset(),
) -> list[str]:
    """Boundaries: an op of its region that reads a materialized op's result (transitively), or an
    op of any region that reads a no-fuse op's result, moves to a later piece of its region
    (``name.1``, ``name.2``: one more per boundary it depends on). Every dependence then runs from a
    piece to the same or a later piece, so boundaries never create a cycle."""
    n = len(names)
    deps = [0] * n  # bitset of the compute ops each one reads, transitively
    for i in range(n):
        for p in producers[i]:
            deps[i] |= deps[p] | (1 << p)
    points = [i for i in range(n) if info_of[i] in materialize | alone]
    inner = [p for p in ends_region if info_of[p] not in alone]
    out = []
    for i in range(n):
        if info_of[i] in alone:  # a region of its own already
            out.append(names[i])
            continue
        crossed: set = {
            info_of[p]
            for p in points
            if deps[i] >> p & 1 and info_of[p] != info_of[i] and (info_of[p] in alone or names[p] == names[i])
        }
        # a boundary inside i's own PyTorch-level op: one more piece per such op it reads
        crossed |= {("op", p) for p in inner if deps[i] >> p & 1 and info_of[p] == info_of[i] and names[p] == names[i]}
        count = len(crossed)
        out.append(f"{names[i]}.{count}" if count else names[i])
    return out


def _check_groups(schedule: Schedule, views: list[OpView]) -> None:
    """Explicit groups name real paths and indices (errors, as before rules existed)."""
    for g in schedule.groups or ():
        for item in g:
            if isinstance(item, int):
                if not 0 <= item < len(views):
                    raise UnsupportedError(f"Schedule names op index {item}, but prog.ops() lists {len(views)} ops")
            elif not any(v.path == item or v.path.startswith(item + ".") for v in views):
                known = sorted({v.path for v in views if v.path})
                raise UnsupportedError(
                    f"Schedule names module path {item!r}, which no op comes from; known: {', '.join(known) or 'none'}"
                )
