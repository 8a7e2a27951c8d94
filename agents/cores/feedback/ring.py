"""The Feedback core's acting step on buffers that never move: a step a CUDA graph can capture.

FeedbackCore acts by extending its state's buffers (append_log.py): step t writes slot t, reads
the window of slots [t - S, t) at a Python offset, and every HEADROOM steps starts new buffers.
A CUDA graph replays the same kernels on the same addresses, so none of that can be captured.
Here the memory is a ring of S slots instead, on tensors made once:

- the step reads the whole ring (attention is a sum over slots: their order does not matter) and
  then writes its memory vector, keys and values into the oldest slot, `head`, a tensor on the
  device; `head` and the per-env count of slots in the running episode are advanced in place;
- what depends on a slot's age is gathered from the ages, on the device: its position embedding
  (distance d steps back reads position row d, as FeedbackCore's window slot S - d does) and
  whether it belongs to the running episode (d <= count);
- the weights the steps read (the scaled query, softmax(w), ...) are derived into tensors of
  their own by `load`, once per rollout, so a replay reads the weights of the last `load`;
- with the carry (carry="gate"), the step's gate comes from its embedded input, as the
  embedding does (the gate's weights read where they are), and m_{t-1} is the slot before `head`,
  carried while the episode has a slot (count > 0); with the tanh write (memory_write="tanh")
  the step writes tanh of its layers' sum, before the carry's blend, as FeedbackRun does; with
  the kept slot (keep_slot=True) the ring holds k_{t-1} and its keys and values beside the slots,
  read after them at the kept position row, visible and carried while count > 0, and the step
  writes k_t, its gate made as the carry's is.

`load(state)` copies a FeedbackState's window in and recomputes its keys and values with the
current weights (as every first acting call after an update does); `state()` hands the ring back
as a FeedbackState that FeedbackCore continues from. The outputs equal FeedbackCore's acting
calls' up to the order of the sums over slots (tests/cores/test_feedback_ring.py).

Letters: B envs, S span, D model width, H heads, G key/value groups, E head width.
"""

from __future__ import annotations

import torch

from agents.cores.append_log import AppendLog, capacity_for
from agents.cores.dtypes import compute_dtype, exact, masked_score
from agents.cores.feedback.core import FeedbackCore, FeedbackState, Gates, read_kept, split_keys_values
from agents.cores.feedback.step import GroupWeights, KeptRead, LayerWeights, layer_forward, project
from agents.cores.weights_version import weights_version


