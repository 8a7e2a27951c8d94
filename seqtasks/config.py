"""Every hyperparameter of a seqtasks run in one dataclass, with the paper's defaults and presets.

The defaults are the Feedback Transformer paper's toy-task settings (Table 9: 4 layers,
d = 256, FF 4d, 4 heads, span 100, dropout 0.2, BPTT 64, batch 512, Adam lr 1e-4, gradient clip
0.1, 1k warm-up steps; 10k training episodes). A run's config is: these defaults, then a preset,
then what the command line gives. Presets:
  paper  the defaults as they are;
  cpu    a model and data a CPU trains in minutes (d = 64, 2 layers, batch 32, 2k episodes ...);
  auto   (the default) paper where a GPU is used, cpu otherwise.
On top of either, the long-term memory problems (adding, multiplication, xor) take Raffel &
Ellis's training setup as their published code has it (craffel/ff-attention, commit 4e196a5
"Use leaky ReLU and adam"): batches of 100 sequences, Adam (learning rate 3e-3, the best of their
grid .01, .003, .001, .0003 in experiments/ffattn_diagnostics.py), squared error, leaky ReLUs,
a test set of 1000, evaluation every 1000 updates ("an epoch"), stop at 100% or 100 epochs. The
seed text's SGD with Nesterov momentum (their first grid: lr .1 .. .005, momentum .9 or .99)
moves the weights that find the marked steps 1/L as fast (their gradient shrinks as 1/L), so it
stalls at L = 1,000 (assets/ffattn_diagnostics/ffattn_diagnostics.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.cores.checks import check_float, check_float32
from agents.runtime.precision import PRECISIONS, check_precision

OPTIMIZERS = ("adam", "nesterov")
PRESETS = ("auto", "paper", "cpu")  # (str fields, not Literal: agents/config/config_cli makes flags of bool, int, float, str)


def _help(text: str, **kwargs):
    return field(metadata={"help": text}, **kwargs)


@dataclass
class SeqConfig:
    # --- what runs
    task: str = _help("the task: copy, reverse, counting, random_walk, algorithmic, adding, multiplication, xor", default="random_walk")
    core: str = _help("the model: a core of agents/cores (feedback, transformer, lstm, gru, reservoir, mlp), or ffattn / mean", default="feedback")
    preset: str = _help("auto (paper on a GPU, cpu otherwise), paper, or cpu", default="auto")
    seed: int = _help("seeds the data splits, the weights and dropout", default=1)
    device: str = _help("auto, cpu, cuda or cuda:N", default="auto")
    precision: str = _help(f"one of {PRECISIONS}: bf16 runs the forward passes under bfloat16 autocast (weights, optimiser and loss float32)", default="fp32")
    run_dir: str = _help("run folder; empty: runs/seq-<task>-<core>-<time>", default="")

    # --- data (sizes in episodes, programs or sequences)
    n_train: int = _help("training episodes", default=10_000)
    n_valid: int = _help("validation episodes", default=1_000)
    n_test: int = _help("test episodes", default=1_000)
    copy_length: int = _help("copy / reverse: digits per training and validation episode", default=40)
    copy_test_length: int = _help("copy / reverse: digits per test episode", default=400)
    max_count: int = _help("counting: the longest run of A's (the paper: 50 or 1000)", default=50)
    grid_size: int = _help("random_walk: the grid's side", default=8)
    walk_length: int = _help("random_walk: actions between resets", default=100)
    n_vars: int = _help("algorithmic: variables per program (the paper: 3 or 5)", default=3)
    program_length: int = _help("algorithmic: statements per program", default=100)
    seq_length: int = _help("adding / multiplication / xor: sequence length (the shortest, if variable)", default=100)
    variable_length: bool = _help("adding / multiplication / xor: lengths uniform in L .. 1.1 L", default=False)

    # --- model (cores take the fields they have: lstm, gru and mlp read d_model as hidden_size)
    d_model: int = _help("model width", default=256)
    n_layers: int = _help("layers", default=4)
    n_heads: int = _help("attention heads", default=4)
    span: int = _help("attention span: past steps in memory", default=100)
    d_ff: int = _help("feed-forward width; 0: 4 * d_model", default=0)
    dropout: float = _help("dropout in the attention cores", default=0.2)
    negative_slope: float = _help("ffattn / mean: every layer's leaky ReLU slope below 0 (0: ReLU)", default=0.01)

    # --- optimisation
    optimizer: str = _help("adam, or nesterov (SGD with Nesterov momentum)", default="adam")
    lr: float = _help("learning rate", default=1e-4)
    momentum: float = _help("nesterov: momentum", default=0.9)
    batch_size: int = _help("rows of the training stream (tokens tasks) or sequences per batch", default=512)
    bptt: int = _help("steps per training block; memory is carried between blocks", default=64)
    grad_clip: float = _help("gradient norm clip; 0: none", default=0.1)
    warmup: int = _help("updates of linear learning-rate warm-up", default=1000)
    max_updates: int = _help("stop after this many updates", default=100_000)
    max_minutes: float = _help("also stop after this many minutes of training in this process; 0: no limit", default=0.0)
    eval_every: int = _help("updates between validations", default=1000)
    patience: int = _help("stop after this many validations without a better validation accuracy; 0: never", default=10)

    # --- bookkeeping
    save_every: float = _help("seconds between checkpoints", default=600.0)
    log_every: int = _help("updates between TensorBoard points", default=50)
    threads: int = _help("torch CPU threads; 0: torch's default (pin to 1 on a shared machine)", default=0)

    def __post_init__(self):
        from seqtasks.models import MODELS  # (cycle: models read the config)
        from seqtasks.tasks import TASKS

        for name, choices in (("preset", PRESETS), ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {list(choices)}, got {getattr(self, name)!r}")
        check_precision(self.precision)
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; choose from {sorted(TASKS)}")
        if self.core not in MODELS:
            raise ValueError(f"unknown core {self.core!r}; choose from {sorted(MODELS)}")
        for name in ("n_train", "n_valid", "n_test", "copy_length", "copy_test_length", "max_count", "grid_size",
                     "walk_length", "program_length", "batch_size", "bptt", "max_updates", "eval_every", "log_every"):
            _at_least(name, getattr(self, name), 1)
        for name in ("warmup", "patience", "d_ff", "threads"):
            _at_least(name, getattr(self, name), 0)
        # Every float is finite (NaN and inf refused: `nan < 0` is False, so NaN would pass a
        # `< 0` check and train to NaN weights); no setting needs inf (0 means "none" where it can).
        for name in ("lr", "save_every"):
            check_float(name, getattr(self, name), 0, low_open=True)
        check_float32("lr", self.lr)
        check_float("max_minutes", self.max_minutes, 0, note="0: no limit")
        check_float("grad_clip", self.grad_clip, 0, note="0: no clipping")
        check_float("momentum", self.momentum, 0, 1, high_open=True)
        check_float("dropout", self.dropout, 0, 1, high_open=True)
        check_float("negative_slope", self.negative_slope, 0, 1, high_open=True, note="0: ReLU")


def _at_least(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


CPU_PRESET = dict(
    n_train=2000, n_valid=200, n_test=200, d_model=64, n_layers=2, n_heads=4, span=100, dropout=0.0,
    batch_size=32, lr=1e-3, warmup=100, max_updates=3000, eval_every=250, patience=4, grad_clip=1.0,
)
LONG_TERM_SETUP = dict(
    batch_size=100, optimizer="adam", lr=3e-3, grad_clip=0.0, warmup=0, n_test=1000,
    eval_every=1000, max_updates=100_000, patience=0, d_model=100,
)


def resolve_config(given: dict, cuda: bool) -> tuple[SeqConfig, str]:
    """The run's config from the flags `given` (field -> value); also the preset that applied."""
    from seqtasks.tasks import LONG_TERM

    preset = given.get("preset", "auto")
    chosen = ("paper" if cuda else "cpu") if preset == "auto" else preset
    values = dict(CPU_PRESET) if chosen == "cpu" else {}
    if given.get("task", SeqConfig.task) in LONG_TERM:
        values.update(LONG_TERM_SETUP)
    values.update(given)
    return SeqConfig(**values), chosen
