"""Our PPO beside the recurrent PPO implementations the field uses, on one memory task, in one run.

    scripts/cleanrl_peer.sh ../cleanrl-peer                     # once: CleanRL's checkout and environment
    python -m experiments.ppo_peers --cleanrl ../cleanrl-peer   # 6 agents x 3 seeds

Two pairs, each trained on the same env for the same frames with the same PPO settings:

    lstm          our train_ppo.py, LSTM core          against  sb3_lstm      sb3-contrib's RecurrentPPO (experiments/peer_sb3.py)
    transformer   our train_ppo.py, Transformer core   against  cleanrl_trxl  CleanRL's ppo_trxl.py (experiments/peer_cleanrl.py)
    feedback      our train_ppo.py, Feedback core      against  cleanrl_trxl
    feedback_cached  the same with --learner cached_memory (ppo_trxl's way: no gradient through the memory)  against  cleanrl_trxl

The env is MiniGrid's Memory as CleanRL's MiniGrid recipe sees it (a 3 x 3 view, 96-step limit),
as symbols rather than pixels so that every agent gets the same 27 numbers (experiments/peer_envs.py).
The settings are that recipe's (docs/rl-algorithms/ppo-trxl.md, MiniGrid-MemoryS9-v0): 16 envs,
256-step rollouts, 3 epochs of 8 minibatches, clip 0.2, gamma 0.995, GAE 0.95, value loss 0.5,
gradient norm 0.25, no advantage normalisation, a model of 2 layers, 4 heads, width 256 and 64
steps of memory; its learning rate 2.75e-4 and entropy cost 1e-4 are held constant for all
(the recipe anneals them over 4M frames, sb3 and we have no such schedule), and the LSTMs have 256
units (the same width); on an env whose time limit is below the memory (64), every agent's memory
is that limit, as ppo_trxl.py sets its own (`capped_memory`). What is not alike is each
implementation's own: how far gradients and memory reach (ours: the whole rollout, recomputed each epoch; ppo_trxl: 64 cached steps
computed while acting; RecurrentPPO: each sequence from its stored first state), encoders and
head initialisation.

Learning: every agent's training curve (the return of the episodes ending in each of CURVE_BINS
bins of frames) from its TensorBoard events (ppo_trxl logs the mean return of each update's
episodes, the others every episode), IQM over seeds with 95% bootstrap intervals; the final
return is the last FINAL_BINS bins' mean. Speed: frames / wall seconds of each training command
(startup included), the runs sharing the machine 2 at a time with one thread each. Writes
NAME.json (per-seed numbers, commands, machine, wall times), NAME.md and NAME.png to --out.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from durable.records import write_json, write_text
from envs import env_id
from envs.cli import positive_int
from experiments.frame.flags import Distinct, QUICK_FRAMES, add_experiment_arguments, as_published, run_frames, runs_folder
from experiments.frame.curves import binned_curve, draw_curves
from experiments.frame.estimate import print_expected, seconds_per_frame, spread_over
from experiments.frame.jobs import ROOT, Job, run_jobs
from experiments.frame.launch import add_launcher_arguments, launcher_description, run_stages, where_runs_go
from experiments.frame.stats import iqm_interval, seed_count
from experiments.frame.tables import format_interval, markdown_table

ENV = "experiments.peer_envs:SymbolicMemoryS9-v0"  # the default task
AGENTS = ("lstm", "sb3_lstm", "transformer", "feedback", "feedback_cached", "cleanrl_trxl")
PEER_OF = {"lstm": "sb3_lstm", "transformer": "cleanrl_trxl", "feedback": "cleanrl_trxl", "feedback_cached": "cleanrl_trxl"}
LABELS = {"lstm": "our PPO, LSTM", "sb3_lstm": "sb3-contrib RecurrentPPO, LSTM", "transformer": "our PPO, Transformer",
          "feedback": "our PPO, Feedback", "feedback_cached": "our PPO, Feedback, cached memory", "cleanrl_trxl": "CleanRL ppo_trxl"}
# Our agents that are another's core with other flags: feedback_cached learns as ppo_trxl does,
# each step from the memory acting wrote, no gradient through it (agents/cores/feedback/cached.py).
VARIANTS = {"feedback_cached": ("feedback", ["--learner", "cached_memory"])}
CURVE_BINS = 20
FINAL_BINS = 2  # the final return: the mean of the last 10% of the frames
# CleanRL's MiniGrid-MemoryS9 recipe, the settings every agent shares.
RECIPE = dict(num_envs=16, rollout=256, epochs=3, minibatches=8, clip=0.2, lr=2.75e-4, gamma=0.995, gae=0.95, entropy=1e-4,
              value=0.5, max_grad_norm=0.25, layers=2, heads=4, width=256, memory=64, lstm=256)
# --quick: tiny models; rollouts still longer than an episode (96 steps), since ppo_trxl.py fails
# on an update in which no episode ended.
QUICK_RECIPE = {**RECIPE, "num_envs": 4, "rollout": 128, "minibatches": 2, "heads": 2, "width": 16, "memory": 8, "lstm": 16}


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default=ENV, help="a Gymnasium id both sides can make (default: %(default)s)")
    parser.add_argument("--agents", nargs="+", choices=AGENTS, action=Distinct, default=list(AGENTS), metavar="AGENT",
                        help=f"from {list(AGENTS)} (default: all)")
    parser.add_argument("--seeds", type=seed_count, default=3, help="seeds 0 .. N-1 per agent (default: 3)")
    parser.add_argument("--frames", type=positive_int, default=None, help=f"env frames per run (default: 500,000; {QUICK_FRAMES:,} with --quick)")
    parser.add_argument("--cleanrl", type=Path, default=ROOT.parent / "cleanrl-peer",
                        help="the folder scripts/cleanrl_peer.sh made: CLEANRL/cleanrl (checkout) and CLEANRL/venv (default: %(default)s)")
    add_experiment_arguments(parser, "ppo_peers", "output file stem and run folder (default: %(default)s)", folder="ppo_peers")
    add_launcher_arguments(parser)
    return parser


def ours_args(agent: str, env: str, seed: int, r: dict) -> list[str]:
    """train_ppo.py's flags for our `agent` (a core, or one of VARIANTS) under recipe `r` (one
    thread and the budget come from the job)."""
    core, extra = VARIANTS.get(agent, (agent, []))
    core_opt = f"hidden_size={r['lstm']}" if core == "lstm" else f"d_model={r['width']},n_layers={r['layers']},n_heads={r['heads']},span={r['memory']}"
    return ["--env", env, "--core", core, "--preset", "cpu", "--seed", str(seed), "--core-opt", core_opt, *as_published(core),
            "--num-envs", str(r["num_envs"]), "--rollout", str(r["rollout"]), "--update-epochs", str(r["epochs"]),
            "--num-minibatches", str(r["minibatches"]), "--clip-coef", str(r["clip"]), "--clip-vloss", "--no-norm-adv",
            "--target-kl", "0", "--learning-rate", str(r["lr"]), "--optimizer-eps", "1e-5", "--gamma", str(r["gamma"]),
            "--gae-lambda", str(r["gae"]), "--entropy-coef", str(r["entropy"]), "--value-coef", str(r["value"]),
            "--max-grad-norm", str(r["max_grad_norm"]), "--no-previous-inputs", "--num-actors", "0", *extra]


def sb3_args(env: str, seed: int, r: dict) -> list[str]:
    return ["-m", "experiments.peer_sb3", "--env", env, "--seed", str(seed), "--num-envs", str(r["num_envs"]),
            "--rollout", str(r["rollout"]), "--update-epochs", str(r["epochs"]), "--num-minibatches", str(r["minibatches"]),
            "--clip-coef", str(r["clip"]), "--learning-rate", str(r["lr"]), "--gamma", str(r["gamma"]), "--gae-lambda", str(r["gae"]),
            "--entropy-coef", str(r["entropy"]), "--value-coef", str(r["value"]), "--max-grad-norm", str(r["max_grad_norm"]),
            "--hidden-size", str(r["lstm"]), "--threads", "1"]


def cleanrl_args(cleanrl: Path, env: str, seed: int, r: dict, run_dir: Path) -> list[str]:
    """ppo_trxl.py through experiments/peer_cleanrl.py; learning rate and entropy cost held constant (final = initial)."""
    flags = ["--env_id", env, "--seed", str(seed), "--no-cuda", "--num_envs", str(r["num_envs"]), "--num_steps", str(r["rollout"]),
             "--update_epochs", str(r["epochs"]), "--num_minibatches", str(r["minibatches"]), "--clip_coef", str(r["clip"]),
             "--init_lr", str(r["lr"]), "--final_lr", str(r["lr"]), "--init_ent_coef", str(r["entropy"]),
             "--final_ent_coef", str(r["entropy"]), "--gamma", str(r["gamma"]), "--gae_lambda", str(r["gae"]),
             "--vf_coef", str(r["value"]), "--max_grad_norm", str(r["max_grad_norm"]), "--trxl_num_layers", str(r["layers"]),
             "--trxl_num_heads", str(r["heads"]), "--trxl_dim", str(r["width"]), "--trxl_memory_length", str(r["memory"])]
    return ["-m", "experiments.peer_cleanrl", "--python", str(cleanrl / "venv" / "bin" / "python"),
            "--script", str(cleanrl / "cleanrl" / "cleanrl" / "ppo_trxl" / "ppo_trxl.py"), "--run-dir", str(run_dir), "--", *flags]


def agent_job(agent: str, args: argparse.Namespace, seed: int, run_dir: Path, frames: int, recipe: dict) -> Job:
    """The training command of one (agent, seed) for `frames` frames; its record says when it ran to the end."""
    if agent in PEER_OF:
        argv = ["train_ppo.py", *ours_args(agent, args.env, seed, recipe), "--total-steps", str(frames), "--threads", "1", "--run-dir", str(run_dir)]
    elif agent == "sb3_lstm":
        argv = [*sb3_args(args.env, seed, recipe), "--frames", str(frames), "--run-dir", str(run_dir)]
    else:
        argv = [*cleanrl_args(args.cleanrl, args.env, seed, recipe, run_dir), "--total_timesteps", str(frames)]
    return Job(f"train {agent}/seed{seed}", lambda: [sys.executable, *argv], run_dir / "train.log", run_dir / "train.done.json",
               f"{frames} frames")


def curve_dir(agent: str, run_dir: Path) -> Path:
    """Where a run's TensorBoard events are: ppo_trxl.py writes them to ./runs/NAME."""
    if agent != "cleanrl_trxl":
        return run_dir
    found = sorted((run_dir / "runs").glob("*"))
    if len(found) != 1:
        raise RuntimeError(f"{run_dir / 'runs'} should hold one ppo_trxl.py run, it holds {[p.name for p in found]}")
    return found[0]


