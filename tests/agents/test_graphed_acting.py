"""Acting through GraphedActing (agents/learners/graphed_acting.py, `--cuda-graph`), run here
without the capture (`capture=False`: the CPU has no CUDA graphs; tests/test_cuda.py captures):
training with it equals training without, PPO and A2C's recompute learner, for every core it
takes (the same actions, so the same updates, within float32's rounding of the Feedback ring's
sums in another order), its memory carried from rollout to rollout and over the weights' updates;
and what it cannot take is refused naming the value and what is allowed."""

import pytest
import torch

from agents.config.a2c_config import A2CConfig, resolve_config
from agents.config.ppo_config import PPOConfig
from agents.cores import make_core
from agents.cores.static_acting import static_acting
from agents.learners.graphed_acting import GraphedActing
from agents.learners.ppo import PPOTrainer
from agents.learners.train import Trainer
from tests.agents.test_ppo import SMALL
from tests.float32 import close32

ENVS, STEPS, UPDATES = 8, 8, 3
STATIC_CORES = ["feedback", "lstm", "gru", "ffm", "lru", "mamba", "mlp"]


def config(tmp_path, core: str, config_class=PPOConfig, **fields):
    given = dict(env="corridor", core=core, num_envs=ENVS, rollout=STEPS, total_steps=UPDATES * ENVS * STEPS, seed=3, run_dir=str(tmp_path),
                 core_options=SMALL[core], env_options={"length": 3, "max_episode_steps": 7}, threads=1, learning_rate=1e-2,
                 **{"learner": "recompute", **fields})
    return resolve_config(given, config_class)


def trained(trainer_class, config, graphed: bool) -> tuple[dict, list, object]:
    """UPDATES updates -> the weights after them, each rollout's actions, and the actor's state."""
    trainer = trainer_class(config)
    try:
        if graphed:
            trainer.actor.graphed = GraphedActing(trainer.policy, ENVS, "cpu", capture=False)
        actions, collect = [], trainer.actor.collect

        def recorded(*arguments, **options):
            rollout, episodes = collect(*arguments, **options)
            actions.append(rollout.action.clone())
            return rollout, episodes

        trainer.actor.collect = recorded
        for _ in range(UPDATES):
            trainer.update()
        return {name: p.detach().clone() for name, p in trainer.policy.named_parameters()}, actions, trainer.actor.state
    finally:
        trainer.close()


def assert_same_actions_and_weights(graphed: tuple, eager: tuple) -> None:
    """What trained() gave through the graphed step and without it: every rollout's actions equal,
    every weight within float32's rounding of the updates."""
    (weights, actions, _), (weights_eager, actions_eager, _) = graphed, eager
    for step, (a, b) in enumerate(zip(actions, actions_eager, strict=True)):
        assert torch.equal(a, b), f"rollout {step}: the graphed step chose other actions"
    for name, value in weights_eager.items():
        got = weights[name]
        if name.startswith("core.kv.") and name.endswith(".bias"):
            # The keys' bias adds q . b to every score of a row, which softmax takes away: its
            # gradient is 0 but for rounding, which Adam scales to whole steps. The values' half only.
            got, value = got[value.shape[0] // 2 :], value[value.shape[0] // 2 :]
        torch.testing.assert_close(got, value, **close32(terms=UPDATES * STEPS * 4, scale=value.abs().max().item()), msg=name)


ALGOS = {"ppo": (PPOTrainer, PPOConfig), "a2c": (Trainer, A2CConfig)}
# Every core with both trainers' recompute learner, and PPO's cached_memory learner, which reads
# the memory each graphed step wrote from the Feedback ring.
CASES = [(core, algo, "recompute") for core in STATIC_CORES for algo in ALGOS] + [("feedback", "ppo", "cached_memory")]


@pytest.mark.parametrize("core, algo, learner", CASES)
def test_training_through_the_graphed_step_equals_training_without(tmp_path, core, algo, learner):
    trainer_class, config_class = ALGOS[algo]
    graphed = trained(trainer_class, config(tmp_path / "graphed", core, config_class, learner=learner), graphed=True)
    eager = trained(trainer_class, config(tmp_path / "eager", core, config_class, learner=learner), graphed=False)
    assert_same_actions_and_weights(graphed, eager)
    state, state_eager = graphed[2], eager[2]
    assert type(state) is type(state_eager)
    for name, a, b in zip(state._fields, state, state_eager):
        if isinstance(a, torch.Tensor) and name not in ("memory", "keys", "values"):  # the Feedback buffers: their windows below
            torch.testing.assert_close(a, b, **close32(terms=STEPS * 4, scale=1.0), msg=name)
    if core == "feedback":  # (not the keys: made with the keys' bias above)
        span = SMALL[core]["span"]
        for name in ("memory", "values"):
            window = lambda s: getattr(s, name)[..., s.end - span : s.end, :] if name == "memory" else getattr(s, name)[..., s.end - span : s.end]  # noqa: E731
            torch.testing.assert_close(window(state), window(state_eager), **close32(terms=STEPS * 4, scale=1.0), msg=name)


def test_a_core_whose_state_grows_is_refused_naming_the_cores_that_can():
    core = make_core("transformer", 5, d_model=8, n_heads=2, n_layers=1, span=4)
    with pytest.raises(ValueError, match=r"TransformerCore's state keeps growing buffers \(end, version, log.*cores that can: feedback, lstm"):
        static_acting(core, 2, "cpu")


def test_a_cuda_graph_on_the_cpu_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"--cuda-graph needs a CUDA device; this run's device is cpu \(--device cpu\)"):
        Trainer(config(tmp_path, "lstm", A2CConfig, cuda_graph=True, device="cpu"))
    with pytest.raises(ValueError, match="a CUDA graph needs a CUDA device; this policy acts on cpu"):
        GraphedActing(None, ENVS, "cpu", capture=True)  # refused before it reads the policy


def test_a_cuda_graph_with_the_learner_that_records_while_acting_is_refused(tmp_path):
    with pytest.raises(ValueError, match="cuda_graph captures acting without gradients.*--learner recompute"):
        config(tmp_path, "feedback", A2CConfig, cuda_graph=True, learner="acting_graph")


def test_acting_before_begin_is_refused(tmp_path):
    trainer = Trainer(config(tmp_path, "lstm", A2CConfig))
    try:
        graphed = GraphedActing(trainer.policy, ENVS, "cpu", capture=False)
        inputs, _ = trainer.actor.staged()
        with pytest.raises(RuntimeError, match=r"before begin\(state\)"):
            graphed.act(inputs)
    finally:
        trainer.close()
