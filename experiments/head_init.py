"""How the actor and critic heads start, and what it does to learning (issue 9, item 4).

    python -m experiments.head_init            # corridor (8 cells): feedback, lstm; maze: lstm; 3 seeds

Each (task, core, head init, seed) is one `train_a2c.py` run with the CPU preset, `--head-init
orthogonal` (orthogonal, actor gain 0.01, critic gain 1, zero biases, as CleanRL and
stable-baselines3 do) or `pytorch` (nn.Linear's default, as TorchBeast has it; our default since
this experiment). Compared on the training curve of the task's measure (corridor: success rate;
maze: return): its mean over the whole run (the area under the curve, how soon it learns) and
over the last tenth (where it ends), each as the IQM over seeds with a 95% bootstrap interval.
Also measured, for the why: the norms of the policy loss's and the value loss's gradients with
respect to the core's weights on the first rollout of each corridor run's seed. Writes
head_init.json (raw per seed numbers included), head_init.md and head_init_TASK.png to `--out`.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

from durable.records import write_json, write_text
from experiments.frame.flags import Distinct, as_published, results_folder
from experiments.frame.curves import binned_curve, draw_curves, training_seconds
from experiments.frame.estimate import print_expected_time
from experiments.frame.jobs import ROOT, train_job
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.stats import iqm_interval, seed_count
from experiments.frame.tables import format_interval, markdown_table

# task -> (train_a2c.py arguments, frames, the curve compared, its name, baselines (random, oracle))
TASKS = {
    "corridor": (["--env", "corridor", "--env-opt", "length=8,max_episode_steps=32"], 500_000, "charts/success", "success rate",
                 {"random": 0.03, "oracle": 1.0}),
    "maze": (["--env", "maze"], 2_000_000, "charts/episodic_return", "episode return", {"random": 0.49, "oracle": 23.34}),
}
DEFAULT_CORES = {"corridor": ["feedback", "lstm"], "maze": ["lstm"]}
INITS = ("orthogonal", "pytorch")
BINS = 40


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), action=Distinct, default=list(TASKS))
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 (default: 3)")
    parser.add_argument("--frames-scale", type=float, default=1.0, help="multiply every task's frame budget (default: 1)")
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "experiments" / "head_init")
    parser.add_argument("--out", type=Path, default=results_folder("head_init"), help="where results go (default: assets/head_init/)")
    parser.add_argument("--no-estimate", action="store_true", help="start without timing an update of each model first")
    add_launcher_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    seeds = list(range(args.seeds))
    cells = [(task, core, init, seed) for seed in seeds for task in args.tasks for core in DEFAULT_CORES[task] for init in INITS]
    run_dir = {cell: args.runs_dir.joinpath(*cell[:3], f"seed{cell[3]}") for cell in cells}
    frames = {task: int(TASKS[task][1] * args.frames_scale) for task in args.tasks}
    jobs = [train_job(f"{task}/{core}/{init}/seed{seed}", run_dir[task, core, init, seed],
                      [*TASKS[task][0], "--core", core, *as_published(core), "--preset", "cpu", "--seed", str(seed), "--head-init", init], frames[task])
            for task, core, init, seed in cells]
    print(f"{len(jobs)} runs, {where_runs_go(args)}, in {args.runs_dir}")
    if not args.no_estimate:
        print_expected_time(jobs, args.jobs)
    run_stages({"training": jobs}, args)

    summary = {"command": "python -m experiments.head_init " + shlex.join(sys.argv[1:]),
               "machine": launcher_description(args),
               "preset": "cpu", "seeds": seeds, "tasks": {}}
    for task in args.tasks:
        _, _, tag, measure, baselines = TASKS[task]
        curves, results = {}, {}
        for core in DEFAULT_CORES[task]:
            for init in INITS:
                matrix = np.stack([binned_curve(run_dir[task, core, init, s], tag, frames[task], BINS) for s in seeds])
                whole, last = np.nanmean(matrix, axis=1), np.nanmean(matrix[:, -BINS // 10:], axis=1)
                curves[f"{core}, {init}"] = matrix
                results[f"{core}/{init}"] = {
                    "per_seed": [{"seed": s, "mean_over_run": float(w), "mean_over_last_tenth": float(e),
                                  "training_seconds": round(training_seconds(run_dir[task, core, init, s]), 1)}
                                 for s, w, e in zip(seeds, whole, last)],
                    "mean_over_run": iqm_interval({"x": whole})["x"],
                    "mean_over_last_tenth": iqm_interval({"x": last})["x"],
                }
        summary["tasks"][task] = {"frames": frames[task], "measure": f"{measure} ({tag})", "baselines": baselines, "runs": results}
        if task == "corridor":
            summary["tasks"][task]["gradient_into_core"] = {
                f"{core}/{init}": [gradient_norms(TASKS[task][0], core, init, seed) for seed in seeds]
                for core in DEFAULT_CORES[task] for init in INITS
            }
        draw_curves(curves, frames[task], baselines, f"{task}: head initialisation, CPU preset", measure, args.out / f"head_init_{task}.png")
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "head_init.json", summary, indent=1)
    write_text(args.out / "head_init.md", table(summary))
    print(table(summary))


def gradient_norms(env_args: list[str], core: str, head_init: str, seed: int) -> dict[str, float]:
    """{"policy", "value"}: the norm of each loss's gradient with respect to the core's weights on
    a fresh agent's first rollout (the losses as the trainer weighs them)."""
    import torch

    from agents.learners.a2c import a2c_loss, gae_advantages
    from agents.command_line import make_parser, make_trainer
    from agents.learners.train import Trainer

    parser = make_parser(Trainer, "")
    args = parser.parse_args([*env_args, "--core", core, *as_published(core), "--preset", "cpu", "--seed", str(seed),
                              "--head-init", head_init, "--run-dir", "unused", "--threads", "1"])
    trainer = make_trainer(Trainer, args, parser)
    try:
        c, rollout = trainer.config, trainer.actor.collect(trainer.config.rollout)[0]
        logits, values, _ = trainer.policy(rollout.inputs, rollout.start_state)
        advantages = gae_advantages(rollout.reward, values, rollout.terminated, rollout.truncated, rollout.valid, c.gamma, c.gae_lambda)
        parts = {}
        for name, (value_coef, policy_on) in {"policy": (0.0, True), "value": (c.value_coef, False)}.items():
            loss, _ = a2c_loss(logits[:-1], values[:-1], rollout.action, advantages * policy_on, advantages + values[:-1].detach(),
                               rollout.valid, value_coef, 0.0)
            weights = [p for p in trainer.policy.core.parameters() if p.requires_grad]
            grads = torch.autograd.grad(loss, weights, retain_graph=True, allow_unused=True)
            parts[name] = float(torch.sqrt(sum((g**2).sum() for g in grads if g is not None)))
        return parts
    finally:
        trainer.close()


def table(summary: dict) -> str:
    columns = ["task", "core / head init", "mean over the run: IQM [95% CI]", "last tenth: IQM [95% CI]", "per seed (last tenth)"]
    rows = []
    for task, result in summary["tasks"].items():
        for name, run in result["runs"].items():
            seeds = ", ".join(f"{r['mean_over_last_tenth']:.3f}" for r in run["per_seed"])
            rows.append([f"{task} ({result['frames']:,} frames, {result['measure']})", name,
                         format_interval(run["mean_over_run"], 3), format_interval(run["mean_over_last_tenth"], 3), seeds])
    notes = []
    for task, result in summary["tasks"].items():
        if "gradient_into_core" in result:
            notes.append(f"\n{task}: the policy loss's gradient norm into the core over the value loss's, first rollout, per seed:\n")
        for name, seeds in result.get("gradient_into_core", {}).items():
            notes.append(f"- {name}: " + ", ".join(f"{g['policy'] / g['value']:.4f}" for g in seeds))
    return markdown_table(columns, rows) + "".join(note + "\n" for note in notes)
if __name__ == "__main__":
    main()