def return_tag(agent: str) -> str:
    return "episode/r_mean" if agent == "cleanrl_trxl" else "charts/episodic_return"


def peer_seconds_per_frame(agent: str, args: argparse.Namespace, recipe: dict, scratch: Path) -> float:
    """A peer's wall seconds per frame here: runs of one and of three updates, timed, the difference
    over the two updates' frames (so that its start-up, imports and env making, drops out)."""
    update = recipe["num_envs"] * recipe["rollout"]
    shutil.rmtree(scratch, ignore_errors=True)  # records of an earlier estimate would skip the runs
    seconds = []
    for updates in (1, 3):
        job = agent_job(agent, args, 0, scratch / f"{agent}_{updates}", updates * update, recipe)
        started = time.monotonic()
        run_jobs([job], 1, f"timing {agent}")
        seconds.append(time.monotonic() - started)
    shutil.rmtree(scratch)
    return max(seconds[1] - seconds[0], 0.0) / (2 * update)


def print_expected_time(args: argparse.Namespace, jobs: dict, recipe: dict, frames: int, runs_dir: Path) -> None:
    """Time one update of each agent whose runs are not all done, then print the expected wall time."""
    todo = [key for key, job in jobs.items() if not job.done]
    if not todo:
        return
    print(f"timing each agent to estimate the run time of {len(todo)} runs (--no-estimate skips this) ...", flush=True)
    rate = {}
    for agent in {agent for agent, _ in todo}:
        if agent in PEER_OF:
            rate[agent] = seconds_per_frame(ours_args(agent, args.env, 0, recipe), "train_ppo")
        else:
            rate[agent] = peer_seconds_per_frame(agent, args, recipe, runs_dir / "estimate")
        print(f"  {agent}: {1 / rate[agent]:,.0f} frames/s on one thread" if rate[agent] else f"  {agent}: too fast to time", flush=True)
    print_expected(spread_over([rate[agent] * frames for agent, _ in todo], args.jobs), f"{args.jobs} runs at once, 1 thread each")


