"""The policy's acting step replayed from one CUDA graph (`--cuda-graph`).

On a GPU, an acting step of the Feedback core is a few hundred small kernels launched one by one
from Python: at the paper's sizes their launches, not their arithmetic, set its speed (acting was
58% of an A2C run on an H200: docs/speed.md, "On a GPU"). A CUDA graph records the step's kernels
once and replays them all with one launch. That asks three things of the step, and here it has
them: its inputs and carried memory at fixed addresses (the static input tensors below, and the
core's `static_acting`: agents/cores/static_acting.py), nothing read back to the host, and no
Python decision that changes from one step to the next.

    acting = GraphedActing(policy, batch, device)
    acting.begin(state)                    # before a rollout: the core state copied in
    logits, value = acting.act(inputs)     # one step: (B, A), (B,); inputs (1, B, ...) as Actor.staged() makes them
    state = acting.end()                   # after it: the core state for the learner and checkpoints

The graph is captured at the first `act` (after a few warm-up steps on a side stream, as CUDA
graphs need; the memory those steps advanced is copied back from the state `begin` took). It
reads the weights where they live: an optimiser updates them in place, and the weights a core
derives for its steps (the Feedback core's scaled query, softmax(w), ...) are derived again into
the same tensors by every `begin`. So a graph captured once serves the whole run.

`capture=False` runs the same function without a graph: on the CPU, where tests check everything
but the capture itself (tests/agents/test_graphed_acting.py; the capture: tests/test_cuda.py).
"""

from __future__ import annotations

import contextlib

import torch

from agents.cores.static_acting import static_acting
from agents.model.policy import Policy
from agents.model.step_inputs import StepInputs

WARMUP_STEPS = 3  # eager steps on a side stream before the capture (lazy initialisation of cuBLAS and the like)


class GraphedActing:
    """Acting without gradients through one captured step (see the module docstring)."""

    def __init__(self, policy: Policy, batch: int, device: torch.device | str, capture: bool = True):
        self.device = torch.device(device)
        if capture and self.device.type != "cuda":
            raise ValueError(f"a CUDA graph needs a CUDA device; this policy acts on {self.device}")
        self.policy, self.capture = policy, capture
        self.core = static_acting(policy.core, batch, self.device)
        self.inputs: list[torch.Tensor] | None = None  # obs (B, N), prev_action (B,), prev_reward (B,), first (B,): what the step reads
        self.graph: torch.cuda.CUDAGraph | None = None
        self.outputs: tuple[torch.Tensor, torch.Tensor] | None = None  # the captured step's logits and value
        self.began = None  # the state `begin` took, to undo the warm-up's steps

    def begin(self, state) -> None:
        """Continue from the core state `state` (copied in; the core's derived weights made again)."""
        self.core.load(state)
        self.began = state

    def end(self):
        """The core state after the steps taken since `begin`."""
        return self.core.state()

    def act(self, inputs: StepInputs) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of every env from `inputs` (one step, (1, B, ...) each) -> logits (B, A), value (B,)."""
        if self.began is None:
            raise RuntimeError("GraphedActing.act before begin(state): the core state to act from is not loaded")
        step = (inputs.obs[0], inputs.prev_action[0], inputs.prev_reward[0], inputs.first[0])
        if self.inputs is None:
            self.inputs = [x.clone() for x in step]
        for kept, given in zip(self.inputs, step, strict=True):
            kept.copy_(given)
        if not self.capture:
            return self._step()
        if self.graph is None:
            self._capture()
        self.graph.replay()
        return self.outputs[0].clone(), self.outputs[1].clone()  # the next replay writes over the graph's own

    def written_memory(self) -> torch.Tensor:
        """(B, D): the memory vector the last step wrote (the Feedback core's ring only), a copy."""
        return self.core.written_memory().clone()

    def _step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """What the graph holds: encoder, core step, heads, from and into the fixed tensors."""
        obs, prev_action, prev_reward, first = self.inputs
        with torch.no_grad():
            y = self.core.step(self.policy.encode(obs, prev_action, prev_reward), first)
            return self.policy.actor(y), self.policy.critic(y).squeeze(-1)

    def _capture(self) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side), _uncached_autocast(self.device):
            for _ in range(WARMUP_STEPS):
                self._step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), _uncached_autocast(self.device):
            self.outputs = self._step()
        self.core.load(self.began)  # the warm-up stepped the memory on: back to where begin() left it


def _uncached_autocast(device: torch.device):
    """The autocast the caller has on (bf16 runs act under it), without its cache of cast weights:
    a graph must cast the weights inside it, from where the optimiser updates them, not keep the
    copies made when it was captured."""
    if not torch.is_autocast_enabled(device.type):
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.get_autocast_dtype(device.type), cache_enabled=False)
