"""The Feedback Transformer (Fan et al., section 3.3), as the paper writes it, in plain autograd.

This file is the model. FeedbackCore (core.py) is the same model run fast: it inherits these
parameters and replaces `forward` with steps outside autograd and a backward written by hand
(step.py), compiled to C++ where a compiler is (compiled.py). Every fast path
is tested equal to `FeedbackReference.forward` (tests/cores/test_feedback_paths.py).

At step t the input x_t is embedded, x_t^0, and goes up the L layers. Layer l attends to the
memory of the last S steps, m_{t-S} .. m_{t-1}, the same for every layer; the step itself enters
only through the residual path:

    x_t^l = Layer_l(x_t^{l-1}, keys and values of m_{t-S} .. m_{t-1})
    m_t   = sum_{l=0..L} softmax(w)_l x_t^l          w: L + 1 learned scalars
    y_t   = norm(x_t^L)

so even the lowest layer of step t reads the highest representations of the past, and the
steps must run one after another. Keys and values are projections of the memory, one projection
shared by all layers (the paper's choice, `shared_kv`) or one per layer. The memory holds raw
m_t; under pre-norm it is normalised as it is read (unless `read_norm` is off). A step sees only the memory of its own
episode: an episode start (`first`) hides everything before it, and a step that sees nothing
reads a zero vector from the attention.

Each layer is an AttentionBlock (agents/cores/attention.py, the layer the Transformer core runs
too), called here with one query step: multi-head attention with a learned position embedding
per distance added to the keys (relative positions, shared by the heads), then the
feed-forward sublayer (or, with `persistent` vectors, N learned keys and values per head join
the attention in its place: Sukhbaatar et al.); pre-norm or post-norm; dropout on the attention
weights and on the ReLU activations, a call's masks drawn before its steps (step_masks, as
agents/cores/dropout.py says), so the fast paths drop the same entries.

Keeping the cue (options; the paper's model, all off, is the default). Trained in RL, the paper's
memory forgets: a step's m_t keeps the part of m_{t-1} that depends on the episode's cue only
through the attention's reread, and the share that survives a step (the retention of
experiments/memory_probes.py) falls under training (0.85-0.89 fresh, 0.80-0.81 trained at span
16 on the recall task: 0.8^64 ~ 1e-6 of the cue is left after 64 steps). Three ways to keep it:

- `carry="gate"`: a gated carry, m_t = g_t * m_{t-1} + (1 - g_t) * u_t, where u_t = sum_l
  softmax(w)_l x_t^l is the paper's m_t and g_t = sigmoid(W_g x_t^0 + b_g) (per channel, from
  the step's embedded input, so a call's gates are one product over its steps, as its
  embeddings are, and the fast steps would take them as inputs). What survives a step is then at
  least g_t of the cue's part of m_{t-1}, whatever the attention does, and d m_t / d m_{t-1} =
  diag(g_t) + (the reread's share): a gradient path to the cue's step that no weight has to
  learn. b_g starts as chrono sets an LSTM's forget gate (Tallec & Ollivier 2018): log(u),
  u ~ U(1, keep_t_max - 1) per channel, so channel i keeps about 1 + u_i steps and a fresh
  memory's retention starts near 1: training must choose to forget. m_t is a convex sum of the
  u's, so the carry cannot run away.
- `keep_slot=True`: the paper's first-in first-out memory unchanged, and beside it one kept
  vector k_t = a_t * k_{t-1} + (1 - a_t) * m_t (a_t as g_t: from x_t^0, its own weights, chrono bias),
  which every layer reads as one more key and value (position row 0, which no memory slot
  reads: slot d steps back reads row d >= 1). The window still answers what happened in the
  last S steps; the kept slot carries the cue past them.
- `memory_write="tanh"` (with `read_norm=False`): the memory bounded as it is written, m_t =
  tanh(u_t), and read raw. The read's LayerNorm divides the memory by its spread, so when
  training grows the memory's cue-independent part the cue's share of what is read shrinks
  (docs/experiments/corridor-span.md's mechanism); read raw, keys and values are linear in m,
  so the cue's part of them no longer depends on the rest's size, and tanh bounds per channel
  what the raw read would leave unbounded (read raw, the memory ran away in 36 of 40 corridor
  runs with the orthogonal value path).

An episode start empties the carry and the kept slot as it hides the window (m_{t-1} = k_{t-1}
= 0). FeedbackCore runs all three, alone or together, on its C++ step and its Python one (and
the acting ring).

Letters: T steps, B envs, S span, L layers, D d_model, H heads, E head width (D / H), N
persistent vectors per head, F feed-forward width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from agents.cores.attention import AttentionBlock, init_value_path, split_heads
from agents.cores.checks import check_at_least, check_bool, check_choice
from agents.cores.feedback.compiled import STEPS
from agents.cores.transformer import TransformerConfig
from agents.cores.state import register_state


@dataclass
class FeedbackConfig(TransformerConfig):
    """The Transformer's options (span: past steps in memory, the current one not included), and:"""

    shared_kv: bool = True  # one key/value projection of the memory for all layers
    # pre-norm: the memory is normalised as it is read (the paper's). False reads it raw: its
    # cue-independent part then no longer scales its other parts down (docs/experiments/corridor-span.md)
    read_norm: bool = True
    # which path FeedbackCore's steps take: "compiled" (C++, on the CPU in float32), "python" (the
    # fused step in Python), or "auto" (compiled where it runs); a run resolves it once (compiled.py)
    step: str = "auto"
    carry: str = "none"  # "gate": m_t = g_t * m_{t-1} + (1 - g_t) * u_t, g_t started near keep (module docstring)
    keep_slot: bool = False  # one kept vector beside the window, written through a gate started near keep
    memory_write: str = "raw"  # "tanh": m_t bounded per channel as it is written (with read_norm=False: read raw)
    keep_t_max: int = 100  # chrono's T_max for the carry's and the kept slot's gate biases: channels keep 2 .. T_max steps

    def __post_init__(self):
        super().__post_init__()
        check_bool("shared_kv", self.shared_kv)
        check_bool("read_norm", self.read_norm)
        check_choice("step", self.step, STEPS)
        check_choice("carry", self.carry, CARRIES)
        check_bool("keep_slot", self.keep_slot)
        check_choice("memory_write", self.memory_write, WRITES)
        check_at_least("keep_t_max", self.keep_t_max, 3)
        if self.gating != "none":  # (the option comes with the Transformer's config)
            raise ValueError(f"gating must be 'none' for the Feedback core, got {self.gating!r}: its fast steps (step.py, the C++ step, "
                             "the acting ring) compute the residual sums themselves; GTrXL's gates are the Transformer core's "
                             "(--core transformer --core-opt gating=gru)")

    @property
    def tanh_write(self) -> bool:
        """Whether a step writes tanh of its layers' sum (memory_write="tanh") rather than the sum itself."""
        return self.memory_write == "tanh"