def capped_memory(recipe: dict, env: str) -> dict:
    """The recipe with its memory no longer than `env`'s time limit. ppo_trxl.py caps its own
    (trxl_memory_length = min(memory, max_episode_steps)), so our agents' span gets the same cap:
    both then attend over windows of the same length (24 steps on SymbolicMemoryS9Short-v0)."""
    limit = gym.spec(env_id(env).rpartition(":")[2]).max_episode_steps  # env_id imports a module:EnvId's module
    return {**recipe, "memory": limit} if limit and limit < recipe["memory"] else recipe


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    frames = run_frames(args, 500_000)
    recipe = capped_memory(QUICK_RECIPE if args.quick else RECIPE, args.env)
    if "cleanrl_trxl" in args.agents and not (args.cleanrl / "venv" / "bin" / "python").is_file():
        parser.error(f"--cleanrl {args.cleanrl}: no CleanRL environment there; make it with scripts/cleanrl_peer.sh {args.cleanrl} "
                     "(or leave cleanrl_trxl out of --agents)")
    runs_dir = runs_folder(args, ROOT / "runs" / "experiments" / args.name)
    seeds = list(range(args.seeds))
    run_dir = {(agent, seed): runs_dir / agent / f"seed{seed}" for agent in args.agents for seed in seeds}
    jobs = {key: agent_job(key[0], args, key[1], path, frames, recipe) for key, path in run_dir.items()}
    print(f"{len(jobs)} runs of {frames:,} frames on {args.env}, {where_runs_go(args)}, in {runs_dir}")
    if not (args.quick or args.no_estimate):
        print_expected_time(args, jobs, recipe, frames, runs_dir)
    run_stages({"training": list(jobs.values())}, args)

    summary = summarise(args, seeds, frames, recipe, run_dir, jobs)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{args.name}.json", summary, indent=1)
    write_text(args.out / f"{args.name}.md", table(summary))
    curves = {LABELS[agent]: np.array(summary["agents"][agent]["curves"]) for agent in args.agents}
    draw_curves(curves, frames, {}, f"{args.env.split(':')[-1]}: PPO implementations", "training episode return", args.out / f"{args.name}.png")
    print(table(summary))
    print(f"wrote {args.out / args.name}.json, .md and .png")