class FeedbackRing:
    """A FeedbackCore's acting memory for `batch` envs on `device`, as a ring of S slots."""

    def __init__(self, core: FeedbackCore, batch: int, device: torch.device):
        c = core.config
        if core.training and c.dropout > 0:
            raise ValueError(f"the Feedback ring acts without dropout; the core has dropout={c.dropout} and is in training mode (call .eval())")
        self.core, self.device, self.batch = core, torch.device(device), batch
        self.head = torch.zeros((), dtype=torch.long, device=self.device)  # the ring slot the next step writes: the oldest
        self.count = torch.zeros(batch, dtype=torch.long, device=self.device)  # (B,) slots of the running episode, <= S
        self.slots = torch.arange(c.span, device=self.device)
        self.version = None  # the weights_version the ring's keys and values were made with
        self._allocate(compute_dtype(self.device, core.layer_logits.dtype))

    def _allocate(self, dtype: torch.dtype) -> None:
        """The ring's buffers and weights in `dtype`, the one its steps compute in."""
        self.dtype = dtype
        like = torch.empty(0, dtype=dtype, device=self.device)
        self.memory, self.keys, self.values = self.core._new_buffers(self.batch, self.core.config.span, like, torch.zeros)  # (B, S, D), (B, H, G, E, S) x 2
        self.written = like.new_zeros(self.batch, self.core.config.d_model)  # (B, D) the last step's memory vector
        self.kept = self.core._empty_kept(self.batch, like)  # (B, D) k_{t-1} with the kept slot, else (B, 0) ...
        self.kept_keys, self.kept_values = (like.new_zeros(self.batch, *self.keys.shape[1:-1]) for _ in range(2))  # ... its (B, H, G, E) each
        self.zero, self.neg_inf = like.new_zeros(()), like.new_full((), masked_score(dtype))
        self.weights = None  # (softmax(w), layers, groups) as the steps read them: made by load

    def load(self, state: FeedbackState) -> None:
        """Continue from `state`: its window's memory copied in, oldest first from slot 0, its keys
        and values recomputed with the core's current weights (derived again here). The ring
        computes in the dtype a call would here (autocast's, where it is on: a bf16 run loads under
        it); a load in another dtype than the last makes new buffers, which a graph captured
        before would not see."""
        span = self.core.config.span
        dtype = compute_dtype(self.device, self.core.layer_logits.dtype)
        if dtype != self.dtype:
            self._allocate(dtype)
        with torch.no_grad(), exact(self.device):
            self._derive_weights()
            self.memory.copy_(state.memory[:, state.end - span : state.end])
            self.head.zero_()
            self.count.copy_(state.valid.sum(dim=1))
            for g, weights in enumerate(self.weights[2]):
                keys, values = split_keys_values(project(weights, self.memory)[0], self.core.config)  # (B, H, S, E) each
                self.keys[:, :, g].copy_(keys.transpose(-1, -2))
                self.values[:, :, g].copy_(values.transpose(-1, -2))
            if self.core.config.keep_slot:
                self.kept.copy_(self.core.own_state(state).kept)
                self._project_kept()

    def _project_kept(self) -> None:
        """The kept vector's keys and values, from each key/value group, into their tensors."""
        for g, (keys, values) in enumerate(read_kept(self.weights[2], self.kept, self.core.config)[0]):  # (B, H, E) each
            self.kept_keys[:, :, g].copy_(keys)
            self.kept_values[:, :, g].copy_(values)

    def _derive_weights(self) -> None:
        """The core's call weights in the ring's dtype, into the same tensors on every load (a
        captured step reads them there)."""
        mix, layers, groups = self.core.call_weights()
        if self.weights is None:
            cast = lambda x: None if x is None else x.detach().to(self.dtype).clone()  # noqa: E731
            self.weights = (cast(mix), [LayerWeights(*map(cast, w)) for w in layers], [GroupWeights(*map(cast, w)) for w in groups])
        else:
            for kept, new in zip(_flat(self.weights), _flat((mix, layers, groups))):
                if kept is not None:
                    kept.copy_(new)
        self.version = weights_version(self.core)

    def step(self, x: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """x (B, input_dim), first (B,) bool -> the core's output (B, D), final norm included; the
        ring advanced by one step in place. Fixed shapes and addresses, nothing read back."""
        with torch.no_grad():
            embedded = self.core.embed(x)
            gates = self.core.gates(embedded)  # (B, D) g_t and a_t, each None where the core has no such gate
            with exact(self.device):
                top = self._advance(embedded.to(self.dtype), first, gates.to(self.dtype))
            return self.core.norm_out(top)

    def _advance(self, embedded: torch.Tensor, first: torch.Tensor, gates: Gates) -> torch.Tensor:
        c, span = self.core.config, self.core.config.span
        mix, layers, groups = self.weights
        self.count.masked_fill_(first, 0)
        distance = (self.head - 1 - self.slots).remainder(span) + 1  # (S,) how many steps back each ring slot was written
        visible = distance[None, :] <= self.count[:, None]  # (B, S)
        bias = torch.where(visible, self.zero, self.neg_inf)[:, None, :]  # (B, 1, S)
        seen = (self.count > 0).to(self.dtype)[:, None, None]  # (B, 1, 1)
        rows = span - distance  # (S,) the FeedbackCore window slot standing d steps back: its position row
        if c.keep_slot:  # then the kept slot's row, after the window's
            rows = torch.cat([rows, self.slots.new_full((1,), span)])
        kept_bias = torch.where(seen > 0, self.zero, self.neg_inf)  # (B, 1, 1): k_{t-1} is read while the episode has a slot
        h, m = embedded, mix[0] * embedded
        for layer, w in enumerate(layers):
            g = 0 if c.shared_kv else layer
            w = w._replace(positions=w.positions.index_select(0, rows))
            kept = KeptRead(self.kept_keys[:, :, g], self.kept_values[:, :, g], kept_bias) if c.keep_slot else None
            h, _ = layer_forward(h, self.keys[:, :, g], self.values[:, :, g].transpose(-1, -2), bias, seen, w, None, c.pre_norm, kept)
            m = torch.addcmul(m, mix[layer + 1], h)
        if c.tanh_write:
            m = torch.tanh(m)
        if gates.carry is not None:  # the carry: m_t = g_t (c_t m_{t-1}) + (1 - g_t) u_t, as FeedbackRun writes it
            previous = self.memory.index_select(1, (self.head - 1).remainder(span)[None])[:, 0]  # (B, D) m_{t-1}: the newest slot
            m = torch.addcmul((1 - gates.carry) * m, gates.carry, previous * seen[:, 0])  # seen (B, 1): c_t, m_{t-1} is this episode's
        if gates.kept is not None:  # the kept slot: k_t = a_t (c_t k_{t-1}) + (1 - a_t) m_t
            self.kept.copy_(torch.addcmul((1 - gates.kept) * m, gates.kept, self.kept * seen[:, 0]))
            self._project_kept()
        at = self.head[None]  # (1,) the oldest slot, read above, now overwritten
        self.memory.index_copy_(1, at, m[:, None])
        self.written.copy_(m)
        for g, weights in enumerate(groups):
            keys, values = split_keys_values(project(weights, m[:, None])[0], self.core.config)  # (B, H, 1, E) each
            self.keys[:, :, g].index_copy_(-1, at, keys.transpose(-1, -2))
            self.values[:, :, g].index_copy_(-1, at, values.transpose(-1, -2))
        self.count.add_(1).clamp_(max=span)
        self.head.add_(1).remainder_(span)
        return h

    def written_memory(self) -> torch.Tensor:
        """(B, D): the memory vector the last step wrote (the ring's own tensor: the next step
        writes over it)."""
        return self.written

    def state(self) -> FeedbackState:
        """The ring as a FeedbackState (new buffers, oldest slot first), for FeedbackCore to go on from."""
        span = self.core.config.span
        oldest_first = (self.head + self.slots).remainder(span)  # (S,)
        memory, keys, values = self.core._new_buffers(self.count.shape[0], capacity_for(span, 0), self.memory)
        memory[:, :span] = self.memory.index_select(1, oldest_first)
        keys[..., :span] = self.keys.index_select(-1, oldest_first)
        values[..., :span] = self.values.index_select(-1, oldest_first)
        valid = self.slots[None, :] >= span - self.count[:, None]  # (B, S): the last `count` slots
        return FeedbackState(memory, keys, values, valid, span, self.version, AppendLog(span), self.kept.clone())


def _flat(weights: tuple) -> list:
    """(softmax(w), layers, groups) -> every tensor (or None) in one list, in a fixed order."""
    mix, layers, groups = weights
    return [mix, *[x for w in layers for x in w], *[x for w in groups for x in w]]
