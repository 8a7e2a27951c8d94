"""The long-term memory problems: batches of whole sequences, one target each.

Each training epoch visits the training sequences in a fresh order (derived from the seed and
the epoch), `batch_size` at a time; the loss is the squared error of the prediction at each
sequence's end. Evaluation reports the squared error and the fraction within the paper's
tolerance (metrics.TOLERANCE). Under torchrun each rank trains on its share of every batch
(`rows`), so the ranks together train on exactly the batch of one process.

Letters: K sequences in a batch, L steps of the longest, C = 2 input channels.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from seqtasks.data import Sequences
from seqtasks.metrics import within_tolerance
from seqtasks.streams import check_position


class SequenceRegime:
    def __init__(self, config, splits: dict[str, Sequences], device: torch.device, rows: slice = slice(None)):
        if len(splits["train"]) < config.batch_size:
            raise ValueError(f"n_train ({len(splits['train'])}) must be >= batch_size ({config.batch_size})")
        self.config, self.splits, self.device, self.rows = config, splits, device, rows
        self.epoch, self.batch = 0, 0

    def _tensors(self, split: str, chosen: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, lengths = self.splits[split].padded(chosen)  # (K, L, C), (K,)
        y = self.splits[split].targets[chosen]
        return (torch.from_numpy(x).to(self.device), torch.from_numpy(lengths).to(self.device), torch.from_numpy(y).to(self.device))

    def train_loss(self, model) -> tuple[torch.Tensor, torch.Tensor]:
        """The squared error of the next training batch, and its count of sequences (a tensor
        on the device, as the token streams give theirs)."""
        size = self.config.batch_size
        order = np.random.default_rng([self.config.seed, 1, self.epoch]).permutation(len(self.splits["train"]))
        chosen = order[self.batch * size : (self.batch + 1) * size][self.rows]
        self.batch += 1
        if (self.batch + 1) * size > len(order):  # no full batch left: next epoch
            self.epoch, self.batch = self.epoch + 1, 0
        x, lengths, y = self._tensors("train", chosen)
        loss = F.mse_loss(model(x, lengths).float(), y)  # float32 at any precision
        return loss, torch.full((), float(len(chosen)), device=self.device)

    @torch.no_grad()
    def evaluate(self, model, split: str) -> dict[str, float]:
        """loss (mean squared error) and accuracy (within tolerance) on `split`."""
        training = model.training
        model.eval()
        count = len(self.splits[split])
        predictions = []
        for start in range(0, count, self.config.batch_size):
            x, lengths, _ = self._tensors(split, np.arange(start, min(start + self.config.batch_size, count)))
            predictions.append(model(x, lengths).float().cpu())
        model.train(training)
        predicted, targets = torch.cat(predictions).numpy(), self.splits[split].targets
        return {"loss": float(np.mean((predicted - targets) ** 2)), "accuracy": within_tolerance(predicted, targets)}

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "batch": self.batch}

    def load_state_dict(self, saved: dict) -> None:
        """Continue from state_dict()'s; a ValueError naming a position the data does not have."""
        batches = max(1, len(self.splits["train"]) // self.config.batch_size)
        self.epoch, self.batch = check_position(saved, "epoch", None), check_position(saved, "batch", batches)
