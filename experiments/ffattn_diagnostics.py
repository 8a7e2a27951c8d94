"""Why feed-forward attention learned the adding problem slowly at L = 1,000 (issue 24): one
measurement per hypothesis, on one thread.

    python -m experiments.ffattn_diagnostics                 # all parts
    python -m experiments.ffattn_diagnostics --parts init --lengths 100 1000 10000

Parts:
  init   at initialisation, per length and per init (the seed text's: He, b_sy at the mean
         target; the published one: N(0, 1/fan_in), every bias 0): how far the attention can
         move from the plain mean (the scores e = tanh(.) lie in [-1, 1], so no step can weigh
         more than e^2 = 7.4 times another); how many outputs a ReLU would kill (pre-activation
         <= 0: no gradient); the gradient's size per weight, the marker channel's column of W_xh
         apart (the weights that must learn to find the marked steps).
  data   the generator against the authors' (craffel/lstm_problems): marked positions, the
         adding scaling, the mean target that b_sy starts at.
  train  short runs of `--updates` updates at `--length` through the normal training loop, one
         per (optimiser, learning rate, activation, init): validation accuracy and loss at the end.
Writes NAME.json and NAME.md to `--out`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from durable.records import write_json, write_text
from envs.cli import positive_int
from experiments.frame.flags import Distinct, results_folder
from experiments.frame.jobs import machine
from experiments.frame.tables import markdown_table
from seqtasks.config import resolve_config
from seqtasks.ffattn import FeedForwardAttention
from seqtasks.tasks.long_term import LongTermTask
from seqtasks.train import Run

PARTS = ("init", "data", "train")
INITS = ("seed", "published")
SEED_TEXT = dict(negative_slope=0.0, init="seed")  # ReLU, He init, b_sy at the mean target
PUBLISHED = dict(negative_slope=0.01, init="published")  # leaky ReLU 0.01, N(0, 1/fan_in), zero biases
# (name, settings) of the training variants: ours before the fix (the seed text's model, SGD with
# Nesterov momentum), the authors' first SGD grid (lr .1 .. .005, momentum .9 or .99), and their
# published Adam grid (lr .0003, .001, .003, .01; arXiv:1512.08756v1 section 2.2)
VARIANTS = [
    ("nesterov lr 1e-3 m 0.9, seed-text model (ours before)", dict(optimizer="nesterov", lr=1e-3, momentum=0.9, **SEED_TEXT)),
    ("nesterov lr 1e-2 m 0.9, seed-text model", dict(optimizer="nesterov", lr=1e-2, momentum=0.9, **SEED_TEXT)),
    ("nesterov lr 1e-2 m 0.99, seed-text model", dict(optimizer="nesterov", lr=1e-2, momentum=0.99, **SEED_TEXT)),
    ("nesterov lr 1e-2 m 0.9, published model", dict(optimizer="nesterov", lr=1e-2, momentum=0.9, **PUBLISHED)),
    ("adam lr 3e-3, seed-text model", dict(optimizer="adam", lr=3e-3, **SEED_TEXT)),
    *[(f"adam lr {lr:g}, published model", dict(optimizer="adam", lr=lr, **PUBLISHED)) for lr in (3e-4, 1e-3, 3e-3, 1e-2)],
]


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", choices=PARTS, action=Distinct, default=list(PARTS), metavar="PART", help=f"of {list(PARTS)}")
    parser.add_argument("--lengths", nargs="+", type=positive_int, action=Distinct, default=[100, 1000, 10000], help="init: lengths measured")
    parser.add_argument("--length", type=positive_int, default=1000, help="train: the sequence length (default: 1,000)")
    parser.add_argument("--updates", type=positive_int, default=500, help="train: updates per variant (default: 500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="ffattn_diagnostics", help="output file stem")
    parser.add_argument("--out", type=Path, default=results_folder("ffattn_diagnostics"), help="where results go (default: assets/ffattn_diagnostics/)")
    return parser


def batch(length: int, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray]:
    """`count` adding sequences of `length`: x (B, L, 2), lengths (B,), targets (B,), marked (B, 2) step indices."""
    data = LongTermTask("adding", length).generate(np.random.default_rng(seed), count, "train")
    x, lengths = data.padded(np.arange(count))
    marked = np.stack([np.flatnonzero(row[:, 1] == 1) for row in x])
    return torch.from_numpy(x), torch.from_numpy(lengths), torch.from_numpy(data.targets), marked


def seed_text_init(model: FeedForwardAttention, mean_target: float) -> None:
    """The seed text's start, in place: He-initialised weights, zero biases but b_sy at the task's mean target."""
    for layer in (model.step, model.score, model.hidden, model.out):
        if layer is not None:
            torch.nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            torch.nn.init.zeros_(layer.bias)
    torch.nn.init.constant_(model.out.bias, mean_target)


def init_stats(length: int, init: str, seed: int) -> dict:
    """At initialisation `init` with its activation (seed: ReLU, published: leaky ReLU 0.01), on
    100 sequences of `length`: the attention's reach, outputs at or below 0, gradient sizes."""
    torch.manual_seed(seed)
    slope = (SEED_TEXT if init == "seed" else PUBLISHED)["negative_slope"]
    model = FeedForwardAttention(2, 100, negative_slope=slope)
    if init == "seed":
        seed_text_init(model, 0.5)
    x, lengths, y, marked = batch(length, 100, seed)
    h = F.leaky_relu(x @ model.step.weight.T + model.step.bias, slope)  # (B, L, D)
    e = torch.tanh(h @ model.score.weight.T + model.score.bias).squeeze(-1)  # (B, L)
    alpha = torch.softmax(e, dim=1)
    on_marked = alpha.gather(1, torch.from_numpy(marked)).sum(dim=1)  # weight of the two marked steps
    best = 2 * math.e / (2 * math.e + (length - 2) / math.e)  # e = +1 on both marked steps, -1 elsewhere
    c = (alpha[:, :, None] * h).sum(dim=1)
    pre_out = model.out(F.leaky_relu(model.hidden(c), slope)).squeeze(-1)
    loss = F.mse_loss(F.leaky_relu(pre_out, slope), y)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    norms = {name: float(g.norm()) for (name, _), g in zip(model.named_parameters(), grads)}
    return {
        "length": length,
        "init": init,
        "score_range": [float(e.detach().min()), float(e.detach().max())],
        "marked_weight_x_L_over_2": float(on_marked.detach().mean() * length / 2),  # 1: the plain mean's weight
        "marked_weight_reachable_x_L_over_2": best * length / 2,
        "dead_outputs": float((pre_out <= 0).float().mean()),
        "dead_hidden_units": float((h.amax(dim=(0, 1)) <= 0).float().mean()),
        "grad_norm": norms,
        # the marker channel's column of W_xh: what must learn to pick the 4 marked steps (of L);
        # SGD moves it lr x this, Adam about lr per weight whatever its size
        "grad_norm_marker_column": float(grads[0][:, 1].norm()),
    }