CARRIES = ("none", "gate")
WRITES = ("raw", "tanh")


@register_state
class ReferenceState(NamedTuple):
    memory: torch.Tensor  # (B, S, D) raw memory vectors m_{t-S} .. m_{t-1}
    valid: torch.Tensor  # (B, S) bool: which of them belong to the episode running now
    kept: torch.Tensor  # (B, D) the kept slot k_{t-1} (keep_slot), else (B, 0); belongs to the episode where valid[:, -1]


class FeedbackReference(nn.Module):
    sequential = True  # its steps run one after another: packing episodes side by side shortens a learning call

    def __init__(self, input_dim: int, config: FeedbackConfig):
        super().__init__()
        c = self.config = config
        self.output_dim = c.d_model
        self.groups = 1 if c.shared_kv else c.n_layers  # key/value projections
        self.embed = nn.Linear(input_dim, c.d_model)
        self.blocks = nn.ModuleList(  # each: query, out, position (S + 1, E), norms, ff or persistent
            AttentionBlock(c.d_model, c.n_heads, c.span, c.ff_width, c.dropout, c.pre_norm, c.persistent)
            for _ in range(c.n_layers)
        )
        reads_normed = c.pre_norm and c.read_norm
        self.memory_norm = nn.ModuleList(nn.LayerNorm(c.d_model) if reads_normed else nn.Identity() for _ in range(self.groups))
        self.kv = nn.ModuleList(nn.Linear(c.d_model, 2 * c.d_model) for _ in range(self.groups))  # keys, then values
        self.layer_logits = nn.Parameter(torch.zeros(c.n_layers + 1))  # w: l = 0 is the input embedding
        self.norm_out = nn.LayerNorm(c.d_model) if c.pre_norm else nn.Identity()
        init_value_path(c.value_init, self.kv, self.blocks)
        self.carry_gate = keep_gate(c.d_model, c.keep_t_max) if c.carry == "gate" else None  # g_t's W_g, b_g (of x_t^0)
        self.kept_gate = keep_gate(c.d_model, c.keep_t_max) if c.keep_slot else None  # a_t's

    @property
    def layer_weights(self) -> torch.Tensor:
        """softmax(w): how much each layer (0 = input embedding) contributes to the memory."""
        return torch.softmax(self.layer_logits, dim=0)

    def initial_state(self, batch_size: int, device: torch.device | str) -> ReferenceState:
        c = self.config
        memory = torch.zeros(batch_size, c.span, c.d_model, dtype=self.layer_logits.dtype, device=device)
        kept = memory.new_zeros(batch_size, c.d_model if c.keep_slot else 0)
        return ReferenceState(memory, torch.zeros(batch_size, c.span, dtype=torch.bool, device=device), kept)

    def memory_window(self, state: ReferenceState) -> tuple[torch.Tensor, torch.Tensor]:
        """The last S memory vectors of a state, m_{t-S} .. m_{t-1} (B, S, D), and which belong to
        the episode running (B, S) bool."""
        return state.memory, state.valid

    def written_memory(self, state: ReferenceState) -> torch.Tensor:
        """(B, D): the memory vector the step before `state` wrote, m_{t-1} (a view, not a copy)."""
        return self.memory_window(state)[0][:, -1]

    def forward(self, x: torch.Tensor, state: ReferenceState, first: torch.Tensor) -> tuple[torch.Tensor, ReferenceState]:
        """x: (T, B, input_dim), first: (T, B) bool -> y: (T, B, D), the state after step T - 1 (detached)."""
        c = self.config
        steps, batch, _ = x.shape
        keys_read = c.span + c.keep_slot  # the window's slots, then the kept one
        masks = [block.step_masks(steps, batch, keys_read, x.device) for block in self.blocks]  # per layer: (T, ...) each, or None
        memory, valid, kept = state.memory.to(x.dtype), state.valid, state.kept.to(x.dtype)
        distance = torch.arange(c.span, -1 if c.keep_slot else 0, -1, device=x.device)[None, :]  # (1, S [+ 1]): slot s is S - s steps back; the kept slot row 0
        outputs = []
        for t in range(steps):
            valid = valid & ~first[t][:, None]  # an episode start hides the memory before it
            carried = valid[:, -1:, None].to(x.dtype)  # (B, 1, 1): m_{t-1} (and k_{t-1}) belong to this episode
            read, visible = memory, valid
            if c.keep_slot:
                read, visible = torch.cat([memory, kept[:, None]], dim=1), torch.cat([valid, valid[:, -1:]], dim=1)  # (B, S + 1, D), (B, S + 1)
            kv = [project(self.memory_norm[g], self.kv[g], read) for g in range(self.groups)]  # (B, S [+ 1], 2 D) each
            h = embedded = self.embed(x[t])[:, None]  # (B, 1, D) x_t^0, the one query step
            m = self.layer_weights[0] * h
            for layer, block in enumerate(self.blocks):
                keys, values = (split_heads(half, c.n_heads) for half in kv[0 if c.shared_kv else layer].chunk(2, dim=-1))  # (B, H, S [+ 1], E) each
                h = block(h, keys, values, distance, visible[:, None], step_keep(masks[layer], t))
                m = m + self.layer_weights[layer + 1] * h
            m = self.write(m, embedded, memory[:, -1:] * carried)
            if c.keep_slot:
                kept = blend(self.kept_gate(embedded), kept[:, None] * carried, m)[:, 0]  # (B, D) k_t
            memory = torch.cat([memory[:, 1:], m], dim=1)  # (B, S, D): m_t in, the oldest out
            valid = torch.cat([valid[:, 1:], torch.ones_like(valid[:, :1])], dim=1)
            outputs.append(self.norm_out(h[:, 0]))
        return torch.stack(outputs), ReferenceState(memory.detach(), valid, kept.detach())

    def write(self, u: torch.Tensor, embedded: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """m_t from the paper's u_t = sum_l softmax(w)_l x_t^l, the step's embedded input x_t^0
        and m_{t-1} (zero at an episode start), (B, 1, D) each: u_t itself in the paper's model."""
        if self.config.tanh_write:
            u = torch.tanh(u)
        if self.carry_gate is not None:
            u = blend(self.carry_gate(embedded), previous, u)
        return u


def keep_gate(width: int, t_max: int) -> nn.Linear:
    """A gate's W and b (x_t^0 -> its logits), the bias set as chrono sets an LSTM's forget gate
    (Tallec & Ollivier 2018): log(u), u ~ U(1, t_max - 1) per channel, from torch's global
    generator; so sigmoid(b) = u / (1 + u) and channel i keeps about 1 + u_i steps."""
    gate = nn.Linear(width, width)
    with torch.no_grad():
        gate.bias.uniform_(1, t_max - 1).log_()
    return gate


def blend(logits: torch.Tensor, kept: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """sigmoid(logits) * kept + (1 - sigmoid(logits)) * new: a gate's keep-or-write."""
    keep = torch.sigmoid(logits)
    return keep * kept + (1 - keep) * new


def project(norm: nn.Module, kv: nn.Linear, memory: torch.Tensor) -> torch.Tensor:
    """Raw memory (B, S, D) -> its keys and values (B, S, 2 D); normalised as read under pre-norm."""
    return kv(norm(memory))


def step_keep(masks: tuple | None, t: int) -> tuple | None:
    """Step t's dropout masks of one layer, shaped for its one query: attention (B, H, 1, S [+ N]),
    ReLU (B, 1, F) or None; None without dropout."""
    if masks is None:
        return None
    attention, relu = masks
    return attention[t][:, :, None], None if relu is None else relu[t][:, None]


def reference_of(core: FeedbackReference) -> FeedbackReference:
    """The reference model with `core`'s config, weights, dtype, device and mode: a FeedbackCore's
    twin, to test it (or time it) against."""
    reference = FeedbackReference(core.embed.in_features, core.config).to(core.layer_logits)
    reference.load_state_dict(core.state_dict())
    return reference.train(core.training)
