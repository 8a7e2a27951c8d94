"""Every hyperparameter of an A2C run in one dataclass, with the paper's per-env presets.

A run's config is built in three layers: the dataclass defaults, then a preset for the env and
core (`paper`: the Feedback Transformer paper's settings, meant for a GPU; `cpu`: smaller
settings that train in minutes on a laptop; `auto`: `paper` when CUDA is present, else `cpu`),
then whatever the command line gives. Where the paper is silent (the corridor, gradient
clipping, the value-loss weight) the values are ours and say so.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

import envs
from agents.cores import CORES, core_options
from agents.config.search_space import Search
from agents.cores.checks import check_bool, check_float, check_float32
from agents.model.policy import HEAD_INITS
from agents.runtime.precision import PRECISIONS, check_precision

OPTIMIZERS = ("adam", "rmsprop")
# How the learner gets the rollout's outputs with gradients: "recompute" runs the policy over the
# chunk again from the stored core state; "acting_graph" keeps the graph built while acting (cores
# that can be fed one step at a time within one call: feedback, lstm, gru). "auto" takes the one
# benchmarks/a2c.py measures faster (its figures: docs/speed.md): the kept graph for feedback (its
# learning pass is sequential anyway, so acting is its forward), recomputing for the LSTM (nn.LSTM's
# fused pass over the chunk beats T single steps; the GRU, not measured, has the same fused pass)
# and for the cores that cannot keep it (for the transformer even a lower bound for keeping, T
# one-step graphs, is far slower than recomputing).
KEEPS_ACTING_GRAPH = ("feedback",)
LEARNERS = ("auto", "recompute", "acting_graph")
PRESETS = ("auto", "paper", "cpu")
LR_SCHEDULES = ("constant", "linear")
# The paper's RMSprop epsilon (0.01: easy maze, water maze) comes from IMPALA / TorchBeast, whose
# losses are sums over the T x B steps of a rollout. Ours are means over the valid steps, so every
# gradient is T x B times smaller, and RMSprop's update g / (sqrt(v) + eps) is not scale-free in
# eps: with eps = 0.01 nearly every weight's RMS gradient sat far below eps and the weights barely
# moved (water maze: mean |dθ| 2.2e-5 over 20 updates, against 4.2e-3 with Adam). Dividing the
# numerator and both terms of the denominator by T x B shows that the paper's optimiser on our
# mean losses is eps = 0.01 / (T x B), and the paper's T x B is 12,800 on both RMSprop tasks (easy
# maze 128 x 100, water maze 64 x 200). We keep that value at every batch size: the expected
# gradient of a mean loss does not depend on the batch, so a fixed eps keeps its weight against
# the gradient the same when T or B change (the CPU preset), where a summed loss's would not.
# Gradient clipping (global norm 1 on the mean loss; the paper gives none) needs no conversion.
RMSPROP_EPS = 0.01 / 12_800


EPISODE = "episode"  # --bptt episode: each step's gradient reaches back to its episode's start


def parse_solve_at(value: float | str | None) -> float | None:
    """--solve-at's value: a finite number, or None / 'none' (no criterion); a ValueError naming anything else."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise ValueError(f"solve_at must be a finite number or 'none', got {value!r}")
    return number


def parse_bptt(value: int | str) -> int | str:
    """--bptt's value: an integer K >= 0, or 'episode'; a ValueError naming anything else."""
    if value == EPISODE:
        return EPISODE
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if isinstance(value, bool) or number is None or str(number) != str(value).strip() or number < 0:
        raise ValueError(f"bptt must be an integer K >= 0 or {EPISODE!r}, got {value!r}")
    return number


