"""The Feedback Transformer core: the model of reference.py (read that first), run fast.

FeedbackCore inherits the reference's parameters and computes the same function (outputs, every
gradient, the carried state: tests/cores/test_feedback_paths.py), but its steps, sequential by
nature, are kept cheap:

- a call's steps run without autograd (step.py: a step is a few dozen tensor
  operations), keeping what the backward pass needs; one autograd node (`_Call`) hands the
  outputs to autograd, and its backward walks the steps in reverse by hand, adding each step's
  share of every weight's gradient into one accumulator. The config's `step` says whether
  they run so in Python or the same in C++ (on the CPU in float32 or float64: compiled.py says
  which variants can and how a run chooses; `run.compiled` says whether a call does);
- keys and values are projected once per step from m_t (shared by all layers by default;
  `shared_kv=False` gives each layer its own projection) and written into a preallocated
  buffer that each step reads through a window of the last S slots: no step copies the memory;
- the state carries raw memory vectors, normalised when read (pre-norm), never stored normed;
- the gated carry (carry="gate", reference.py): a call's gates g_t = sigmoid(W_g x_t^0 + b_g)
  are one product over its steps, in autograd, as its embeddings are, and its steps take them
  as inputs: a step blends its u_t with the memory's newest slot, m_{t-1} (while it belongs to
  the episode), before writing m_t; the backward hands the gates their gradient. Both steps
  run it, the Python one and the C++ one (which take the gates as they take the embeddings);
- the tanh write (memory_write="tanh", reference.py): a step writes tanh of its layers' sum,
  before the carry's blend where both are on; the backward multiplies the gradient at the
  written vector by 1 - tanh^2, read back from what was written. Both steps, the acting call
  and the ring run it;
- the kept slot (keep_slot=True, reference.py): the run holds the kept vector k_{t-1} beside its
  buffers, and each step its keys and values (one projection a step, as m_t's), which every
  layer reads after the window (step.py's KeptRead); the step then writes k_t = a_t (c_t k_{t-1})
  + (1 - a_t) m_t, its gates a_t made as the carry's are. The backward carries the gradient at
  k_t back through the blend (to m_t, a_t and k_{t-1}) and through the next step's read. The
  Python step, the C++ one (which takes its gates as the carry's) and the ring run it;
- at the start of a call the carried memory's keys and values are recomputed with the current
  weights, except when acting (no gradients) with unchanged weights: then the stored ones are
  reused and the call extends the state's buffers in place (append_log.py), so a T = 1 call
  costs one step, whatever the span;
- mixed precision: a call computes in autocast's dtype where autocast is on (else the weights'),
  explicitly: the weights are cast once per call, the buffers and the tape are in that dtype, and
  autocast is off inside the steps and the backward (dtypes.py says why). The weights' gradients
  are accumulated in their own dtype (float32 under autocast), each step's share added in. The
  autograd Function takes no torch.amp.custom_fwd/custom_bwd: they hand a backward its forward's
  autocast state, which nothing here reads, and their cast_inputs would round the float32
  gradients to bfloat16 on their way back to the weights.

Letters: T steps, B envs, S span, L layers, G key/value groups (1 shared, else L), D d_model,
H heads, E head width.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from agents.cores.feedback import compiled as feedback_compiled
from agents.cores.append_log import AppendLog, capacity_for
from agents.cores.dtypes import compute_dtype, exact, masked_score
from agents.cores.feedback.reference import FeedbackConfig, FeedbackReference, ReferenceState
from agents.cores.stepwise import StepwiseRun
from agents.cores.feedback.step import (
    GroupWeights, KeptRead, LayerTape, LayerWeights, layer_backward, layer_forward, layer_norm_input_grad, project,
    projection_gradients,
)
from agents.cores.weights_version import track_loads, weights_version
from agents.cores.state import register_state

# A recording call on the compiled step whose buffers hold at least this many slots, and four
# windows, reads its windows from blocks of 2 S slots (csrc/feedback_step.cpp: Blocks): in
# buffers that long each (env, head, element) row is kilobytes from the next, and a window
# scattered so cost the attention's loops 3-4x their time (benchmarks/long_window.py).
BLOCKED_FROM = 256

__all__ = ["FeedbackConfig", "FeedbackCore", "FeedbackState"]


@register_state
class FeedbackState(NamedTuple):
    """Buffers of `capacity` slots; slots [end - S, end) hold the last S steps."""

    memory: torch.Tensor  # (B, capacity, D) raw memory vectors
    keys: torch.Tensor  # (B, H, G, E, capacity) keys of that memory, transposed (slots along the last dim) ...
    values: torch.Tensor  # (B, H, G, E, capacity) ... and values, the same way
    valid: torch.Tensor  # (B, S) bool: which of the last S steps belong to the episode running now
    end: int
    version: tuple | None  # ... made by the weights with this weights_version
    log: AppendLog  # how far these buffers have been written
    # (B, D) the kept slot k_{t-1} (keep_slot), else (B, 0); belongs to the episode where valid[:, -1].
    # None: a state saved before the field (own_state makes it empty)
    kept: torch.Tensor | None = None


class Gates(NamedTuple):
    """Gates a call's steps take as inputs, made from their embedded inputs with autograd where it
    is on: each (..., D), or None where the core has no such gate."""

    carry: torch.Tensor | None  # the carry's g_t (carry="gate")
    kept: torch.Tensor | None  # the kept slot's a_t (keep_slot)

    def at(self, t: int) -> "Gates":
        """Step t's gates (of a call's (T, B, D) ones)."""
        return Gates(*(None if g is None else g[t] for g in self))

    def to(self, dtype: torch.dtype) -> "Gates":
        """The gates in `dtype`, detached: as the steps read them."""
        return Gates(*(None if g is None else g.detach().to(dtype) for g in self))


class CompiledWeights(NamedTuple):
    """A core's weights as the compiled step's calls take them (FeedbackCore.compiled_weights)."""

    layers: list  # per layer, the extension's LayerWeights
    groups: list  # per key/value group, its GroupWeights
    outer: dict  # embed_w, embed_b, norm_out_w, norm_out_b: act_steps' and run_steps' keywords


class FeedbackCore(FeedbackReference):
    """FeedbackReference's parameters and function; its own state (buffers for acting to extend)."""

    def __init__(self, input_dim: int, config: FeedbackConfig):
        super().__init__(input_dim, config)
        track_loads(self)
        # Which path the steps take (compiled.py): what stands in the compiled step's way, read
        # once, here; then the path per device and dtype, chosen at the first call of each.
        self._blocked = None if config.step == "python" else feedback_compiled.blocker(config.persistent)
        self._paths: dict[tuple, str] = {}
        if config.step == "compiled":  # refused now where no call could take it (building the extension)
            feedback_compiled.choose(config.step, self._blocked, torch.device("cpu"), torch.float32, torch.float32)

    def step_path(self, device: torch.device, dtype: torch.dtype, weights_dtype: torch.dtype) -> str:
        """"compiled" or "python": the path of this core's calls on `device` computing in `dtype`
        (config.step; "compiled" where a call cannot take it is a ValueError saying why)."""
        key = (device.type, dtype, weights_dtype)
        if key not in self._paths:
            self._paths[key] = feedback_compiled.choose(self.config.step, self._blocked, device, dtype, weights_dtype)
        return self._paths[key]

    def call_weights(self, version: tuple | None = None) -> tuple[torch.Tensor, list[LayerWeights], list[GroupWeights]]:
        """The weights as a call's steps use them: softmax(w), each layer's, each key/value
        group's. The derived ones (scaled query, position rows by window slot, scaled persistent
        vectors) are made here once per call, with autograd when it is on; without, they are
        kept for later calls while the weights_version stays `version` (acting: T = 1 calls)."""
        keep = version is not None and not torch.is_grad_enabled()
        cached = self.__dict__.get("_call_weights")
        if keep and cached is not None and cached[0] == version:
            return cached[1]
        weights = self._derive_weights()
        if keep:
            self.__dict__["_call_weights"] = (version, weights)
        return weights

    def _derive_weights(self) -> tuple[torch.Tensor, list[LayerWeights], list[GroupWeights]]:
        c = self.config
        scale = (c.d_model // c.n_heads) ** -0.5
        distance = torch.arange(c.span, -1 if c.keep_slot else 0, -1, device=self.layer_logits.device)  # window slot s is S - s steps back; the kept slot row 0
        layers = []
        for block in self.blocks:
            persistent = block.persistent() if block.persistent is not None else (None, None)
            ff = (block.norm_ff.weight, block.norm_ff.bias, block.ff.fc1.weight, block.ff.fc1.bias, block.ff.fc2.weight,
                  block.ff.fc2.bias) if block.ff is not None else (None,) * 6
            layers.append(LayerWeights(
                block.norm_attn.weight, block.norm_attn.bias, block.query.weight * scale, block.query.bias * scale,
                block.out.weight, block.out.bias, block.position[distance], *persistent, *ff,
            ))
        groups = [
            GroupWeights(getattr(norm, "weight", None), getattr(norm, "bias", None), kv.weight, kv.bias)
            for norm, kv in zip(self.memory_norm, self.kv)
        ]
        return self.layer_weights, layers, groups

    def initial_state(self, batch_size: int, device: torch.device | str) -> FeedbackState:
        """Empty memory in the weights' dtype (a call under autocast copies it into its own)."""
        span = self.config.span
        like = torch.zeros(0, dtype=self.layer_logits.dtype, device=device)
        memory, keys, values = self._new_buffers(batch_size, capacity_for(span, 0), like, torch.zeros)
        valid = torch.zeros(batch_size, span, dtype=torch.bool, device=device)
        return FeedbackState(memory, keys, values, valid, span, None, AppendLog(span), self._empty_kept(batch_size, like))

    def _empty_kept(self, batch_size: int, like: torch.Tensor) -> torch.Tensor:
        """(B, D) zeros, the kept slot of no step, where the core keeps one; else (B, 0)."""
        return like.new_zeros(batch_size, self.config.d_model if self.config.keep_slot else 0)

    def memory_window(self, state: FeedbackState) -> tuple[torch.Tensor, torch.Tensor]:
        """The state's last S memory vectors (B, S, D), a view of its buffer, and their `valid`."""
        state = self.own_state(state)
        return state.memory[:, state.end - self.config.span : state.end], state.valid

    def own_state(self, state: FeedbackState | ReferenceState) -> FeedbackState:
        """`state` itself (a saved one from before the kept slot given an empty one); or, for the
        reference model's state of the same config (a checkpoint of a carry or kept-slot run from
        when the reference model ran them), a FeedbackState holding its memory, valid and kept slot
        (its keys and values made at the next call)."""
        if not isinstance(state, ReferenceState):
            return state if state.kept is not None else state._replace(kept=self._empty_kept(state.valid.shape[0], state.memory))
        span = self.config.span
        memory, keys, values = self._new_buffers(state.valid.shape[0], capacity_for(span, 0), state.memory, torch.zeros)
        memory[:, :span] = state.memory
        return FeedbackState(memory, keys, values, state.valid, span, None, AppendLog(span), state.kept)

    def _new_buffers(self, batch: int, capacity: int, like: torch.Tensor, make=torch.empty):
        """Memory (B, capacity, D), keys and values (B, H, G, E, capacity) (heads before groups: see
        TransformerCore._new_buffers), made by `make` (zeros for an initial state, whose slots are
        read; a run writes every slot before reading it). Keys and values both run along the slots:
        the compiled step's loops then walk a window's slots contiguously in every product, and the
        Python backward reads values so without a copy of its own."""
        c = self.config
        options = dict(dtype=like.dtype, device=like.device)
        memory = make(batch, capacity, c.d_model, **options)
        keys = make(batch, c.n_heads, self.groups, c.d_model // c.n_heads, capacity, **options)
        return memory, keys, make(batch, c.n_heads, self.groups, c.d_model // c.n_heads, capacity, **options)

    def forward(self, x: torch.Tensor, state: FeedbackState, first: torch.Tensor) -> tuple[torch.Tensor, FeedbackState]:
        """x: (T, B, input_dim), first: (T, B) bool -> y: (T, B, D), the state after step T - 1."""
        state = self.own_state(state)
        if not torch.is_grad_enabled():
            acted = self._act(x, state, first)
            if acted is not None:
                return acted
        steps = first.shape[0]
        run = FeedbackRun(self, state, steps, x)
        embedded = self.embed(x)  # (T, B, D): one product for all steps
        gates = self.gates(embedded)  # (T, B, D) each or None: one product too
        with torch.no_grad():
            run.advance_all(embedded, first, gates)
        return run.outputs(embedded, gates), run.finish()

    def gates(self, embedded: torch.Tensor) -> Gates:
        """The carry's gates g_t = sigmoid(W_g x_t^0 + b_g) and the kept slot's a_t of steps'
        embedded inputs (..., D), with autograd where it is on (the steps take them as inputs);
        None for a gate the core has not."""
        return Gates(*(None if gate is None else torch.sigmoid(gate(embedded)) for gate in (self.carry_gate, self.kept_gate)))

    def _act(self, x: torch.Tensor, state: FeedbackState, first: torch.Tensor) -> tuple[torch.Tensor, FeedbackState] | None:
        """An acting call (no gradients) in one call of the compiled step, embedding and final norm
        included, where its state's keys and values are current (every acting call but the first
        after a change of the weights): its buffers extended in place, or refilled with its window
        when they have no room left (_room); else None, and FeedbackRun takes the call. Equals
        that path's outputs and state exactly (the same operations in the same order;
        tests/cores/test_feedback_acting.py)."""
        dtype = self.layer_logits.dtype
        if self.carry_gate is not None or self.kept_gate is not None:  # act_steps embeds in C++ and has no gates: FeedbackRun takes the call, its steps compiled
            return None
        if (self.training and self.config.dropout > 0) or compute_dtype(x.device, dtype) != dtype or self.step_path(x.device, dtype, dtype) != "compiled":
            return None
        version = weights_version(self)
        if state.version != version:
            return None
        memory, keys, values, end, log = self._room(state, first.shape[0], dtype)
        master = self.call_weights(version)  # the cached weights (the same object while the version holds) ...
        mix, layers, groups = master
        compiled = feedback_compiled.extension()
        prepared = self.compiled_weights(compiled, master, layers, groups)  # ... and so these
        y, valid = compiled.act_steps(
            x=x, first=first, tanh_write=self.config.tanh_write, valid=state.valid, end=end, **prepared.outer, mix=mix, layer_weights=prepared.layers,
            group_weights=prepared.groups, memory=memory, keys=keys, values=values, pre_norm=self.config.pre_norm,
        )
        end = log.end = end + first.shape[0]
        return y, FeedbackState(memory, keys, values, valid, end, version, log, state.kept)

    def _room(self, state: FeedbackState, steps: int, dtype: torch.dtype) -> tuple:
        """Buffers in `dtype` for `steps` more steps after `state`, whose keys and values are
        current: the state's own, extended in place where it may (append_log.py), else new ones
        holding a copy of its window (memory, keys and values) -> (memory, keys, values, the slot
        after the window, the log)."""
        if state.memory.dtype == dtype and state.log.can_extend(state.end, steps, state.memory.shape[1]):
            return state.memory, state.keys, state.values, state.end, state.log
        span, window = self.config.span, slice(state.end - self.config.span, state.end)
        memory, keys, values = self._new_buffers(state.valid.shape[0], capacity_for(span, steps), state.memory.new_empty(0, dtype=dtype))
        memory[:, :span], keys[..., :span], values[..., :span] = state.memory[:, window], state.keys[..., window], state.values[..., window]
        return memory, keys, values, span, AppendLog(span)

    def compiled_weights(self, compiled, master: tuple, layers: list, groups: list) -> "CompiledWeights":
        """The weights as the compiled step takes them, detached: the layers' and the groups' as
        its LayerWeights and GroupWeights, built by keyword from step.py's `layers` and `groups`,
        and the embedding's and final norm's as its whole calls (act_steps, run_steps) take them
        (no final norm under post-norm: None). Kept for later calls while `master` (call_weights'
        cached weights, which acting calls reuse) is the same object and `layers` are its own
        (not cast for the call): an acting call then builds none of them."""
        kept = self.__dict__.get("_compiled_weights")
        if kept is not None and kept[0] is master:
            return kept[1]
        norm = self.norm_out if self.config.pre_norm else None
        outer = dict(embed_w=self.embed.weight.detach(), embed_b=self.embed.bias.detach(),
                     norm_out_w=None if norm is None else norm.weight.detach(), norm_out_b=None if norm is None else norm.bias.detach())
        built = CompiledWeights([compiled.LayerWeights(**detached(w)) for w in layers], [compiled.GroupWeights(**detached(w)) for w in groups], outer)
        if not torch.is_grad_enabled() and layers is master[1]:
            self.__dict__["_compiled_weights"] = (master, built)
        return built

    def open(self, state: FeedbackState, steps: int) -> "FeedbackRun":
        """A call fed one step at a time, for inputs that depend on earlier outputs (acting):
        run.step(x_t, first_t) -> y_t, then run.outputs() -> y (T, B, D) with gradients to the
        inputs and the weights (when opened with gradients on) and run.finish() -> state.
        Equals forward() over the same inputs."""
        state = self.own_state(state)
        return FeedbackRun(self, state, steps, state.memory)


class StepTape(NamedTuple):
    """What one step of a recording run keeps for the backward pass."""

    layers: list[LayerTape]
    m: torch.Tensor  # (B, D) the step's memory vector
    # with the carry: u_t (B, D), the paper's m_t (tanh(u_t) with the tanh write), and c_t (B, 1),
    # 1.0 where m_{t-1} was carried; else None
    carry: tuple | None
    kept: "KeptTape | None"  # with the kept slot: what its read and its write keep
    stats: list  # per key/value group: its norm's (mean, rstd) of m, or None
    seen: torch.Tensor  # (B, 1, 1) 1.0 where some window slot was visible
    masks: list  # per layer: this step's dropout masks, bool (kept), or None


class KeptTape(NamedTuple):
    """What one step of a recording run keeps of the kept slot, for the backward pass."""

    read: torch.Tensor  # (B, D) k_{t-1}, the vector the step's layers read ...
    reads: list  # ... per key/value group as a KeptRead (its keys, values and bias)
    stats: list  # per key/value group: its norm's (mean, rstd) of k_{t-1}, or None
    carried: torch.Tensor  # (B, D) c_t k_{t-1}: what the blend kept (0 after an episode start)
    onward: torch.Tensor  # (B, D) c_t a_t: the share of dk_t that reaches k_{t-1} through the blend


class FeedbackRun(StepwiseRun):
    """The state of one call over at most `steps` steps, advanced a step at a time (in the order
    stepwise.py says).

    Two ways to run, by the grad mode when the run begins: without gradients (acting: nothing
    kept), or recording (steps without autograd, each keeping its StepTape, or its tape in C++
    on the compiled path, and `outputs` hands them to autograd through `_Call`)."""

    def __init__(self, core: FeedbackCore, state: FeedbackState, steps: int, like: torch.Tensor):
        self.core = core
        batch, span = state.valid.shape
        self.steps, self.t = steps, 0
        self.recording = torch.is_grad_enabled()
        self.slot = torch.arange(span, device=like.device)
        self.dtype = compute_dtype(like.device, core.layer_logits.dtype)
        self.exact = lambda: exact(like.device)  # autocast off: the steps set their dtypes themselves
        like = like.new_empty(0, dtype=self.dtype)
        # The buffer index (counting the carried span from 0) where each env's episode began.
        self.episode_start = span - state.valid.sum(dim=1)  # (B,); S when nothing carried is valid
        self.version = weights_version(core)
        # The weights as derived (their own dtype, with autograd when on): what the gradients are for ...
        self.master = core.call_weights(self.version)
        if self.dtype == self.master[0].dtype:  # ... and as the steps read them: the same, or cast once per call
            self.mix, self.layers, self.groups = self.master
        else:
            with torch.no_grad():
                self.mix = self.master[0].to(self.dtype)
                self.layers = [LayerWeights(*(None if x is None else x.to(self.dtype) for x in w)) for w in self.master[1]]
                self.groups = [GroupWeights(*(None if x is None else x.to(self.dtype) for x in w)) for w in self.master[2]]
        self.masks = self._draw_masks(batch, steps, like)
        reuse = not torch.is_grad_enabled() and state.version == self.version  # stored keys are current
        if reuse:  # the state's buffers extended, or new ones with its window's memory, keys and values
            memory, keys, values, start, log = core._room(state, steps, self.dtype)
        else:  # new buffers with its window's memory (its keys and values recomputed below)
            memory, keys, values = core._new_buffers(batch, capacity_for(span, steps), like)
            memory[:, :span] = state.memory[:, state.end - span : state.end]
            start, log = span, AppendLog(span)
        self.memory, self.keys, self.values, self.start, self.log = memory, keys, values, start, log
        groups = range(core.groups)
        self.group_keys, self.group_values = [keys[:, :, g] for g in groups], [values[:, :, g] for g in groups]  # (B, H, E, capacity) each
        self.compiled = feedback_compiled.extension() if core.step_path(like.device, self.dtype, self.master[0].dtype) == "compiled" else None
        self.rows = self.recording and not self.compiled
        if self.rows:  # the Python backward reads keys as rows (B, H, capacity, E) (step.py)
            heads, _, head_width, capacity = keys.shape[1:]
            self.key_rows = keys.new_empty(batch, heads, core.groups, capacity, head_width)
            self.group_key_rows = [self.key_rows[:, :, g] for g in groups]
        if not reuse:  # the carried window's keys and values, with the current weights
            with torch.no_grad(), self.exact():
                for g in range(core.groups):
                    self._write(g, memory[:, :span], 0)
        if core.kept_gate is not None:  # the kept slot k_{t-1} (the compiled step replaces it in place: a copy) ...
            self.kept = state.kept.to(self.dtype, copy=True)
            if not self.compiled:  # ... and, for the Python step, its keys and values (B, H, E) per group
                with torch.no_grad(), self.exact():
                    self.kept_reads, self.kept_stats = read_kept(self.groups, self.kept, self.core.config)
        if self.compiled:  # the weights as the C++ step's structs, the tape in C++
            self.prepared = core.compiled_weights(self.compiled, self.master, self.layers, self.groups)
            self.tape = self.compiled.Tape() if self.recording else None
            self.blocked = self.recording and keys.shape[-1] >= max(BLOCKED_FROM, 4 * span)
        self.inputs: list[torch.Tensor] = []  # what step() was given, for outputs()
        self.tops: list[torch.Tensor] = []  # (B, D) the top layer's output per step, before the final norm
        self.tapes: list[StepTape] = []
        self.zero, self.neg_inf = like.new_zeros(()), like.new_full((), masked_score(self.dtype))

    def _compiled_masks(self) -> dict:
        """Dropout's bool masks as the compiled step takes them: per layer, attention's and the ReLU's (none without dropout)."""
        return dict(attention_masks=[attention for attention, _ in self.masks], relu_masks=[relu for _, relu in self.masks])

    def _draw_masks(self, batch: int, steps: int, like: torch.Tensor) -> list:
        """Per layer, the dropout masks of all steps, (attention (T, B, H, S [+ N]), ReLU (T, B, F)),
        bool (True: kept), drawn layer by layer, attention first, in one draw each (dropout.py);
        [] without dropout. Scaled by 1 / (1 - p) a step at a time (`_scaled`)."""
        core, c = self.core, self.core.config
        if not core.training or c.dropout == 0:
            return []
        self.keep_scale = like.new_full((), 1.0 / (1.0 - c.dropout))
        return [block.step_masks(steps, batch, c.span + c.keep_slot, like.device) for block in core.blocks]

    def _scaled(self, keep: tuple | None) -> tuple | None:
        """A step's bool masks of one layer -> the masks layer_forward multiplies by: 0 or 1 / (1 - p)."""
        if keep is None:
            return None
        return tuple(None if mask is None else torch.where(mask, self.keep_scale, self.zero) for mask in keep)

    def _write(self, g: int, memory: torch.Tensor, slot: int) -> tuple:
        """Project memory (B, n, D) with group g and write its keys and values into slots
        [slot, slot + n) (and the layouts the Python backward reads, when it will); returns the norm statistics."""
        kv, stats = project(self.groups[g], memory)
        n = memory.shape[1]
        with torch.no_grad():
            k, v = split_keys_values(kv, self.core.config)
            self.group_keys[g].narrow(-1, slot, n).copy_(k.transpose(-1, -2))
            self.group_values[g].narrow(-1, slot, n).copy_(v.transpose(-1, -2))
            if self.rows:
                self.group_key_rows[g].narrow(2, slot, n).copy_(k)
        return stats

    def step(self, x: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """x: (B, input_dim), first: (B,) bool -> y: (B, D), without gradients; outputs() gives
        all steps' with gradients."""
        self.check_step()
        if self.recording:
            self.inputs.append(x)
        if self.compiled and self.core.carry_gate is None and self.core.kept_gate is None:  # embedding, step and final norm in one call of the compiled step
            y, tops = self.compiled.run_steps(x=x[None], first=first[None], **self.prepared.outer, **self._compiled_arguments())
            self.tops.append(tops[0])
            self.t += 1
            return y[0]
        with torch.no_grad():  # the Python step; or, with a gate (made here), the compiled one (_advance)
            embedded = self.core.embed(x)
            return self.core.norm_out(self.advance(embedded, first, self.core.gates(embedded)))

    def advance(self, embedded: torch.Tensor, first: torch.Tensor, gates: Gates = Gates(None, None)) -> torch.Tensor:
        """One step from its embedding (B, D) (and its gates, (B, D) each, where the core has
        them): the top layer's output (B, D) before the final norm, in the call's dtype; the step's
        memory vector and its keys and values go into the buffers."""
        assert all((g is None) == (gate is None) for g, gate in zip(gates, (self.core.carry_gate, self.core.kept_gate))), \
            "a step takes each gate exactly when the core has it"
        with self.exact():
            return self._advance(embedded.to(self.dtype), first, gates.to(self.dtype))

    def advance_all(self, embedded: torch.Tensor, first: torch.Tensor, gates: Gates = Gates(None, None)) -> None:
        """All the run's steps from their embeddings (T, B, D) (and gates (T, B, D) each) and
        first (T, B): as advance() T times, in one call of the compiled step where it runs."""
        if not self.compiled:
            for t in range(first.shape[0]):
                self.advance(embedded[t], first[t], gates.at(t))
            return
        with self.exact():
            self._compiled_steps(embedded.to(self.dtype), first, gates.to(self.dtype))

    def _compiled_steps(self, embedded: torch.Tensor, first: torch.Tensor, gates: Gates) -> torch.Tensor:
        """Steps from embeddings (n, B, D), first (n, B) and their gates ((n, B, D) each, or None
        where the core has no such gate), in C++ -> their tops (n, B, D)."""
        kept = self.kept if gates.kept is not None else None
        tops = self.compiled.forward_steps(embedded=embedded.detach(), first=first, gates=gates.carry, kept=kept, kept_gates=gates.kept,
                                           **self._compiled_arguments())
        self.tops.extend(tops.unbind(0))
        self.t += first.shape[0]
        return tops

    def _compiled_arguments(self) -> dict:
        """What every call of the compiled step's forward takes from the run: where its steps
        begin, its weights and buffers, dropout's masks, its tape."""
        c = self.core.config
        return dict(
            tanh_write=c.tanh_write, episode_start=self.episode_start, t0=self.t, start=self.start, mix=self.mix.detach(), layer_weights=self.prepared.layers,
            group_weights=self.prepared.groups, memory=self.memory, keys=self.group_keys, values=self.group_values,
            **self._compiled_masks(), keep_scale=1.0 / (1.0 - c.dropout), pre_norm=c.pre_norm, tape=self.tape, blocked=self.blocked,
        )

    def _advance(self, embedded: torch.Tensor, first: torch.Tensor, gates: Gates) -> torch.Tensor:
        if self.compiled:
            return self._compiled_steps(embedded[None], first[None], Gates(*(None if g is None else g[None] for g in gates)))[0]
        c, t = self.core.config, self.t
        span, lo = c.span, self.start + self.t - c.span  # the window: buffer slots [lo, lo + S)
        self.episode_start = torch.where(first, span + t, self.episode_start)
        visible = (t + self.slot)[None, :] >= self.episode_start[:, None]  # (B, S)
        bias = torch.where(visible, self.zero, self.neg_inf)[:, None, :]  # (B, 1, S)
        seen = visible.any(dim=1).to(embedded.dtype)[:, None, None]  # (B, 1, 1)
        keep = [(attention[t], None if relu is None else relu[t]) for attention, relu in self.masks] or [None] * c.n_layers
        carried = visible[:, -1:].to(embedded.dtype)  # (B, 1) c_t: the newest slot, m_{t-1} (and k_{t-1}), is this episode's
        kept = None
        if gates.kept is not None:  # k_{t-1} read after the window, visible where c_t
            kept_bias = torch.where(visible[:, -1:], self.zero, self.neg_inf)[:, :, None]  # (B, 1, 1)
            kept = [KeptRead(keys, values, kept_bias) for keys, values in self.kept_reads]
        h, m, tapes = embedded, self.mix[0] * embedded, []
        for layer, w in enumerate(self.layers):
            g = 0 if c.shared_kv else layer
            k_t, v_t = self.group_keys[g][..., lo : lo + span], self.group_values[g][..., lo : lo + span]
            h, tape = layer_forward(h, k_t, v_t.transpose(-1, -2), bias, seen, w, self._scaled(keep[layer]), c.pre_norm, None if kept is None else kept[g])
            m = torch.addcmul(m, self.mix[layer + 1], h)
            tapes.append(tape)
        slot, carry = self.start + t, None
        if c.tanh_write:  # the memory bounded as it is written
            m = torch.tanh(m)
        if gates.carry is not None:  # the carry: m_t = g_t (c_t m_{t-1}) + (1 - g_t) u_t, u_t the sum above
            carry, m = (m, carried), torch.addcmul((1 - gates.carry) * m, gates.carry, self.memory[:, slot - 1] * carried)
        self.memory[:, slot] = m
        stats = [self._write(g, m[:, None], slot) for g in range(len(self.groups))]
        kept_tape = None
        if gates.kept is not None:  # the kept slot: k_t = a_t (c_t k_{t-1}) + (1 - a_t) m_t, and its keys and values for step t + 1
            previous = self.kept * carried
            kept_tape = KeptTape(self.kept, kept, self.kept_stats, previous, gates.kept * carried)
            self.kept = torch.addcmul((1 - gates.kept) * m, gates.kept, previous)
            self.kept_reads, self.kept_stats = read_kept(self.groups, self.kept, self.core.config)
        if self.recording:
            self.tapes.append(StepTape(tapes, m, carry, kept_tape, [None if s is None else (s[0][:, 0], s[1][:, 0]) for s in stats], seen, keep))
        self.tops.append(h)
        self.t += 1
        return h

    def outputs(self, embedded: torch.Tensor | None = None, gates: Gates | None = None) -> torch.Tensor:
        """(T, B, D) the outputs of the steps taken (after the final norm). A recording run
        hands them to autograd here, with gradients to `embedded` (the steps' embedded inputs,
        (T, B, D); by default embed(the inputs step() was given)), to the gates (T, B, D) each the
        steps took (by default gates(embedded)) and to the weights."""
        self.check_outputs()
        if not self.recording:
            return self.core.norm_out(torch.stack(self.tops))
        if embedded is None:
            embedded = self.core.embed(torch.stack(self.inputs))
        if gates is None:
            gates = self.core.gates(embedded)
        mix, layers, groups = self.master
        y = _Call.apply(embedded, *gates, self, mix, *[x for w in layers for x in w], *[x for w in groups for x in w])
        return self.core.norm_out(y)

    def finish(self) -> FeedbackState:
        """The state after the steps taken (detached, like forward's)."""
        self.check_finish()
        span, end = self.core.config.span, self.start + self.t
        self.log.end = end
        index = torch.arange(self.t, self.t + span, device=self.slot.device)  # buffer index of the last S slots
        valid = index[None, :] >= self.episode_start[:, None]
        kept = self.kept if self.core.kept_gate is not None else self.memory.new_zeros(valid.shape[0], 0)
        return FeedbackState(self.memory, self.keys, self.values, valid, end, self.version, self.log, kept)

    def backward(self, grad_y: torch.Tensor, gates: Gates) -> tuple:
        """The steps in reverse, by hand: grad_y (T, B, D) at the tops (and the gates the steps
        took, (T, B, D) each or None) -> the gradients of the embedded inputs, the gates, softmax(w),
        and every weight of call_weights (in _Call's input order).

        A step's memory slot is read by the S steps after it, so when the reverse walk reaches
        step t the gradient at its keys and values is complete; from it comes the gradient at
        m_t, which joins the gradients flowing down step t's layers. With the carry, m_t also
        reaches m_{t+1} = g_{t+1} (c_{t+1} m_t) + (1 - g_{t+1}) u_{t+1}, which the walk passed
        just before: dm_t gains g_{t+1} c_{t+1} dm_{t+1}; then du_t = (1 - g_t) dm_t goes down the
        layers where the paper's dm_t goes, and dg_t = dm_t (c_t m_{t-1} - u_t). With the tanh
        write, what was written is tanh of the layers' sum, so the gradient at the sum is (1 -
        tanh^2) times that at the written vector (read back from it). With the kept slot, k_t is
        read by step t + 1 alone and blended into k_{t+1}, both passed before t: dk_t is complete
        there, and k_t = a_t (c_t k_{t-1}) + (1 - a_t) m_t gives dm_t += (1 - a_t) dk_t, da_t = dk_t
        (c_t k_{t-1} - m_t) and a_t c_t dk_t onward to k_{t-1}, which step t's layers read too.
        (The carried state is detached: the first step's m_{t-1} and k_{t-1} take no gradient.)

        In the call's dtype, but the weights' gradients and the gradients at every slot's keys
        and values (each a sum over many steps) accumulate in the weights' own dtype."""
        with self.exact():
            return self._backward(grad_y.to(self.dtype), gates.to(self.dtype))

    def _backward(self, grad_y: torch.Tensor, gates: Gates) -> tuple:
        c, steps = self.core.config, self.t
        master_mix, master_layers, master_groups = self.master
        span, (batch, width) = c.span, grad_y.shape[1:]
        # per group (B, 2, H, E, S + T): gradients at every slot's keys ([:, 0]) and values, transposed
        grad_kv = [master_mix.new_zeros(batch, 2, c.n_heads, width // c.n_heads, span + steps) for _ in self.groups]
        d_layers = [LayerWeights(*(None if x is None else torch.zeros_like(x) for x in w)) for w in master_layers]
        read, grad_read = self.memory[:, : span + steps], [grad.view(batch, 2 * width, span + steps) for grad in grad_kv]  # every slot the call read
        # with the kept slot, per group (B, 2 D, T): gradients at the keys and values of the kept vector each step read
        grad_kept = [master_mix.new_zeros(batch, 2 * width, steps) for _ in self.groups] if gates.kept is not None else []
        if self.compiled:
            kept_reads = grad_y.new_empty(batch, steps, width) if grad_kept else None  # (B, T, D) the k_{t-1} each step read
            d_embedded, d_mix, d_carry, d_kept = self.compiled.backward_steps(
                grad_y=grad_y, tops=torch.stack(self.tops), tape=self.tape, mix=self.mix.detach(), layer_weights=self.prepared.layers,
                group_weights=self.prepared.groups, keys=self.group_keys, values=self.group_values, grad_kv=grad_kv, gates=gates.carry,
                tanh_write=c.tanh_write, memory=self.memory, **self._compiled_masks(), keep_scale=1.0 / (1.0 - c.dropout), pre_norm=c.pre_norm,
                acc_layers=[self.compiled.LayerWeights(**w._asdict()) for w in d_layers], kept_gates=gates.kept, grad_kept=grad_kept,
                kept_reads=kept_reads,
            )
            d_gates = Gates(d_carry, d_kept)
        else:
            d_embedded, d_mix, d_gates = self._backward_steps(grad_y, grad_kv, grad_kept, d_layers, gates)
            kept_reads = torch.stack([tape.kept.read for tape in self.tapes], dim=1) if grad_kept else None
        if grad_kept:  # the kept vectors read are slots of the projection too
            read = torch.cat([read, kept_reads], dim=1)  # (B, S + 2 T, D)
            grad_read = [torch.cat([grad, kept], dim=-1) for grad, kept in zip(grad_read, grad_kept)]
        d_mix = d_mix.to(master_mix.dtype).sum(0)  # softmax(w): layer l's output reaches m_t times w_l (l = 0: the embedded input)
        d_groups = [  # each slot's key and value gradients as a column of (B, 2 D, slots)
            projection_gradients(w, read.to(master_mix.dtype), grad) for w, grad in zip(master_groups, grad_read)
        ]
        return (d_embedded, *d_gates, None, d_mix, *[x for w in d_layers for x in w], *[x for w in d_groups for x in w])

    def _backward_steps(self, grad_y: torch.Tensor, grad_kv: list, grad_kept: list, d_layers: list, gates: Gates) -> tuple:
        """The Python path of _backward's walk over the steps: -> the gradients at the embedded
        inputs (T, B, D), at softmax(w) per step (T, L + 1) and at the gates (T, B, D) each, None
        for a gate the core has not; the weights' and the slots' key and value gradients added into
        d_layers and grad_kv, the kept vectors' (with the kept slot) into grad_kept."""
        c, steps, span, batch, width = self.core.config, self.t, self.core.config.span, grad_y.shape[1], grad_y.shape[2]
        heads, mix = c.n_heads, self.mix.detach().unbind(0)
        d_embedded, d_mix = torch.empty_like(grad_y), []
        d_carry = None if gates.carry is None else torch.empty_like(grad_y)
        d_kept_gates = None if gates.kept is None else torch.empty_like(grad_y)
        onward = None  # with the carry: g_{t+1} c_{t+1} dm_{t+1}, the gradient at m_t through the next step's carry
        dk = None  # with the kept slot: the gradient at k_t, complete when the walk reaches step t
        for t in reversed(range(steps)):
            tape = self.tapes[t]
            dm = None
            for g, w in enumerate(self.groups):
                d_normed = torch.mm(grad_kv[g][..., span + t].reshape(batch, 2 * width).to(self.dtype), w.kv_w)  # keys' then values' (B, 2 D)
                dg = d_normed if w.norm_w is None else layer_norm_input_grad(d_normed, tape.m, tape.stats[g], w.norm_w)
                dm = dg if dm is None else dm + dg
            kept = None
            if tape.kept is not None:  # dk_t -> dm_t, da_t, and the share onward to k_{t-1}; step t's reads of k_{t-1} below
                if dk is None:  # k_{T-1}: nothing in the call reads it
                    d_kept_gates[t], onward_kept = 0, None
                else:
                    d_kept_gates[t] = dk * (tape.kept.carried - tape.m)
                    dm = dm + dk - gates.kept[t] * dk
                    onward_kept = tape.kept.onward * dk
                grads = [torch.zeros(2, batch, heads, width // heads, dtype=grad.dtype, device=grad.device) for grad in grad_kept]  # keys', values'
                kept = [read._replace(grad_keys=grad[0], grad_values=grad[1]) for read, grad in zip(tape.kept.reads, grads)]
            if tape.carry is not None:  # dm_t -> du_t, dg_t, and the share onward to m_{t-1}
                u, carried = tape.carry
                if onward is not None:
                    dm = dm + onward
                gate = gates.carry[t]
                d_carry[t] = dm * (self.memory[:, self.start + t - 1] * carried - u)
                onward = gate * carried * dm
                dm = dm - gate * dm  # du_t = (1 - g_t) dm_t
            if c.tanh_write:  # written = tanh(u_t): du_t = (1 - written^2) d written
                written = tape.m if tape.carry is None else tape.carry[0]
                dm = dm * (1 - written * written)
            dm_flat = dm.view(-1)
            d_mix.append(torch.stack([torch.dot(dm_flat, layer.h.view(-1)) for layer in tape.layers] + [torch.dot(dm_flat, self.tops[t].view(-1))]))
            dh = torch.addcmul(grad_y[t], dm, mix[-1])
            for layer in reversed(range(len(self.layers))):
                g = 0 if c.shared_kv else layer
                window = slice(t, t + span)
                dh = layer_backward(
                    dh, self.group_key_rows[g][:, :, window], self.group_values[g][..., window], grad_kv[g][:, 0, ..., window],
                    grad_kv[g][:, 1, ..., window], tape.seen, self.layers[layer], tape.layers[layer], self._scaled(tape.masks[layer]), c.pre_norm,
                    d_layers[layer], None if kept is None else kept[g],
                )
                dh = torch.addcmul(dh, dm, mix[layer])
            d_embedded[t] = dh
            if kept is not None:  # the gradient at k_{t-1}: through step t's reads (each group's projection) and its blend
                dk = onward_kept
                for g, w in enumerate(self.groups):
                    grad_kept[g][..., t] = grads[g].view(2, batch, width).transpose(0, 1).reshape(batch, 2 * width)
                    d_normed = torch.mm(grad_kept[g][..., t].to(self.dtype), w.kv_w)  # (B, D)
                    dg = d_normed if w.norm_w is None else layer_norm_input_grad(d_normed, tape.kept.read, tape.kept.stats[g], w.norm_w)
                    dk = dg if dk is None else dk + dg
        return d_embedded, torch.stack(d_mix[::-1]), Gates(d_carry, d_kept_gates)


def read_kept(groups: list[GroupWeights], kept: torch.Tensor, config: FeedbackConfig) -> tuple[list, list]:
    """The kept vector (B, D) as each key/value group projects it: its keys and values (B, H, E)
    each, per group, and the norms' statistics."""
    reads, stats = [], []
    for w in groups:
        kv, group_stats = project(w, kept)
        keys, values = kv.view(kept.shape[0], 2, config.n_heads, config.d_model // config.n_heads).unbind(1)
        reads.append((keys, values))
        stats.append(group_stats)
    return reads, stats


def split_keys_values(kv: torch.Tensor, config: FeedbackConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, n, 2 D) projected memory -> keys and values (B, H, n, E)."""
    batch, length, _ = kv.shape
    k, v = kv.view(batch, length, 2, config.n_heads, config.d_model // config.n_heads).permute(2, 0, 3, 1, 4)
    return k, v


def detached(weights: LayerWeights | GroupWeights) -> dict:
    """weights' fields by name, detached (None where absent)."""
    return {name: None if x is None else x.detach() for name, x in weights._asdict().items()}


class _Call(torch.autograd.Function):
    """A recording run's outputs handed to autograd: forward returns the tops its steps computed
    (they ran before, without autograd); backward is FeedbackRun.backward. The weights and the
    gates are inputs so that autograd sends their gradients on (to the parameters they were
    derived from: the gates' to the carry's and the kept slot's gate weights and to the embedding)."""

    @staticmethod
    def forward(ctx, embedded, carry_gates, kept_gates, run, *weights):
        ctx.run = run
        ctx.save_for_backward(carry_gates, kept_gates)  # (T, B, D) each, or None
        return torch.stack(run.tops)  # (T, B, D)

    @staticmethod
    def backward(ctx, grad_y):
        return ctx.run.backward(grad_y, Gates(*ctx.saved_tensors))
