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

Under torchrun (agents/runtime/distributed.py) each rank trains on its share of the batch's rows (the
streams' rows, the sequences of a batch) with the model wrapped in DistributedDataParallel; each
rank's loss is weighted by its share of the batch's targets, so the averaged gradient is that of
the mean over the whole batch, as one process computes it (to float rounding; dropout masks are
drawn per rank, so with dropout the ranks are a statistically equal run, not the same one). The
ranks agree after every update on stopping (Ctrl-C, out of time) and saving. Evaluation is not
split: every rank evaluates the whole split (no longer than one process would) and rank 0's
numbers are used, so every rank takes the same early-stop decision; rank 0 alone logs and
writes config.json, checkpoints (with every rank's carried memory) and results.json.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import time
from pathlib import Path

import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from agents.config.config_cli import run_core_options
from agents.runtime import distributed
from agents.runtime.memory_budget import check_model_fits
from agents.runtime.checkpoint_fields import check_counters, check_like, check_number, check_world_size, restore
from agents.runtime.checkpoint import CheckpointError, checkpoint_path, load_checkpoint, run_checkpoint, save_checkpoint
from agents.runtime.device import resolve_device
from agents.runtime.freed_memory import keep_freed_memory
from agents.runtime.finite_watch import FiniteWatch, NonFiniteError, total_norm
from durable.interrupt import StopOnInterrupt
from agents.runtime.precision import autocast
from durable.records import write_json
from agents.runtime.seeding import rng_states, seed_everything, set_rng_states
from seqtasks.config import SeqConfig
from seqtasks.models import SEQUENCE_ONLY, build_model
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
        self.world = distributed.init()
        self.device = distributed.device_for(resolve_device(config.device), self.world)
        if config.threads:
            torch.set_num_threads(config.threads)
        keep_freed_memory()  # no page faults on the memory each update frees and takes again
        seed_everything(config.seed)
        self.task = make_task(config.task, config)
        splits = make_splits(self.task, {"train": config.n_train, "valid": config.n_valid, "test": config.n_test}, config.seed)
        regime_class = StreamRegime if self.task.kind == "tokens" else SequenceRegime
        self.regime = regime_class(config, splits, self.device, slice(*self.world.share(config.batch_size, "batch_size")))
        check_model_fits(lambda: build_model(config, self.task, core_options), f"the {config.core} model",
                         "lower --d-model, --n-layers or the core's widths (--core-opt)")  # before it is allocated
        self.model = build_model(config, self.task, core_options).to(self.device)
        self.train_model = distributed.data_parallel(self.model, self.world)  # for the training forward
        self.optimizer = make_optimizer(config, self.model)
        self.schedule = warmup_schedule(config, self.optimizer)
        self.update, self.best_accuracy, self.evals_since_best, self.stopped_early = 0, -1.0, 0, False
        self.finite = FiniteWatch()  # stops training at a non-finite loss or gradient, before it is saved
        self.train_seconds = 0.0  # spent in step(), over all sittings
        self.history: list[dict] = []  # one entry per validation: update, seconds, metrics
        self.best_model = copy.deepcopy(self.model.state_dict())
        if payload is not None:
            self._restore(payload)

    @classmethod
    def create(cls, config: SeqConfig, core_options: dict, run_dir: str | Path) -> Run:
        """A new run in `run_dir`, its config.json written."""
        run = cls(config, core_options, Path(run_dir))
        run.write_config()
        return run

    def write_config(self) -> None:
        """The run folder's config.json (rank 0's job)."""
        if self.world.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_json(self.run_dir / "config.json", self.describe(), indent=2)

    @classmethod
    def resume(cls, run_dir: str | Path, overrides: dict | None = None) -> Run:
        """Continue the run in `run_dir` (a folder or its checkpoint file); `overrides` may change
        the fields in RESUME_OVERRIDES only."""
        overrides = overrides or {}
        refused = sorted(set(overrides) - set(RESUME_OVERRIDES))
        if refused:
            raise ValueError(f"--resume continues a run with its saved config; it cannot change {refused} (only {list(RESUME_OVERRIDES)})")
        distributed.init()
        # Rank 0 reads it and sends it to the others, whose machines need not hold the run folder.
        payload = distributed.from_main(lambda: load_checkpoint(run_dir, KIND, map_location="cpu"), "reading the checkpoint")
        try:
            config = SeqConfig(**{**payload["config"], **overrides})
            core_options = payload["core_options"]
            if config.core not in SEQUENCE_ONLY:  # the run's choices, chosen again where they cannot run here
                core_options = run_core_options(config.core, core_options, config.device, config.precision, saved=True)
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"checkpoint {str(checkpoint_path(run_dir))!r} is incompatible with this version: {error}") from error
        return cls(config, core_options, checkpoint_path(run_dir).parent, payload)

    def describe(self) -> dict:
        return {"config": dataclasses.asdict(self.config), "core_options": self.core_options}

    def _restore(self, payload: dict) -> None:
        """Take up the checkpoint's state, each field checked first (agents/runtime/checkpoint_fields.py)."""
        try:
            self.model.load_state_dict(payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
            self.schedule.load_state_dict(payload["schedule"])
        except (KeyError, RuntimeError, ValueError, TypeError) as error:
            raise CheckpointError(f"checkpoint in {str(self.run_dir)!r} does not match its run's model or config: {error}") from error
        check_like("best_model", payload.get("best_model"), self.model.state_dict())  # saved again at every checkpoint
        self.best_model = payload["best_model"]
        saved_world = check_world_size(payload, ("regime", "rng"))  # 1 before torchrun
        regime = distributed.own_part(payload, "regime", self.world)
        if saved_world != self.world.size and isinstance(regime, dict):  # the carried memory has other rows: start it afresh
            regime = {**regime, "state": None}
            if self.world.main:
                print(f"the carried memory restarts: the number of processes differs ({saved_world} saved, {self.world.size} now)",
                      file=sys.stderr)
        restore("data position (regime)", lambda: self.regime.load_state_dict(regime))
        counters = check_counters(payload.get("counters"), ("update", "evals_since_best"))
        self.update, self.evals_since_best = counters["update"], counters["evals_since_best"]
        self.best_accuracy = check_number("best_accuracy", counters.get("best_accuracy"), -1.0)
        self.train_seconds = check_number("train_seconds", counters.get("train_seconds"))
        self.stopped_early = counters.get("stopped_early")
        if not isinstance(self.stopped_early, bool):
            raise CheckpointError(f"the checkpoint's counter stopped_early is {self.stopped_early!r}; it must be True or False")
        self.history = payload.get("history")
        if not isinstance(self.history, list) or not all(isinstance(entry, dict) for entry in self.history):
            raise CheckpointError("the checkpoint's history must be a list of validation records (dicts)")
        restore("random generator states (rng)", lambda: set_rng_states(distributed.own_part(payload, "rng", self.world)))

    def save(self) -> Path | None:
        """Write the checkpoint (on rank 0; under torchrun every rank must call this): "regime"
        and "rng" are lists of every rank's own when there are several. A NonFiniteError instead
        if an update since the start was not finite (agents/runtime/finite_watch.py), on every rank alike."""
        self.finite.check_run(self.run_dir)
        own = {"regime": self.regime.state_dict(), "rng": rng_states()}  # the carried memory on the CPU
        own = distributed.gather_parts(own, self.world, "gathering the checkpoint")
        path = None
        if own is not None:
            counters = {"update": self.update, "best_accuracy": self.best_accuracy, "evals_since_best": self.evals_since_best,
                        "stopped_early": self.stopped_early, "train_seconds": self.train_seconds}
            path = save_checkpoint(run_checkpoint(self.run_dir), KIND, {
                **self.describe(),
                "world_size": self.world.size,
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "schedule": self.schedule.state_dict(),
                "best_model": self.best_model,
                "counters": counters,
                "history": self.history,
                **own,
            })
        distributed.wait_for_all("waiting for the checkpoint to be written")
        return path

    def evaluate(self, split: str) -> dict[str, float]:
        """The model's metrics on `split`, computed at the run's precision."""
        with autocast(self.device, self.config.precision):
            return self.regime.evaluate(self.model, split)

    def _validate(self, writer: SummaryWriter) -> bool:
        """Validate, keep the best weights; True when training should stop early."""
        metrics = self.evaluate("valid")
        metrics = distributed.from_main(lambda: metrics, "sharing validation results")  # one decision for all ranks
        self.history.append({"update": self.update, "seconds": round(self.train_seconds, 3), **metrics})
        for name, value in metrics.items():
            self._scalar(writer, f"eval/valid_{name}", value)
        if metrics["accuracy"] > self.best_accuracy:
            self.best_accuracy, self.evals_since_best = metrics["accuracy"], 0
            self.best_model = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        else:
            self.evals_since_best += 1
        patience = self.config.patience
        return self.best_accuracy >= 1.0 or (patience > 0 and self.evals_since_best >= patience)

    def step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One update: the next batch's loss (returned detached, with its count of targets, over
        all ranks, both tensors on the device), backward, gradient clip, optimiser and schedule
        steps. Nothing in it reads a value back to the host (on CUDA, a synchronisation): the
        caller reads the two results when it logs them."""
        started = time.perf_counter()
        with autocast(self.device, self.config.precision):
            loss, count = self.regime.train_loss(self.train_model)
        total = distributed.sum_tensor(count.clone(), "counting targets")
        share = count / total.clamp(min=1)  # this rank's part of the batch's mean: 1 in one process
        self.optimizer.zero_grad(set_to_none=True)
        (loss * (share * self.world.size)).backward()  # DDP averages the ranks' gradients; their shares add up
        if self.config.grad_clip > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        else:
            grad_norm = total_norm(list(self.model.parameters()))
        # This rank's loss and the summed gradients: a non-finite loss on one rank makes every rank's gradient so.
        self.finite.note(self.update + 1, [loss, grad_norm])
        self.optimizer.step()
        self.schedule.step()
        self.update += 1
        # No device sync here: on a GPU the clock runs ahead of queued kernels by a few updates at
        # most, which validation (it copies results to the host) catches up.
        self.train_seconds += time.perf_counter() - started
        return distributed.sum_tensor(loss.detach() * share, "summing the loss"), total

    def _out_of_time(self, started: float) -> bool:
        """Whether max_minutes have passed (on any rank: every rank calls this at the same points)."""
        if self.config.max_minutes <= 0:
            return False
        return distributed.any_rank([time.monotonic() - started >= 60 * self.config.max_minutes], "agreeing on the time")[0]

    def _scalar(self, writer: SummaryWriter | None, tag: str, value: float) -> None:
        if writer is not None:  # rank 0's
            writer.add_scalar(tag, value, self.update)

    def train(self, progress: bool = True) -> dict:
        """Train until max_updates or an early stop, then test the best weights; returns the
        results (also written to results.json).

        The first stop signal (Ctrl-C, SIGTERM, SIGHUP, SIGUSR2) ends in StopSignal with a checkpoint to resume from. Until the
        checkpoint after the last update is written, it lets the update or validation under way
        finish, then saves (a second one stops at once, and still saves). In the test after
        that it stops at once: the checkpoint already holds the whole run, and resuming it runs
        the test again."""
        c = self.config
        interrupt = StopOnInterrupt()
        with interrupt:
            # The checkpoint is written after its update's logs, so a resumed run drops only what
            # was logged after it: updates beyond self.update.
            writer = SummaryWriter(str(self.run_dir), purge_step=self.update + 1 if self.update else None) if self.world.main else None
            bar = tqdm(total=c.max_updates, initial=self.update, disable=not (progress and self.world.main), desc=f"{c.task}/{c.core}", unit="upd")
            self.model.train()
            save_at_exit = True
            try:
                self._loop(writer, bar, interrupt)
            except BaseException as error:
                # Under torchrun the other ranks are not at the save's collective (or are gone):
                # the last checkpoint stands.
                save_at_exit = self.world.size == 1 and not isinstance(error, NonFiniteError)
                raise
            finally:  # Ctrl-C and errors too: the run can be resumed from here
                bar.close()
                if save_at_exit:
                    self.save()
                if writer is not None:
                    writer.flush()
        if interrupt.requested:
            interrupt.stop()
        results = self._test(writer)
        if writer is not None:
            writer.close()
        return results

    def _loop(self, writer: SummaryWriter, bar: tqdm, interrupt: StopOnInterrupt) -> None:
        """Update, log, validate and checkpoint until done, stopped early, out of time or asked to stop."""
        c = self.config
        started, last_save, items = time.monotonic(), time.monotonic(), 0
        stop = distributed.any_rank([interrupt.requested], "agreeing to stop")[0]  # a Ctrl-C on any rank stops all
        while not self.stopped_early and self.update < c.max_updates and not self._out_of_time(started) and not stop:
            loss, count = self.step()
            items += count  # a tensor on the device, read only when logged
            bar.update(1)
            if self.update % c.log_every == 0:
                self.finite.check_run(self.run_dir)  # as the loss is read for the log (on every rank, to stop together)
                rate = float(items) / (time.monotonic() - started)
                self._scalar(writer, "losses/train", loss.item())
                self._scalar(writer, "charts/learning_rate", self.schedule.get_last_lr()[0])
                self._scalar(writer, "charts/targets_per_second", rate)
                bar.set_postfix(loss=f"{loss.item():.4f}", best=f"{self.best_accuracy:.3f}", tps=f"{rate:.0f}")
            if self.update % c.eval_every == 0 or self.update == c.max_updates or self._out_of_time(started):
                self.stopped_early = self._validate(writer)
            stop, save = distributed.any_rank([interrupt.requested, time.monotonic() - last_save >= c.save_every], "agreeing to stop or save")
            if save:
                self.save()
                last_save = time.monotonic()
        interrupt.requested = interrupt.requested or stop

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
            "valid": self.evaluate("valid"),
            "test": self.evaluate("test"),
        }
        results["history"] = self.history
        results = distributed.from_main(lambda: results, "sharing test results")
        for name, value in results["test"].items():
            self._scalar(writer, f"eval/test_{name}", value)
        if self.world.main:
            write_json(self.run_dir / "results.json", results)
        return results
