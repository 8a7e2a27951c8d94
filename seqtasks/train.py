"""The training loop of a seqtasks run: updates, validation with early stop, checkpoints, test.

    run = Run.create(config, core_options, run_dir)    # or Run.resume(run_dir)
    results = run.train()                              # test metrics of the best validation

A run folder holds config.json (the resolved config and core options), TensorBoard events,
checkpoint.pt (written atomically every `save_every` seconds and on any exit, Ctrl-C included)
and, at the end, results.json: the test metrics of the best validated weights, the parameter
counts (trained and frozen), and the history of every validation (update, training seconds so
far, metrics), from which an experiment reads accuracy at equal updates or at equal wall-clock
time. Training seconds count the updates only (not validation, checkpoints or logging), summed
over a resumed run's sittings.

A checkpoint holds everything the run depends on: weights, optimiser and schedule, counters, the
best weights so far, the data position (epoch, block, the carried memory), the validation history
and every random generator's state, so a resumed run makes the same updates as one never
stopped. The data is not stored: it is regenerated from the seed.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.checkpoint import CheckpointError, checkpoint_path, load_checkpoint, save_checkpoint
from agents.device import resolve_device
from agents.interrupt import StopOnInterrupt, held_interrupt
from agents.seeding import rng_states, seed_everything, set_rng_states
from seqtasks.config import SeqConfig
from seqtasks.models import build_model
from seqtasks.sequences import SequenceRegime
from seqtasks.splits import make_splits
from seqtasks.streams import StreamRegime
from seqtasks.tasks import make_task

KIND = "seqtasks"
RESUME_OVERRIDES = ("max_updates", "max_minutes", "save_every", "device", "threads")  # what --resume may change


def make_optimizer(config: SeqConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.lr)
    return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum, nesterov=True)


def warmup_schedule(config: SeqConfig, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate grows linearly over the first `warmup` updates, then stays."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda update: min(1.0, (update + 1) / (config.warmup + 1)))


class Run:
    def __init__(self, config: SeqConfig, core_options: dict, run_dir: Path, payload: dict | None = None):
        self.config, self.core_options, self.run_dir = config, core_options, Path(run_dir)
        self.device = resolve_device(config.device)
        if config.threads:
            torch.set_num_threads(config.threads)
        seed_everything(config.seed)
        self.task = make_task(config.task, config)
        splits = make_splits(self.task, {"train": config.n_train, "valid": config.n_valid, "test": config.n_test}, config.seed)
        regime_class = StreamRegime if self.task.kind == "tokens" else SequenceRegime
        self.regime = regime_class(config, splits, self.device)
        self.model = build_model(config, self.task, core_options).to(self.device)
        self.optimizer = make_optimizer(config, self.model)
        self.schedule = warmup_schedule(config, self.optimizer)
        self.update, self.best_accuracy, self.evals_since_best, self.stopped_early = 0, -1.0, 0, False
        self.train_seconds = 0.0  # spent in step(), over all sittings
        self.history: list[dict] = []  # one entry per validation: update, seconds, metrics
        self.best_model = copy.deepcopy(self.model.state_dict())
        if payload is not None:
            self._restore(payload)

    @classmethod
    def create(cls, config: SeqConfig, core_options: dict, run_dir: str | Path) -> Run:
        run = cls(config, core_options, Path(run_dir))
        run.run_dir.mkdir(parents=True, exist_ok=True)
        (run.run_dir / "config.json").write_text(json.dumps(run.describe(), indent=2) + "\n")
        return run

    @classmethod
    def resume(cls, run_dir: str | Path, overrides: dict | None = None) -> Run:
        """Continue the run in `run_dir` (a folder or its checkpoint file); `overrides` may change
        the fields in RESUME_OVERRIDES only."""
        overrides = overrides or {}
        refused = sorted(set(overrides) - set(RESUME_OVERRIDES))
        if refused:
            raise ValueError(f"--resume continues a run with its saved config; it cannot change {refused} (only {list(RESUME_OVERRIDES)})")
        payload = load_checkpoint(run_dir, KIND, map_location="cpu")
        try:
            config = SeqConfig(**{**payload["config"], **overrides})
            core_options = payload["core_options"]
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"checkpoint {str(checkpoint_path(run_dir))!r} is incompatible with this version: {error}") from error
        return cls(config, core_options, checkpoint_path(run_dir).parent, payload)

    def describe(self) -> dict:
        return {"config": dataclasses.asdict(self.config), "core_options": self.core_options}

    def _restore(self, payload: dict) -> None:
        try:
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
            self.schedule.load_state_dict(payload["schedule"])
            self.best_model = payload["best_model"]
            self.regime.load_state_dict(payload["regime"])
            counters = payload["counters"]
            self.update, self.best_accuracy = counters["update"], counters["best_accuracy"]
            self.evals_since_best, self.stopped_early = counters["evals_since_best"], counters["stopped_early"]
            self.train_seconds, self.history = counters["train_seconds"], payload["history"]
            set_rng_states(payload["rng"])
        except (KeyError, RuntimeError, ValueError, TypeError) as error:
            raise CheckpointError(f"checkpoint in {str(self.run_dir)!r} does not match its run's model or config: {error}") from error

    def save(self) -> Path:
        counters = {"update": self.update, "best_accuracy": self.best_accuracy, "evals_since_best": self.evals_since_best,
                    "stopped_early": self.stopped_early, "train_seconds": self.train_seconds}
        return save_checkpoint(self.run_dir / "checkpoint.pt", KIND, {
            **self.describe(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "best_model": self.best_model,
            "regime": self.regime.state_dict(),
            "counters": counters,
            "history": self.history,
            "rng": rng_states(),
        })

    def _validate(self, writer: SummaryWriter) -> bool:
        """Validate, keep the best weights; True when training should stop early."""
        metrics = self.regime.evaluate(self.model, "valid")
        self.history.append({"update": self.update, "seconds": round(self.train_seconds, 3), **metrics})
        for name, value in metrics.items():
            writer.add_scalar(f"eval/valid_{name}", value, self.update)
        if metrics["accuracy"] > self.best_accuracy:
            self.best_accuracy, self.evals_since_best = metrics["accuracy"], 0
            self.best_model = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        else:
            self.evals_since_best += 1
        patience = self.config.patience
        return self.best_accuracy >= 1.0 or (patience > 0 and self.evals_since_best >= patience)

    def step(self) -> tuple[torch.Tensor, int]:
        """One update: the next batch's loss (returned detached, with its count of targets),
        backward, gradient clip, optimiser and schedule steps."""
        started = time.perf_counter()
        loss, count = self.regime.train_loss(self.model)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        self.schedule.step()
        self.update += 1
        # No device sync here: on a GPU the clock runs ahead of queued kernels by a few updates at
        # most, which validation (it copies results to the host) catches up.
        self.train_seconds += time.perf_counter() - started
        return loss.detach(), count

    def _out_of_time(self, started: float) -> bool:
        return self.config.max_minutes > 0 and time.monotonic() - started >= 60 * self.config.max_minutes

    def train(self, progress: bool = True) -> dict:
        """Train until max_updates or an early stop, then test the best weights; returns the
        results (also written to results.json).

        The first Ctrl-C ends in KeyboardInterrupt with a checkpoint to resume from. Until the
        checkpoint after the last update is written, it lets the update or validation under way
        finish, then saves (a second one stops at once, and still saves). In the test after
        that it stops at once: the checkpoint already holds the whole run, and resuming it runs
        the test again."""
        c = self.config
        interrupt = StopOnInterrupt()
        with interrupt:
            # The checkpoint is written after its update's logs, so a resumed run drops only what
            # was logged after it: updates beyond self.update.
            writer = SummaryWriter(str(self.run_dir), purge_step=self.update + 1 if self.update else None)
            bar = tqdm(total=c.max_updates, initial=self.update, disable=not progress, desc=f"{c.task}/{c.core}", unit="upd")
            self.model.train()
            try:
                self._loop(writer, bar, interrupt)
            finally:  # Ctrl-C and errors too: the run can be resumed from here
                bar.close()
                self.save()
                writer.flush()
        if interrupt.requested:
            raise KeyboardInterrupt
        results = self._test(writer)
        writer.close()
        return results

    def _loop(self, writer: SummaryWriter, bar: tqdm, interrupt: StopOnInterrupt) -> None:
        """Update, log, validate and checkpoint until done, stopped early, out of time or asked to stop."""
        c = self.config
        started, last_save, items = time.monotonic(), time.monotonic(), 0
        while not self.stopped_early and self.update < c.max_updates and not self._out_of_time(started) and not interrupt.requested:
            loss, count = self.step()
            items += count
            bar.update(1)
            if self.update % c.log_every == 0:
                rate = items / (time.monotonic() - started)
                writer.add_scalar("losses/train", loss.item(), self.update)
                writer.add_scalar("charts/learning_rate", self.schedule.get_last_lr()[0], self.update)
                writer.add_scalar("charts/targets_per_second", rate, self.update)
                bar.set_postfix(loss=f"{loss.item():.4f}", best=f"{self.best_accuracy:.3f}", tps=f"{rate:.0f}")
            if self.update % c.eval_every == 0 or self.update == c.max_updates or self._out_of_time(started):
                self.stopped_early = self._validate(writer)
            if time.monotonic() - last_save >= c.save_every:
                self.save()
                last_save = time.monotonic()

    def _test(self, writer: SummaryWriter) -> dict:
        """Metrics of the best validated weights on valid and test; writes results.json."""
        self.model.load_state_dict(self.best_model)
        results = {
            "task": self.config.task,
            "core": self.config.core,
            "updates": self.update,
            "train_seconds": round(self.train_seconds, 3),
            "parameters": {
                "trained": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
                "frozen": sum(p.numel() for p in self.model.parameters() if not p.requires_grad),
            },
            "valid": self.regime.evaluate(self.model, "valid"),
            "test": self.regime.evaluate(self.model, "test"),
        }
        results["history"] = self.history
        for name, value in results["test"].items():
            writer.add_scalar(f"eval/test_{name}", value, self.update)
        with held_interrupt():  # never a half-written file
            (self.run_dir / "results.json").write_text(json.dumps(results) + "\n")
        return results
