"""How a stream of references walks the memory lines of the array it indexes (the cycle model's
memory rule, docs/cycle-model.md "Memory").

The simulator keeps one line buffer per array and node (node.cpp `request_lines`): a read of
the line read last costs nothing. A `Walk` summarises a reference stream by the fractions of
its tokens that repeat, jump, stay within the line or step on, and derives the walk of the
positions a level visits under it.
"""

from __future__ import annotations

from typing import NamedTuple

LINE_ELEMS = 16.0
"""4-byte elements per 64-byte memory line, the unit `Walk.walked` judges re-walks by."""


class Walk(NamedTuple):
    """How a stream of references walks the array it indexes, for the memory model's line buffer
    (one line per array and node, node.cpp `request_lines`), as fractions of its data tokens:
    `same` repeat the previous reference, `jump` land elsewhere, `free` move within the line
    just read (a short fiber walked again), and the rest step `step` elements on."""

    same: float = 0.0
    jump: float = 1.0
    free: float = 0.0
    step: float = 1.0
    inline: float = 0.0
    """Tokens that step on inside a fiber lying in one line (an aligned short row): no new
    line, whether the fiber was reached by a jump or by moving on (unlike `free`, not a re-walk)."""

    def line_changes(self, per_line: float) -> float:
        """Expected fraction of tokens that need a new line, `per_line` elements per line."""
        if per_line <= 1.0:
            return 1.0 - self.same
        rest = max(1.0 - self.jump - self.same - self.free - self.inline, 0.0)
        return min(self.jump + rest * min(self.step / per_line, 1.0), 1.0)

    def walked(self, refs: float, fiber: float, span: float, aligned: bool = False) -> Walk:
        """The walk of the positions a level visits under `refs` references walked this way:
        `fiber` positions per reference spread over `span` consecutive positions (`aligned`:
        each fiber starts a line, a dense row whose extent divides the line). A repeated
        reference walks its fiber again, within the line it just read when the fiber fits one;
        the next reference continues where the last fiber ended; any other jumps."""
        n = refs * fiber
        starts = min(refs, n)
        if starts <= 0.0:
            return Walk()
        inner = span / max(fiber, 1.0)
        # the chance a fiber lies in one line: certain for an aligned short row, else by offset
        one_line = 1.0 if span <= LINE_ELEMS and aligned else max(1.0 - max(span - 1.0, 0.0) / LINE_ELEMS, 0.0)
        onward = max(1.0 - self.jump - self.same, 0.0)
        free = starts * self.same * one_line * (n / starts)
        jumps = starts * (self.jump + self.same * (1.0 - one_line))
        within = n - free - jumps - starts * onward  # steps inside a fiber
        if aligned and span <= LINE_ELEMS:
            # each fiber is one line's share (an aligned short row): the steps inside it change no
            # line, even after a jump to the fiber, and moving on moves a whole span (a new line
            # when the row fills one; a level walked below then starts its fibers afresh)
            return Walk.of(n, 0.0, jumps, free, [(starts * onward, max(self.step, 1.0) * span)], inline=within)
        return Walk.of(
            n,
            0.0,
            jumps,
            free,
            [
                (starts * onward, self.step * span - max(fiber - 1.0, 0.0) * inner),  # last of one to first of next
                (within, inner),
            ],
        )

    def thinned(self, thin: float) -> Walk:
        """The walk of the references that survive a join keeping one in `thin`: fiber starts
        (jumps) survive, repeats stay repeats, steps grow `thin`-fold."""
        n = 1.0 / thin
        same = self.same / thin
        jumps = min(self.jump, max(n - same, 0.0))
        free = min(self.free / thin, max(n - same - jumps, 0.0))
        inline = min(self.inline / thin, max(n - same - jumps - free, 0.0))
        rest = n - same - jumps - free - inline
        return Walk.of(n, same, jumps, free, [(rest, self.step * thin)], inline=inline)

    def dealt(self, lanes: float) -> Walk:
        """The walk one lane sees when a fork deals the references round robin to `lanes` lanes:
        a run of r repeats of one reference leaves each lane about r / lanes of it, so a lane's
        share of new references is `lanes` times the stream's (at most all of them), made up as
        the stream's are, and where runs are shorter than the lanes a lane's steps skip the
        others' (`lanes` times longer)."""
        if lanes <= 1.0:
            return self
        changes = 1.0 - self.same
        if changes <= 0.0:
            return self
        new = min(changes * lanes, 1.0)
        scale = new / changes
        return Walk(
            1.0 - new,
            self.jump * scale,
            self.free * scale,
            self.step * max(1.0, changes * lanes),
            self.inline * scale,
        )

    def repeated(self, copies: float) -> Walk:
        """Each reference `copies` times in a row (a repeat node)."""
        return Walk(
            1.0 - (1.0 - self.same) / copies, self.jump / copies, self.free / copies, self.step, self.inline / copies
        )

    @staticmethod
    def of(
        n: float, same: float, jumps: float, free: float, steps: list[tuple[float, float]], inline: float = 0.0
    ) -> Walk:
        """From token counts; a step of a line or more is a jump (it changes line, and a level
        walked under it does not continue where the last fiber ended). `inline` tokens stay in
        the line they are in and count in neither the steps nor `free`."""
        total = 0.0
        moving = 0.0
        for count, step in steps:
            if count <= 0.0:
                continue
            if step >= LINE_ELEMS:
                jumps += count
            else:
                total += count * max(step, 1.0)
                moving += count
        n = max(n, 1e-9)
        return Walk(
            min(same / n, 1.0),
            min(jumps / n, 1.0),
            min(free / n, 1.0),
            total / moving if moving else 1.0,
            min(inline / n, 1.0),
        )


UNKNOWN_WALK = Walk()
