"""A model with its parameters and buffers as inputs: the form both exports trace.

`torch.export` of the user's model (`export.py`) and of a message-passing model's rewrite
(`message_passing.py`) both need the model's state as explicit graph inputs, so that sparse
and dense parameters are bound by name like any input.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class Lifted(torch.nn.Module):
    """Calls `model` with its parameters and buffers passed as extra positional inputs."""

    def __init__(self, model: torch.nn.Module, n_args: int, state_names: Sequence[str]):
        super().__init__()
        self.model = model
        self.n_args = n_args
        self.state_names = list(state_names)

    def forward(self, *flat):
        """`model(*args)` with `flat` = args + the state's tensors in `state_names` order."""
        args, state = flat[: self.n_args], flat[self.n_args :]
        return torch.func.functional_call(self.model, dict(zip(self.state_names, state)), args)
