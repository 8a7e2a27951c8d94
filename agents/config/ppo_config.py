"""PPO's hyperparameters: A2C's (agents/config/a2c_config.py: the env, core, presets, optimiser, ...)
and the update's own, under CleanRL's names.

Defaults are CleanRL's `ppo_trxl` (its Transformer-XL recipe for MiniGrid Memory and Memory
Gym): 3 epochs of 8 minibatches, clip 0.1 on the ratio and the value, no advantage
normalisation, GAE lambda 0.95, no KL stop. Its other settings (discount 0.995, gradient norm
0.25, learning rate 2.75e-4 annealed to 1e-5, entropy 1e-4 annealed) stay A2C's or the preset's
here: set them with the flags (docs/training.md, "PPO").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from agents.config.a2c_config import A2CConfig
from agents.config.search_space import Search
from agents.cores.checks import check_bool, check_float

# How PPO recomputes a minibatch: "recompute" runs the core over the rollout from its stored start
# state (full BPTT over the rollout, agents/learners/ppo.py); "cached_memory" reads the memory
# vectors acting wrote and runs all steps at once, no gradient through them (Feedback only:
# agents/cores/feedback/cached.py).
LEARNERS = ("recompute", "cached_memory")
CACHES_MEMORY = ("feedback",)


@dataclass
class PPOConfig(A2CConfig):
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE lambda (CleanRL's ppo_trxl: 0.95)"})
    learner: str = field(default="recompute", metadata={
        "help": "recompute: every minibatch from the rollout's stored core state, the gradient through the memory over the "
                "rollout; cached_memory (feedback): all steps at once from the memory acting wrote, no gradient through it "
                "(CleanRL ppo_trxl's way; agents/cores/feedback/cached.py)"})
    update_epochs: int = field(default=3, metadata={"help": "passes over each rollout"})
    num_minibatches: int = field(default=8, metadata={"help": "minibatches per epoch, each a subset of whole envs; must divide each process's envs"})
    clip_coef: float = field(default=0.1, metadata={"help": "how far the ratio pi / pi_old (and with --clip-vloss the value) may move"})
    clip_vloss: bool = field(default=True, metadata={"help": "clip the value error as the ratio (--no-clip-vloss: plain squared error)"})
    norm_adv: bool = field(default=False, metadata={"help": "normalise the advantages within each minibatch"})
    target_kl: float = field(default=0.0, metadata={"help": "stop the update's epochs once the approximate KL passes this; 0: never"})

    learners: ClassVar[tuple[str, ...]] = LEARNERS

    # A2C's space and the update's own (num_minibatches: divisors of the presets' 64 envs)
    search_space: ClassVar[dict[str, Search]] = {
        **A2CConfig.search_space,
        "update_epochs": Search(1, 8, integer=True),
        "num_minibatches": Search(choices=(1, 2, 4, 8)),
        "clip_coef": Search(choices=(0.1, 0.2, 0.3)),
    }

    def __post_init__(self):
        super().__post_init__()
        if self.learner == "cached_memory":
            if self.core not in CACHES_MEMORY:
                raise ValueError(f"learner 'cached_memory' reads the memory the Feedback core wrote while acting; core {self.core!r} "
                                 f"has none to read (cores: {list(CACHES_MEMORY)}; the others: --learner recompute)")
            if self.reaches_back:
                raise ValueError(f"learner 'cached_memory' learns from the rollout's steps only; bptt {self.bptt} reaches further "
                                 f"back and needs --learner recompute")
            if self.core_options.get("keep_slot"):
                raise ValueError("learner 'cached_memory' reads the memory window acting wrote, and the kept slot (keep_slot=True) "
                                 "is not in it: use --learner recompute")
        for name in ("update_epochs", "num_minibatches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_envs % self.num_minibatches:
            raise ValueError(f"num_minibatches ({self.num_minibatches}) must divide num_envs ({self.num_envs}): minibatches are whole envs")
        check_float("clip_coef", self.clip_coef, 0, low_open=True)
        check_float("target_kl", self.target_kl, 0, note="0: no early stop")
        check_bool("clip_vloss", self.clip_vloss)
        check_bool("norm_adv", self.norm_adv)