def data_stats(length: int, seed: int) -> dict:
    """Marked positions and targets of 10,000 adding sequences against lstm_problems.add's definition."""
    x, _, y, marked = batch(length, 10_000, seed)
    a, b = x[np.arange(len(x)), marked[:, 0], 0].numpy(), x[np.arange(len(x)), marked[:, 1], 0].numpy()
    return {
        "length": length,
        # the earlier and the later marked step; lstm_problems: N_1 in 1 .. 9 (randint(1, 10)), N_2 in 1 .. L / 2 - 2
        "first_marked": [int(marked[:, 0].min()), int(marked[:, 0].max())],
        "second_marked": [int(marked[:, 1].min()), int(marked[:, 1].max())],
        "values": [float(x[:, :, 0].min()), float(x[:, :, 0].max())],  # lstm_problems.add: uniform in [-1, 1]
        "target_is_0.5_plus_sum_over_4": bool(np.allclose(y.numpy(), 0.5 + (a + b) / 4, atol=1e-6)),
        "target_mean": float(y.mean()),
        "target_range": [float(y.min()), float(y.max())],
        "end_markers_minus_1": bool((x[:, 0, 1] == -1).all() and (x[:, -1, 1] == -1).all()),
    }


def train_variant(settings: dict, length: int, updates: int, seed: int) -> dict:
    """Validation accuracy and loss after `updates` updates of ffattn on adding at `length`."""
    fields = {k: v for k, v in settings.items() if k != "init"}
    given = dict(task="adding", core="ffattn", seq_length=length, seed=seed, max_updates=updates, eval_every=updates,
                 n_train=max(100, updates * 100 // 10), threads=1, device="cpu", save_every=1e9, **fields)
    config, _ = resolve_config(given, cuda=False)
    with tempfile.TemporaryDirectory() as folder:
        run = Run.create(config, {}, folder)
        if settings["init"] == "seed":
            seed_text_init(run.model, run.task.mean_target)  # in place: the optimiser holds these tensors
        started = time.perf_counter()
        results = run.train(progress=False)
    x, lengths = run.regime.splits["valid"].padded(np.arange(100))
    with torch.no_grad():
        predicted = run.model(torch.from_numpy(x), torch.from_numpy(lengths))  # the best validated weights
    return {"valid_accuracy": results["valid"]["accuracy"], "valid_loss": results["valid"]["loss"],
            "dead_outputs": float((predicted <= 0).float().mean()),  # ReLU: no gradient from these sequences
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    torch.set_num_threads(1)
    out = {"command": "python -m experiments.ffattn_diagnostics " + " ".join(sys.argv[1:]), "machine": machine(1)}
    if "init" in args.parts:
        out["init"] = [init_stats(length, init, args.seed) for init in INITS for length in args.lengths]
        print(json.dumps(out["init"], indent=1), flush=True)
    if "data" in args.parts:
        out["data"] = data_stats(args.length, args.seed)
        print(json.dumps(out["data"], indent=1), flush=True)
    if "train" in args.parts:
        out["train"] = {"length": args.length, "updates": args.updates, "runs": []}
        for name, settings in VARIANTS:
            result = {"variant": name, **settings, **train_variant(settings, args.length, args.updates, args.seed)}
            out["train"]["runs"].append(result)
            print(json.dumps(result), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", out, indent=1)
    write_text(args.out / f"{args.name}.md", table(out))
    print(table(out))


def table(out: dict) -> str:
    """Markdown of whichever parts were measured."""
    text = ""
    if "init" in out:
        caption = "At initialisation (seed 0, 100 adding sequences; seed-text init with ReLUs, published init with leaky ReLUs):"
        columns = ["init", "L", "scores e", "weight of the 2 marked steps / mean's", "at most", "outputs <= 0 (ReLU: no gradient; leaky: 1%)",
                   "grad W_xh", "its marker column", "grad w_hc", "grad W_cs", "grad w_sy"]
        rows = [[row["init"], f"{row['length']:,}", f"{row['score_range'][0]:.2f} .. {row['score_range'][1]:.2f}", f"{row['marked_weight_x_L_over_2']:.2f}",
                 f"{row['marked_weight_reachable_x_L_over_2']:.2f}", f"{row['dead_outputs']:.2f}", f"{row['grad_norm']['step.weight']:.2e}",
                 f"{row['grad_norm_marker_column']:.2e}", f"{row['grad_norm']['score.weight']:.2e}", f"{row['grad_norm']['hidden.weight']:.2e}",
                 f"{row['grad_norm']['out.weight']:.2e}"] for row in out["init"]]
        text += markdown_table(columns, rows, caption) + "\n"
    if "data" in out:
        d = out["data"]
        text += (f"Generator at L = {d['length']:,}: earlier marked step {d['first_marked']}, later {d['second_marked']}, values "
                 f"{d['values'][0]:.3f} .. {d['values'][1]:.3f}, target = 0.5 + (a + b) / 4: {d['target_is_0.5_plus_sum_over_4']}, "
                 f"target mean {d['target_mean']:.3f}, -1 at both ends: {d['end_markers_minus_1']}.\n\n")
    if "train" in out:
        t = out["train"]
        rows = [[r["variant"], f"{r['valid_accuracy']:.3f}", f"{r['valid_loss']:.5f}", f"{r['dead_outputs']:.2f}", r["seconds"]] for r in t["runs"]]
        text += markdown_table(["variant", "validation accuracy", "validation MSE", "outputs <= 0", "seconds"], rows,
                               f"Training, adding at L = {t['length']:,}, {t['updates']:,} updates, seed 0, one thread:")
    return text
if __name__ == "__main__":
    main()