def summarise(args, seeds, frames, recipe, run_dir, jobs) -> dict:
    """Per agent: per-seed curves, final and best returns, frames/s; their IQMs; the speed ratios of the pairs."""
    summary = {"command": "python -m experiments.ppo_peers " + shlex.join(sys.argv[1:]), "machine": launcher_description(args),
               "env": args.env, "frames": frames, "seeds": seeds, "recipe": recipe, "curve_bins": CURVE_BINS, "final_bins": FINAL_BINS,
               "agents": {}, "speed_ratios": {}}
    for agent in args.agents:
        per_seed, curves = [], []
        for seed in seeds:
            curve = binned_curve(curve_dir(agent, run_dir[agent, seed]), return_tag(agent), frames, CURVE_BINS)
            record = jobs[agent, seed].result()
            curves.append(curve.tolist())
            per_seed.append({"seed": seed, "final_return": float(np.mean(curve[-FINAL_BINS:])), "best_return": float(np.nanmax(curve)),
                             "wall_seconds": record["wall_seconds"], "frames_per_second": round(frames / record["wall_seconds"], 1),
                             "command": record["command"]})
        stats = {key: iqm_interval({agent: np.array([run[key] for run in per_seed])})[agent]
                 for key in ("final_return", "best_return", "frames_per_second")}
        summary["agents"][agent] = {"label": LABELS[agent], "per_seed": per_seed, "curves": curves, **stats}
    for ours, peer in PEER_OF.items():
        if ours in summary["agents"] and peer in summary["agents"]:
            mine, theirs = (summary["agents"][name]["frames_per_second"]["iqm"] for name in (ours, peer))
            summary["speed_ratios"][f"{ours}/{peer}"] = round(mine / theirs, 2)
    return summary


def table(summary: dict) -> str:
    caption = (f"{summary['env']}, {summary['frames']:,} frames per run, {len(summary['seeds'])} seeds; IQM over seeds [95% bootstrap CI]. "
               f"Final return: the mean of the last {summary['final_bins']} of {summary['curve_bins']} bins of the training curve. "
               f"Frames/s: frames / wall seconds of the training command ({summary['machine']}).")
    rows = []
    for agent, numbers in summary["agents"].items():
        seeds = ", ".join(f"{run['final_return']:.2f}" for run in numbers["per_seed"])
        rows.append([numbers["label"], format_interval(numbers["final_return"]), seeds, format_interval(numbers["best_return"]),
                     format_interval(numbers["frames_per_second"], 0)])
    text = markdown_table(["agent", "final return", "per seed", "best return", "frames/s"], rows, caption)
    if summary["speed_ratios"]:
        text += "\nSpeed, ours / peer (IQM frames/s): " + ", ".join(f"{pair} {ratio:.2f}x" for pair, ratio in summary["speed_ratios"].items()) + "\n"
    return text
if __name__ == "__main__":
    main()