@dataclass
class A2CConfig:
    env: str = field(default="maze", metadata={"help": f"one of {sorted(envs.ENV_IDS)}, or any registered Gymnasium id (module:EnvId imports module first)"})
    core: str = field(default="feedback", metadata={"help": f"memory core, one of {sorted(CORES)}"})
    preset: str = field(default="auto", metadata={"help": "paper (GPU sizes), cpu (small), auto (paper if CUDA, else cpu)"})
    seed: int = 0
    total_steps: int = field(default=1_000_000, metadata={"help": "env frames to train for (all envs together)"})
    num_envs: int = field(default=64, metadata={"help": "B: envs stepped together (the batch)"})
    rollout: int = field(default=32, metadata={"help": "T: steps per update"})
    bptt: int | str = field(
        default=0,
        metadata={"help": "K: steps the gradient reaches back, >= rollout (agents/learners/window.py: the rollout's loss through the K - T steps before it); "
                          "0: the rollout; episode: every step's back to its episode's start (needs episodes of bounded length, or --bptt-max)",
                  "parse": parse_bptt},
    )
    bptt_max: int = field(
        default=0,
        metadata={"help": "with --bptt episode: the most steps the gradient reaches back (0: the env's longest episode, which it must have)"},
    )
    optimizer: str = field(default="adam", metadata={"help": f"one of {OPTIMIZERS}"})
    learning_rate: float = 3e-4
    lr_schedule: str = field(default="constant", metadata={"help": f"one of {LR_SCHEDULES}: linear anneals to 0 at --total-steps"})
    optimizer_eps: float = field(
        default=1e-8,
        metadata={"help": "Adam / RMSprop epsilon, on our mean losses (RMSprop presets: 0.01 / 12,800, the paper's 0.01 on its summed losses)"},
    )
    gamma: float = field(default=0.99, metadata={"help": "discount"})
    gae_lambda: float = field(default=1.0, metadata={"help": "GAE lambda; 1 is plain n-step A2C"})
    value_coef: float = field(default=0.5, metadata={"help": "weight of the value loss"})
    entropy_coef: float = field(default=5e-4, metadata={"help": "entropy cost"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping by global norm; 0 disables"})
    learner: str = field(default="auto", metadata={"help": f"one of {LEARNERS}: reuse the acting graph or recompute the chunk"})
    pack_episodes: bool = field(
        default=True,
        metadata={"help": "recomputing, run the episodes inside a chunk side by side (the same outputs, fewer sequential steps: "
                          "agents/learners/episode_packing.py); --no-pack-episodes: each env's column whole"},
    )
    embed_dim: int = field(default=16, metadata={"help": "embedding width per observation feature"})
    head_init: str = field(default="pytorch", metadata={"help": f"one of {HEAD_INITS}: how the actor and critic heads start (agents/model/policy.py)"})
    previous_inputs: bool = field(
        default=True,
        metadata={"help": "feed the core the previous action and reward; --no-previous-inputs: the observation only, so memory is the only way to carry a cue"},
    )
    cuda_graph: bool = field(
        default=False,
        metadata={"help": "act through one CUDA graph of the policy's step (agents/learners/graphed_acting.py): a CUDA device, acting "
                          "without gradients (the recompute learner; auto picks it), cores feedback, lstm, gru, ffm, lru, mamba, mlp"},
    )
    num_actors: int = field(default=0, metadata={"help": "CPU actor worker processes stepping env shards; 0 steps envs in the learner"})
    device: str = field(default="auto", metadata={"help": "auto (CUDA if present, else CPU), cpu, cuda, cuda:N"})
    precision: str = field(
        default="fp32",
        metadata={"help": f"one of {PRECISIONS}: bf16 runs acting and the learning forward under bfloat16 autocast (weights, optimiser and loss stay float32)"},
    )
    threads: int = field(default=0, metadata={"help": "torch CPU threads of the learner; 0 keeps torch's default"})
    run_dir: str = field(default="", metadata={"help": "run folder (default runs/<env>-<core>-<time>)"})
    save_every: float = field(default=300.0, metadata={"help": "seconds between checkpoints (also saved at exit)"})
    log_every: int = field(default=10, metadata={"help": "updates between TensorBoard loss logs"})
    solve_at: float | None = field(
        default=None,
        metadata={"help": "stop once the greedy policy's mean --solve-metric on evaluation episodes reaches this, confirmed on fresh "
                          "ones; the frames, episodes and seconds to solve go to RUN/solve.json (agents/learners/solve.py); "
                          "none: train to --total-steps",
                  "parse": parse_solve_at},
    )
    solve_metric: str = field(default="success", metadata={"help": "the episode quantity --solve-at scores (success, return, ...)"})
    eval_every: int = field(default=100_000, metadata={"help": "with --solve-at: frames before the first check, and the least between two"})
    eval_growth: float = field(
        default=0.0,
        metadata={"help": "with --solve-at: each gap between checks at least this share of the frames trained (0.1: checks 10%% apart)"},
    )
    eval_episodes: int = field(default=100, metadata={"help": "with --solve-at: greedy episodes per check, one per env"})
    core_options: dict[str, Any] = field(default_factory=dict)
    env_options: dict[str, Any] = field(default_factory=dict)

    learners: ClassVar[tuple[str, ...]] = LEARNERS  # what `learner` may be for this algorithm

    # What `python -m experiments.tune` searches (agents/config/search_space.py), the ranges of
    # rl-zoo3's A2C / PPO spaces where they have one; the gradient window K is 0 (the rollout) or
    # reaches before it, 64 and 128 being >= every rollout searched, so every pair is a valid run.
    search_space: ClassVar[dict[str, Search]] = {
        "learning_rate": Search(1e-5, 1e-2, log=True),
        "entropy_coef": Search(1e-5, 0.1, log=True),
        "gamma": Search(choices=(0.9, 0.95, 0.98, 0.99, 0.995, 0.999)),
        "gae_lambda": Search(choices=(0.8, 0.9, 0.95, 0.98, 1.0)),
        "rollout": Search(choices=(8, 16, 32, 64)),
        "bptt": Search(choices=(0, 64, 128)),
        "value_coef": Search(0.1, 1.0),
        "max_grad_norm": Search(choices=(0.25, 0.5, 1.0, 2.0, 5.0)),
    }

    def __post_init__(self):
        envs.env_id(self.env)
        if self.core not in CORES:
            raise ValueError(f"unknown core {self.core!r}; choose from {sorted(CORES)}")
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose from {list(PRESETS)}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose from {list(OPTIMIZERS)}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"unknown lr_schedule {self.lr_schedule!r}; choose from {list(LR_SCHEDULES)}")
        if self.head_init not in HEAD_INITS:
            raise ValueError(f"unknown head_init {self.head_init!r}; choose from {list(HEAD_INITS)}")
        check_bool("previous_inputs", self.previous_inputs)
        check_bool("pack_episodes", self.pack_episodes)
        check_bool("cuda_graph", self.cuda_graph)
        check_precision(self.precision)
        if self.learner not in self.learners:
            raise ValueError(f"unknown learner {self.learner!r}; choose from {list(self.learners)}")
        for name in ("total_steps", "num_envs", "rollout", "embed_dim", "log_every", "eval_every", "eval_episodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        # Every float is finite (NaN and inf refused: a NaN learning rate or entropy cost trains to
        # NaN weights, a NaN max_grad_norm would turn clipping off); no setting needs inf.
        for name in ("learning_rate", "optimizer_eps", "save_every"):
            check_float(name, getattr(self, name), 0, low_open=True)
        for name in ("learning_rate", "optimizer_eps"):
            check_float32(name, getattr(self, name))
        for name in ("gamma", "gae_lambda"):
            check_float(name, getattr(self, name), 0, 1)
        for name in ("value_coef", "entropy_coef"):
            check_float(name, getattr(self, name), 0)
        check_float("max_grad_norm", self.max_grad_norm, 0, note="0: no clipping")
        self.solve_at = parse_solve_at(self.solve_at)
        if not isinstance(self.solve_metric, str) or not self.solve_metric:
            raise ValueError(f"solve_metric must name an episode quantity (success, return, ...), got {self.solve_metric!r}")
        if self.solve_at is not None and self.solve_metric == "success" and not 0 < self.solve_at <= 1:
            raise ValueError(f"solve_at must be in (0, 1] for solve_metric 'success' (a share of episodes), got {self.solve_at}")
        check_float("eval_growth", self.eval_growth, 0, note="0: checks --eval-every frames apart")
        if self.threads < 0:
            raise ValueError(f"threads must be >= 0 (0: torch's default), got {self.threads}")
        self.bptt = parse_bptt(self.bptt)
        if self.bptt != EPISODE and self.bptt != 0 and self.bptt < self.rollout:
            raise ValueError(f"bptt (K) must be 0 (the rollout), >= rollout ({self.rollout}) or {EPISODE!r}, got {self.bptt}")
        if self.bptt_max < 0 or (self.bptt_max and self.bptt != EPISODE):
            raise ValueError(f"bptt_max caps --bptt {EPISODE}: give it with --bptt {EPISODE}, >= 0, got {self.bptt_max} with bptt {self.bptt}")
        if self.bptt_max and self.bptt_max < self.rollout:
            raise ValueError(f"bptt_max must be 0 (no cap) or >= rollout ({self.rollout}), got {self.bptt_max}")
        if self.learner == "acting_graph" and self.reaches_back:
            raise ValueError(f"learner 'acting_graph' learns from the rollout only; bptt {self.bptt} reaches further back "
                             f"and needs the recompute learner (--learner recompute or auto)")
        if self.cuda_graph and self.learner == "acting_graph":
            raise ValueError("cuda_graph captures acting without gradients, and learner 'acting_graph' records them while acting; "
                             "use --learner recompute (or auto, which picks it with --cuda-graph)")
        if not 0 <= self.num_actors <= self.num_envs:
            raise ValueError(f"num_actors must be between 0 and num_envs ({self.num_envs}), got {self.num_actors}")

    @property
    def max_history(self) -> int | None:
        """K - T: the most steps before each rollout that its gradient reaches (0: the rollout
        alone); with bptt 'episode', bptt_max - T, or None without a cap (the steps each running
        episode needs: agents/learners/window.py)."""
        if self.bptt == EPISODE:
            return self.bptt_max - self.rollout if self.bptt_max else None
        return max(0, self.bptt - self.rollout)

    @property
    def reaches_back(self) -> bool:
        """Whether the gradient reaches steps before the rollout (a gradient window)."""
        return self.bptt == EPISODE or self.max_history > 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The paper's settings (section 4.2.2 and appendix 7.2 / 7.3; PAPERS.md). Sizes are per core family.
_PAPER_MAZE = dict(num_envs=1024, rollout=100, optimizer="adam", learning_rate=3e-4, optimizer_eps=1e-8, entropy_coef=5e-4)
_PAPER = {
    "maze": (_PAPER_MAZE, dict(d_model=256, n_layers=2, n_heads=4, span=200), dict(hidden_size=256, n_layers=3)),
    "maze_easy": (
        {**_PAPER_MAZE, "num_envs": 128, "optimizer": "rmsprop", "optimizer_eps": RMSPROP_EPS},
        dict(d_model=256, n_layers=2, n_heads=4, span=200),
        dict(hidden_size=256, n_layers=3),
    ),
    "water_maze": (
        dict(num_envs=64, rollout=200, optimizer="rmsprop", learning_rate=3e-4, optimizer_eps=RMSPROP_EPS, entropy_coef=1e-4),
        dict(d_model=64, n_layers=2, n_heads=1, span=200),
        dict(hidden_size=64, n_layers=2),  # and learning rate 4e-4, set below
    ),
    # The corridor's training settings are not given in the paper: the maze's, with a span that
    # covers a whole episode of the default corridor (4 x 16 steps).
    "corridor": (_PAPER_MAZE, dict(d_model=256, n_layers=2, n_heads=4, span=64), dict(hidden_size=256, n_layers=3)),
}
# Small settings for a CPU: a few minutes to learn the corridor, an hour or so for real maze progress.
_CPU = (
    dict(num_envs=64, rollout=32, learning_rate=1e-3),
    dict(d_model=64, n_layers=2, n_heads=4, span=64),
    dict(hidden_size=128, n_layers=1),
)


def preset_values(env: str, core: str, preset: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config fields, core options) of `preset` ('paper' or 'cpu') for this env and core. An
    env the paper has no setting for (any other Gymnasium id) takes the defaults under `paper`;
    `cpu` is the same small setting for every env."""
    paper_fields, attention, recurrent = _PAPER.get(envs.short_name(env), ({}, {}, {}))
    fields = dict(paper_fields)
    if preset == "cpu":
        fields.update(_CPU[0])
        attention, recurrent = _CPU[1], _CPU[2]
    elif envs.short_name(env) == "water_maze" and core == "lstm":
        fields["learning_rate"] = 4e-4
    sizes = recurrent if core in ("lstm", "gru", "mlp") else attention
    allowed = core_options(core)
    return fields, {key: value for key, value in sizes.items() if key in allowed}


def resolve_config(given: dict[str, Any], config_class: type[A2CConfig] = A2CConfig) -> A2CConfig:
    """Defaults, then the preset, then `given` (fields typed on the command line, core options
    from --core-opt merged over the preset's). `config_class`: A2CConfig or agents/config/ppo_config.py's
    PPOConfig, whose extra fields the presets leave alone."""
    base = config_class(**{key: given[key] for key in ("env", "core", "preset") if key in given})
    preset = base.preset
    if preset == "auto":
        preset = "paper" if torch.cuda.is_available() else "cpu"
    fields, options = preset_values(base.env, base.core, preset)
    merged = {**fields, **given, "preset": preset}
    merged["core_options"] = {**options, **given.get("core_options", {})}
    config = config_class(**{**dataclasses.asdict(base), **merged})
    if not config.run_dir:
        config.run_dir = f"runs/{envs.short_name(config.env)}-{config.core}-{time.strftime('%Y%m%d-%H%M%S')}"
    return config
