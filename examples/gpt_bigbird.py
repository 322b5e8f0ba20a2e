"""A GPT-3-style decoder block with BigBird block-sparse attention.

LayerNorm -> per-head Q/K/V -> masked softmax attention (BigBird mask, declared sparse) ->
output projection + residual -> LayerNorm -> FFN (GELU, tanh form) + residual. Written as plain
PyTorch: `masked_fill(mask == 0, -inf)` then `softmax`; fuseflow recognises the masked softmax
and iterates only the mask's nonzeros. Heads are separate modules whose output projections are
summed (equal to concatenating heads and one projection, without a reshape).

Small default: seq 256, d_model 128, 2 heads, FFN 512, block 16. GPT-3 Small by flag:
`build(gpt3_small=True)` (seq 1024, d_model 768, 12 heads, FFN 3072, block 64).
"""

from __future__ import annotations

import math

import torch

from fuseflow.models import bigbird_mask  # noqa: F401  (gpt_bigbird.bigbird_mask, as before)


class Head(torch.nn.Module):
    def __init__(self, d_model: int, d_head: int):
        super().__init__()
        self.q = torch.nn.Linear(d_model, d_head)
        self.k = torch.nn.Linear(d_model, d_head)
        self.v = torch.nn.Linear(d_model, d_head)
        self.o = torch.nn.Linear(d_head, d_model, bias=False)
        self.scale = 1.0 / math.sqrt(d_head)

    def forward(self, x, mask):
        s = (self.q(x) @ self.k(x).transpose(0, 1)) * self.scale
        p = torch.softmax(s.masked_fill(mask == 0, float("-inf")), dim=-1)
        return self.o(p @ self.v(x))


class Attention(torch.nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = torch.nn.ModuleList(Head(d_model, d_model // heads) for _ in range(heads))
        self.bias = torch.nn.Parameter(torch.zeros(d_model))

    def forward(self, x, mask):
        out = self.heads[0](x, mask)
        for h in self.heads[1:]:
            out = out + h(x, mask)
        return out + self.bias


class FFN(torch.nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.up = torch.nn.Linear(d_model, d_ff)
        self.down = torch.nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x), approximate="tanh"))


class DecoderBlock(torch.nn.Module):
    def __init__(self, d_model: int, heads: int, d_ff: int):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d_model)
        self.attn = Attention(d_model, heads)
        self.ln2 = torch.nn.LayerNorm(d_model)
        self.ffn = FFN(d_model, d_ff)

    def forward(self, x, mask):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.ffn(self.ln2(x))


class Decoder(torch.nn.Module):
    """Several decoder blocks in sequence (GPT-3 stacks 12)."""

    def __init__(self, blocks):
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)

    def forward(self, x, mask):
        for b in self.blocks:
            x = b(x, mask)
        return x


def build(
    seq: int = 256,
    d_model: int = 128,
    heads: int = 2,
    d_ff: int = 512,
    block: int = 16,
    gpt3_small: bool = False,
    seed: int = 0,
    layers: int = 1,
):
    if gpt3_small:
        seq, d_model, heads, d_ff, block = 1024, 768, 12, 3072, 64
    torch.manual_seed(seed)
    blocks = [DecoderBlock(d_model, heads, d_ff) for _ in range(layers)]
    model = (blocks[0] if layers == 1 else Decoder(blocks)).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(0, 0.02)
    x = torch.randn(seq, d_model)
    return model, (x, bigbird_mask(seq, block, seed=seed)), {"mask": "csr"}


def transformer_schedule():
    """FuseFlow's transformer configuration as rules, for any number of decoder blocks: Q/K/V stay
    in memory and each block's regions are (LN + QKV) | (masked MHA of every head) |
    (out-projections + residual + LN + FFN + residual)."""
    from fuseflow import Match, Rule, Schedule

    per_block = "module:DecoderBlock"
    return Schedule.rules(
        Rule(Match(path=r"(.*\.)?(ln1|attn\.heads\.\d+\.[qkv])"), name="ln_qkv", by=per_block),
        Rule(Match(path=r"(.*\.)?attn\.heads\.\d+"), name="mha", by=per_block),
        Rule(name="proj_ffn", by=per_block),
    )


def fuseflow_full_schedule(layers: int):
    """FuseFlow's fully fused GPT as rules: LN + QKV of the first block (comp1); per block its
    masked MHA (attn); then the out-projections, residuals, LN and FFN of block d fused with the
    LN + QKV of block d + 1 (comp3), the last block's without (L attn + L comp3 + comp1 regions).
    Q, K and V are written to memory, so the attention of each block starts a region."""
    from fuseflow import Match, Rule, Schedule

    qkv = r"(ln1|attn\.heads\.\d+\.[qkv])"
    rules = [Rule(Match(path=rf"blocks\.0\.{qkv}"), name="comp1")]
    for d in range(layers):
        nxt = rf"|blocks\.{d + 1}\.{qkv}" if d + 1 < layers else ""
        rules.append(Rule(Match(path=rf"blocks\.{d}\.attn\.heads\.\d+"), name=f"attn{d}"))
        rules.append(Rule(Match(path=rf"blocks\.{d}(\..*)?{nxt}"), name=f"comp3_{d}"))
    rules.append(Rule(name="tail"))
    return Schedule.rules(*rules)


def schedules(op_infos=None) -> dict:
    """Named schedules for studies: FuseFlow's transformer split (`transformer_schedule`)."""
    return {"fuseflow": transformer_schedule()}
