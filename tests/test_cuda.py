"""On a CUDA GPU: every core against itself on the CPU, in float32 and under bfloat16 autocast,
and the A2C and PPO trainers learning on the GPU. CI has no GPU, so there these tests skip,
saying so; on a machine with one, `python -m pytest tests/test_cuda.py` runs them (the rest of
the suite then runs its trainers on the GPU too: `--device auto` picks it).

The CPU and the GPU sum in other orders (blocked products, parallel reductions), so float32
results agree to float32's rounding over the computation's length (tests/float32.py), not
bit for bit; TF32, which keeps 10 bits of a product's inputs (torch's default for cuDNN's RNNs),
is off in every test (tests/conftest.py). Under autocast the GPU's bfloat16 result
is held to the same bfloat16 tolerance as the CPU's (tests/bfloat16.py).
"""

import copy

import pytest
import torch

from agents.config.a2c_config import resolve_config
from agents.learners.ppo import PPOTrainer
from agents.learners.train import Trainer
from tests.bfloat16 import close_bf16, roundings
from tests.cores.test_bf16 import CORES, SMOOTH, build, case, outputs_and_gradients
from tests.cores.test_interface import tensors
from tests.float32 import close32

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU on this machine")


def on_gpu(core, x, first, r, autocast: bool):
    """outputs_and_gradients of a copy of `core` on the GPU, brought back to the CPU."""
    core, x, first, r = copy.deepcopy(core).cuda(), x.cuda(), first.cuda(), r.cuda()
    for module in core.modules():  # cuDNN's RNN backward runs in training mode only (no dropout here: the same function)
        if isinstance(module, torch.nn.RNNBase):
            module.train()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        y, grads = outputs_and_gradients(core, x, first, r)
    assert y.device.type == "cuda" and all(g.device.type == "cuda" for g in grads)
    return y.cpu(), [g.cpu() for g in grads]


@pytest.mark.parametrize("name", CORES)
@pytest.mark.parametrize("steps, reset", [(1, 0.0), (8, 0.3)])
def test_a_core_on_the_gpu_matches_itself_on_the_cpu(name, steps, reset):
    core, layers = build(name, seed=steps)
    x, first, r = case(steps, steps, reset)
    y, grads = outputs_and_gradients(core, x, first, r)
    y_gpu, grads_gpu = on_gpu(core, x, first, r, autocast=False)
    terms = roundings(steps, layers)
    torch.testing.assert_close(y_gpu, y, **close32(terms, scale=float(y.abs().max())))
    for got, want in zip(grads_gpu, grads):
        torch.testing.assert_close(got, want, **close32(2 * terms, scale=float(want.abs().max()) + 1e-12))


@pytest.mark.parametrize("name", CORES)
def test_a_core_under_bf16_autocast_on_the_gpu_matches_float32(name):
    core, layers = build(name, seed=3)
    x, first, r = case(3, 8, 0.3)
    y, grads = outputs_and_gradients(core, x, first, r)
    y_gpu, grads_gpu = on_gpu(core, x, first, r, autocast=True)
    k = roundings(8, layers)
    assert y_gpu.isfinite().all()
    torch.testing.assert_close(y_gpu, y, **close_bf16(k, scale=float(y.abs().max())))
    if name in SMOOTH:  # ReLU's kink moves whole gradients between dtypes (test_bf16's docstring)
        for got, want in zip(grads_gpu, grads):
            torch.testing.assert_close(got, want, **close_bf16(2 * k, scale=float(want.abs().max()) + 1e-12))


@pytest.mark.parametrize("trainer_class, core, precision, cuda_graph", [
    (Trainer, "feedback", "fp32", False), (Trainer, "feedback", "bf16", False), (Trainer, "lstm", "fp32", False),
    (PPOTrainer, "transformer", "fp32", False), (PPOTrainer, "feedback", "bf16", True), (Trainer, "lstm", "fp32", True),
])
def test_trainers_learn_on_the_gpu(trainer_class, core, precision, cuda_graph, tmp_path):
    """Ten updates on the corridor: the policy, its gradients and the carried memory live on the
    GPU, the loss is finite and the weights move (acting through a CUDA graph too: --cuda-graph)."""
    sizes = {"lstm": {"hidden_size": 32}}.get(core, {"d_model": 16, "n_layers": 2, "n_heads": 2, "span": 8})
    config = resolve_config(dict(env="corridor", core=core, seed=0, num_envs=16, rollout=16, threads=1, run_dir=str(tmp_path),
                                 core_options=sizes, env_options={"length": 4}, precision=precision, device="cuda",
                                 cuda_graph=cuda_graph, learner="recompute" if cuda_graph else "auto"),
                            trainer_class.config_class)
    trainer = trainer_class(config)
    try:
        before = [p.detach().clone() for p in trainer.policy.parameters()]
        for _ in range(10):
            trainer.update()
        params = list(trainer.policy.parameters())
        assert {p.device.type for p in params} == {p.grad.device.type for p in params} == {"cuda"}
        assert {t.device.type for t in tensors(trainer.actor.state)} == {"cuda"}
        assert all(p.isfinite().all() for p in params)
        assert any(not torch.equal(p, b) for p, b in zip(params, before))
    finally:
        trainer.close()


@pytest.mark.parametrize("core, learner", [("feedback", "recompute"), ("lstm", "recompute"), ("feedback", "cached_memory")])
def test_training_through_the_captured_acting_step_equals_training_without(core, learner, tmp_path):
    """--cuda-graph on the GPU: three PPO updates acting through the captured step choose the same
    actions as without it and end at the same weights, the cached_memory learner reading the
    memory the captured steps wrote (tests/agents/test_graphed_acting.py runs the same without
    the capture, on the CPU, for every core it takes)."""
    from agents.config.ppo_config import PPOConfig
    from tests.agents.test_graphed_acting import assert_same_actions_and_weights, config, trained

    runs = []
    for graphed in (True, False):
        given = config(tmp_path / str(graphed), core, PPOConfig, device="cuda", cuda_graph=graphed, learner=learner)
        runs.append(trained(PPOTrainer, given, graphed=False))  # the flag builds the graph (captured) itself
    assert_same_actions_and_weights(*runs)


def test_the_captured_step_reads_the_weights_where_the_optimiser_updates_them(tmp_path):
    """One graph for the whole run: after an update changes the weights, the captured step acts
    as the eager step does with the new weights."""
    from agents.config.ppo_config import PPOConfig
    from agents.learners.graphed_acting import GraphedActing
    from tests.agents.test_graphed_acting import ENVS, config

    trainer = PPOTrainer(config(tmp_path, "feedback", PPOConfig, device="cuda"))
    try:
        trainer.policy.eval()
        captured = GraphedActing(trainer.policy, ENVS, "cuda")
        eager = GraphedActing(trainer.policy, ENVS, "cuda", capture=False)
        inputs, _ = trainer.actor.staged()
        for update in range(2):
            state = trainer.actor.state
            captured.begin(state)
            eager.begin(state)
            for _ in range(5):
                (logits, value), (logits_eager, value_eager) = captured.act(inputs), eager.act(inputs)
                torch.testing.assert_close(logits, logits_eager, **close32(16, scale=float(logits_eager.abs().max())))
                torch.testing.assert_close(value, value_eager, **close32(16, scale=float(value_eager.abs().max())))
            with torch.no_grad():
                for p in trainer.policy.parameters():
                    p.mul_(0.8)  # an optimiser's in-place update, say
    finally:
        trainer.close()
