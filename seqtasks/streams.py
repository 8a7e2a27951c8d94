"""Token tasks as the paper trains them: episodes concatenated into one stream, read in blocks.

A split's episodes (reshuffled each training epoch) are dealt into `rows` rows of about equal
token counts, each row a run of whole episodes, padded at the end. Each update reads the next
block of `bptt` steps of all rows, time-major (T, B), and the model's memory is carried from one
block to the next (detached: truncated backpropagation through time), reset only at the start
of an epoch. Memory is never reset between episodes: the model sees the episode boundaries in
its input (reset symbol, END, a new run of digits) and must learn them, as in the paper. The
loss covers only the tokens with a target. Under torchrun each rank trains on its share of the
rows (`rows`), so the ranks together train on exactly the rows of one process; evaluation is not
split (every rank evaluates the whole split, see seqtasks/train.py).

Letters: T steps per block, B rows, W steps per row, N tokens, V output tokens.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from agents.cores.state import move_state, state_from_plain, state_to_plain
from agents.runtime.distributed import unwrap
from seqtasks.data import IGNORE, Episodes
from seqtasks.metrics import sequence_accuracy, token_accuracy


class TokenStream:
    """A split dealt into rows of whole episodes: inputs, targets and each step's index into
    the split's flat arrays (-1 on padding), all (W, B) on `device`."""

    def __init__(self, episodes: Episodes, rows: int, device: torch.device):
        assert len(episodes) >= rows, f"{len(episodes)} episodes cannot fill {rows} rows"
        tokens = len(episodes.inputs)
        first_episode = np.searchsorted(episodes.offsets, np.arange(rows) * tokens / rows)  # (B,) episode starting each row
        bounds = np.append(episodes.offsets[first_episode], tokens)  # (B + 1,) token bounds of the rows
        lengths = np.diff(bounds)
        width = int(lengths.max())
        step = np.arange(width)[:, None]  # (W, 1)
        index = np.where(step < lengths[None, :], bounds[:-1][None, :] + step, -1)  # (W, B)
        self.index = index
        self.inputs = torch.from_numpy(np.where(index >= 0, episodes.inputs[index], 0)).to(device)
        self.targets = torch.from_numpy(np.where(index >= 0, episodes.targets[index], IGNORE)).to(device)

    @property
    def width(self) -> int:
        return self.inputs.shape[0]


def check_position(saved: dict, name: str, end: int | None) -> int:
    """`saved[name]`, a data position: an integer >= 0 (and < `end` where given); ValueError otherwise."""
    value = saved[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (end is not None and value >= end):
        raise ValueError(f"its {name} is {value!r}; it must be an integer in [0, {'any' if end is None else end})")
    return value


def block_loss(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean cross-entropy over the tokens with a target, and their count (a float tensor on the
    device: reading it to the host would be a synchronisation on CUDA). logits: (T, B, V)."""
    total = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE, reduction="sum")  # float32 at any precision
    count = (targets != IGNORE).sum().to(total.dtype)
    return total / count.clamp(min=1), count


class StreamRegime:
    """Training blocks and evaluation of a token task (see the module docstring)."""

    def __init__(self, config, splits: dict[str, Episodes], device: torch.device, rows: slice = slice(None)):
        for name, episodes in splits.items():
            if len(episodes) < config.batch_size:
                raise ValueError(f"n_{name} ({len(episodes)}) must be >= batch_size ({config.batch_size}): each row of a stream holds whole episodes")
        self.config, self.splits, self.device, self.rows = config, splits, device, rows
        self.epoch, self.block, self.state = 0, 0, None
        self._stream = None
        self._eval_streams: dict[str, TokenStream] = {}

    def _training_stream(self) -> TokenStream:
        if self._stream is None:
            order = np.random.default_rng([self.config.seed, 1, self.epoch]).permutation(len(self.splits["train"]))
            self._stream = TokenStream(self.splits["train"].select(order), self.config.batch_size, self.device)
        return self._stream

    def train_loss(self, model) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss of the next training block, and its count of tokens with a target (a tensor)."""
        stream, T = self._training_stream(), self.config.bptt
        window = slice(self.block * T, (self.block + 1) * T)
        inputs, targets = stream.inputs[window, self.rows], stream.targets[window, self.rows]  # (T, B) of this rank's rows
        if self.state is None:
            self.state = unwrap(model).initial_state(inputs.shape[1], self.device)
        first = torch.zeros_like(inputs, dtype=torch.bool)
        first[0] = self.block == 0
        logits, self.state = model(inputs, self.state, first)
        self.block += 1
        if self.block * T >= stream.width:  # epoch over: next one reshuffled, memory reset
            self.epoch, self.block, self.state, self._stream = self.epoch + 1, 0, None, None
        return block_loss(logits, targets)

    @torch.no_grad()
    def evaluate(self, model, split: str) -> dict[str, float]:
        """loss, accuracy (per token) and sequence_accuracy (whole episodes) on `split`."""
        if split not in self._eval_streams:
            self._eval_streams[split] = TokenStream(self.splits[split], self.config.batch_size, self.device)
        stream, T = self._eval_streams[split], self.config.bptt
        training = model.training
        model.eval()
        state = model.initial_state(stream.inputs.shape[1], self.device)
        first = torch.zeros_like(stream.inputs[:T], dtype=torch.bool)
        predictions, total, count = [], 0.0, 0
        for start in range(0, stream.width, T):
            inputs, targets = stream.inputs[start : start + T], stream.targets[start : start + T]
            first[0] = start == 0
            logits, state = model(inputs, state, first[: len(inputs)])
            loss, n = block_loss(logits, targets)
            total, count = total + float(loss) * float(n), count + int(n)
            predictions.append(logits.argmax(-1).cpu())
        model.train(training)
        predicted = torch.cat(predictions).numpy()  # (W, B)
        episodes = self.splits[split]
        flat = np.empty_like(episodes.targets)
        flat[stream.index[stream.index >= 0]] = predicted[stream.index >= 0]
        return {
            "loss": total / max(count, 1),
            "accuracy": token_accuracy(flat, episodes.targets),
            "sequence_accuracy": sequence_accuracy(flat, episodes.targets, episodes.offsets),
        }

    def state_dict(self) -> dict:
        state = None if self.state is None else state_to_plain(move_state(self.state, "cpu"))
        return {"epoch": self.epoch, "block": self.block, "state": state}

    def load_state_dict(self, saved: dict) -> None:
        """Continue from state_dict()'s; a ValueError naming a position the stream does not have."""
        self.epoch, self.block, self._stream = check_position(saved, "epoch", None), check_position(saved, "block", None), None
        if self.block * self.config.bptt >= self._training_stream().width:
            raise ValueError(f"block {self.block} is past the training stream's {self._training_stream().width} steps")
        self.state = None if saved["state"] is None else move_state(state_from_plain(saved["state"]), self.device)

