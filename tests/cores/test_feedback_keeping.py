"""The Feedback memory's ways of keeping the cue (agents/cores/feedback/reference.py: carry, keep_slot,
memory_write): each against what its equation says at its limits, the episode start emptying
what it carries, the fresh memory's retention the carry aims at, the refusals, which model runs
them (FeedbackCore the carry: its acting ring and a reference state taken over), and the trainers.
(Chunking, episode isolation, batch independence and gradients: test_interface.py draws them; the
carry's fast path against the reference: test_feedback_paths.py.)"""

import json

import pytest
import torch

import evaluate
import train_a2c
import train_ppo
from agents.config.a2c_config import A2CConfig, resolve_config
from agents.config.ppo_config import PPOConfig
from agents.cores import make_core
from agents.cores.feedback.core import FeedbackCore
from agents.cores.feedback.reference import FeedbackReference, reference_of
from agents.learners.ppo import PPOTrainer
from agents.learners.train import Trainer
from experiments.cue_memory import walk_to_query
from experiments.keep_cue import fresh_policy
from experiments.memory_probes import probe
from tests.cores.test_feedback_ring import act_both
from tests.trained import assert_resume_makes_the_unstopped_updates

INPUT_DIM, BATCH, STEPS = 5, 3, 9
SMALL = dict(d_model=8, n_heads=2, n_layers=2, span=3)
TOL = 1e-12  # float64


def built(**options) -> FeedbackReference:
    torch.manual_seed(0)
    return make_core("feedback", INPUT_DIM, **SMALL, **options).double().eval()


def inputs(seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(STEPS, BATCH, INPUT_DIM, generator=generator, dtype=torch.float64)
    first = torch.zeros(STEPS, BATCH, dtype=torch.bool)
    first[0] = True
    first[5, 1] = True  # env 1 starts a new episode at step 5
    return x, first


def run(core, x, first):
    with torch.no_grad():
        return core(x, core.initial_state(BATCH, "cpu"), first)


def set_gate(gate: torch.nn.Linear, bias: float) -> None:
    """A gate that ignores its input: sigmoid(bias) everywhere."""
    with torch.no_grad():
        gate.weight.zero_()
        gate.bias.fill_(bias)


def test_a_carry_that_never_keeps_is_the_papers_model():
    carrying, paper = built(carry="gate"), built()
    paper.load_state_dict({k: v for k, v in carrying.state_dict().items() if not k.startswith("carry_gate")})
    set_gate(carrying.carry_gate, -60.0)  # g = 1e-26: m_t = u_t
    x, first = inputs()
    (y, state), (y_paper, state_paper) = run(carrying, x, first), run(paper, x, first)
    torch.testing.assert_close(y, y_paper, atol=TOL, rtol=0)
    torch.testing.assert_close(carrying.memory_window(state)[0], paper.memory_window(state_paper)[0], atol=TOL, rtol=0)  # (the paper's: FeedbackCore's buffers)


def test_a_carry_that_always_keeps_holds_its_first_write_until_an_episode_start():
    core = built(carry="gate")
    set_gate(core.carry_gate, 60.0)  # g = 1 - 1e-26: m_t = m_{t-1}
    x, first = inputs()
    state = core.initial_state(BATCH, "cpu")
    written = []
    with torch.no_grad():
        for t in range(STEPS):
            _, state = core(x[t : t + 1], state, first[t : t + 1])
            written.append(core.written_memory(state).clone())
    # at an episode start m_{t-1} counts as 0, so m_t = (1 - g) u_t: about 1e-26 u_t; then kept as it is
    assert all(float(written[t].abs().max()) < 1e-20 for t in range(STEPS))
    with torch.no_grad():  # the same with a gate just below keep: each step keeps its m_{t-1} but for (1 - g)
        core.carry_gate.bias.fill_(4.0)
        _, state = run(core, x, first)
    kept = torch.sigmoid(torch.tensor(4.0, dtype=torch.float64))
    _, before = run(core, x[:-1], first[:-1])
    memory_before = core.written_memory(before)
    assert float((core.written_memory(state) - kept * memory_before).abs().max()) <= float((1 - kept) * 50)  # the new write's share at most 1 - g of |u| (< 50 here)


def test_an_episode_start_empties_the_carry_and_the_kept_slot():
    core = built(carry="gate", keep_slot=True)
    x, first = inputs()
    other = x.clone()
    other[:5, 1] += 3.0  # env 1's previous episode differs, its new one (from step 5) does not
    (y, state), (y_other, state_other) = run(core, x, first), run(core, other, first)
    torch.testing.assert_close(y[5:, 1], y_other[5:, 1], atol=TOL, rtol=0)
    torch.testing.assert_close(state.kept[1], state_other.kept[1], atol=TOL, rtol=0)
    assert float((y[:5, 1] - y_other[:5, 1]).abs().max()) > 1e-3  # (the inputs did reach the outputs before)


def test_the_kept_slot_writes_what_its_gate_lets_through_and_is_read_at_position_row_0():
    core = built(keep_slot=True)
    x, first = inputs()
    set_gate(core.kept_gate, -60.0)  # a = 0: k_t = m_t, the newest memory vector
    _, state = run(core, x, first)
    torch.testing.assert_close(state.kept, core.written_memory(state), atol=TOL, rtol=0)
    set_gate(core.kept_gate, 60.0)  # a = 1: k stays what an episode start made it, 0
    _, state = run(core, x, first)
    assert float(state.kept.abs().max()) < 1e-20
    set_gate(core.kept_gate, 0.0)
    for keep_slot in (True, False):
        reading = built(keep_slot=keep_slot).train()
        y, _ = reading(x, reading.initial_state(BATCH, "cpu"), first)
        y.square().sum().backward()
        row0 = float(reading.blocks[0].position.grad[0].abs().max())
        assert (row0 > 0) == keep_slot, (keep_slot, row0)  # row 0 is read by the kept slot only


def test_a_memory_written_through_tanh_is_bounded_and_is_tanh_of_the_papers_first_write():
    bounded, paper = built(memory_write="tanh", read_norm=False), built(read_norm=False)
    paper.load_state_dict(bounded.state_dict())
    x, first = inputs()
    with torch.no_grad():
        x = x * 30  # large inputs: the paper's raw write is far outside [-1, 1]
    _, state = run(bounded, x[:1], first[:1])
    _, state_paper = run(paper, x[:1], first[:1])
    first_write = paper.written_memory(state_paper)
    assert float(first_write.abs().max()) > 2
    torch.testing.assert_close(bounded.written_memory(state), torch.tanh(first_write), atol=TOL, rtol=0)
    _, state = run(bounded, x, first)
    assert float(bounded.memory_window(state)[0].abs().max()) <= 1  # (FeedbackCore's buffer has unwritten slots past the window)


def test_gate_biases_start_as_chrono_sets_them():
    core = make_core("feedback", INPUT_DIM, **SMALL, carry="gate", keep_slot=True, keep_t_max=50)
    for gate in (core.carry_gate, core.kept_gate):
        bias = gate.bias.detach()
        assert float(bias.min()) >= 0 and float(bias.max()) <= torch.log(torch.tensor(49.0)) + 1e-6
        assert len(set(bias.tolist())) == len(bias)  # one u per channel
    assert not torch.equal(core.carry_gate.bias, core.kept_gate.bias)


@pytest.mark.parametrize("model", ["feedback-span16", "feedback-span16-carry"])
def test_the_carry_starts_the_memory_near_keep(model):
    """The fresh probe the carry aims at (experiments/keep_cue.py): retention near 1 at L = 16
    where the paper's model keeps about 0.89 of the cue a step."""
    torch.set_num_threads(1)
    retentions = []
    for seed in (0, 1):
        policy, env_options = fresh_policy(model, 16, seed)
        retentions.append(probe(policy, walk_to_query(env_options, 16))["retention"])
    if model.endswith("carry"):
        assert min(retentions) > 0.95, retentions
    else:
        assert max(retentions) < 0.93, retentions


@pytest.mark.parametrize("options, message", [
    ({"carry": "lstm"}, r"^carry must be one of \['none', 'gate'\], got 'lstm'$"),
    ({"keep_slot": 1}, r"^keep_slot must be True or False, got 1$"),
    ({"memory_write": "norm"}, r"^memory_write must be one of \['raw', 'tanh'\], got 'norm'$"),
    ({"carry": "gate", "keep_t_max": 2}, r"^keep_t_max must be .*3.*got 2"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        make_core("feedback", INPUT_DIM, **SMALL, **options)


def test_make_core_builds_the_fast_core_for_every_way_of_keeping():
    assert type(make_core("feedback", INPUT_DIM, **SMALL)) is FeedbackCore
    for options in ({"carry": "gate"}, {"memory_write": "tanh", "read_norm": False}, {"carry": "gate", "memory_write": "tanh"},
                    {"keep_slot": True}, {"carry": "gate", "keep_slot": True}, {"memory_write": "tanh", "keep_slot": True}):
        assert type(make_core("feedback", INPUT_DIM, **SMALL, **options)) is FeedbackCore, options


@pytest.mark.parametrize("step", ["python", "auto"])
def test_the_carry_acts_on_the_ring_as_the_core_does(step):
    """The acting ring a CUDA graph captures (feedback/ring.py) with the carry: step for step the
    core's own acting calls (outputs, the memory it hands back), across episode starts and from
    a state taken over mid-episode."""
    core = built(carry="gate", step=step)
    with torch.no_grad():
        for p in core.parameters():
            p.add_(0.3 * torch.randn_like(p))
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4 * SMALL["span"] + 5, BATCH, INPUT_DIM, generator=generator, dtype=torch.float64)
    first = torch.rand(x.shape[:2], generator=generator) < 0.15
    ours, theirs, ring_state, state = act_both(core, x, first, warm=SMALL["span"] + 1)
    torch.testing.assert_close(ours, theirs, atol=1e-13, rtol=1e-13)
    torch.testing.assert_close(core.memory_window(ring_state)[0], core.memory_window(state)[0], atol=1e-13, rtol=1e-13)
    assert torch.equal(ring_state.valid, state.valid)


@pytest.mark.parametrize("options", [{"carry": "gate"}, {"carry": "gate", "memory_write": "tanh"}, {"memory_write": "tanh", "read_norm": False},
                                     {"keep_slot": True}, {"keep_slot": True, "carry": "gate"}])
def test_each_way_of_keeping_fed_a_step_at_a_time_equals_forward(options):
    """core.open (the acting-graph learner's run) with the carry, the tanh write, the kept slot or
    two of them: the steps' outputs, the outputs handed over (the gates recomputed from the stacked
    inputs), the state and every gradient, as forward."""
    core = built(**options).train()
    x, first = inputs()
    with torch.no_grad():
        _, state = core(x[:4], core.initial_state(BATCH, "cpu"), first[:4])
    weights = torch.randn(STEPS, BATCH, core.output_dim, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y, after = core(x, state, first)
    (y * weights).sum().backward()
    expected = {n: p.grad.clone() for n, p in core.named_parameters()}
    core.zero_grad()
    run = core.open(state, STEPS)
    y_steps = torch.stack([run.step(x[t], first[t]) for t in range(STEPS)])
    y_run = run.outputs()
    (y_run * weights).sum().backward()
    torch.testing.assert_close(y_steps, y.detach(), atol=TOL, rtol=0)
    torch.testing.assert_close(y_run, y, atol=TOL, rtol=0)
    finished = run.finish()
    torch.testing.assert_close(core.memory_window(finished)[0], core.memory_window(after)[0], atol=TOL, rtol=0)
    torch.testing.assert_close(finished.kept, after.kept, atol=TOL, rtol=0)
    for n, p in core.named_parameters():
        torch.testing.assert_close(p.grad, expected[n], atol=TOL, rtol=0, msg=n)
    for gate in (core.carry_gate, core.kept_gate):
        assert gate is None or float(gate.weight.grad.abs().max()) > 0


@pytest.mark.parametrize("options", [{"carry": "gate"}, {"keep_slot": True}])
def test_the_fast_core_goes_on_from_a_reference_state(options):
    """A checkpoint of a carry or kept-slot run from when the reference model ran them holds its
    state (ReferenceState): FeedbackCore takes it over, learning and acting, as the reference goes on."""
    core = built(**options).train()
    reference = reference_of(core)
    x, first = inputs()
    with torch.no_grad():
        _, state = reference(x[:4], reference.initial_state(BATCH, "cpu"), first[:4])
    y, after = core(x[4:], state, first[4:])
    y_ref, after_ref = reference(x[4:], state, first[4:])
    torch.testing.assert_close(y, y_ref, atol=TOL, rtol=0)
    torch.testing.assert_close(core.memory_window(after)[0], after_ref.memory, atol=TOL, rtol=0)
    torch.testing.assert_close(core.memory_window(state)[0], state.memory, atol=0, rtol=0)
    torch.testing.assert_close(after.kept, after_ref.kept, atol=TOL, rtol=0)
    run = core.open(state, 1)
    with torch.no_grad():
        torch.testing.assert_close(run.step(x[4], first[4]), y_ref[0], atol=TOL, rtol=0)


ENVS, ROLLOUT = 8, 8
OPTIONS = "d_model=8,n_heads=2,n_layers=2,span=3,carry=gate,keep_slot=True,memory_write=tanh"
ENV = ["--env", "corridor", "--env-opt", "length=3,max_episode_steps=7"]


@pytest.mark.parametrize("trainer", [train_a2c, train_ppo], ids=["a2c", "ppo"])
def test_the_command_line_trains_it_and_evaluate_scores_it(tmp_path, capsys, trainer):
    extra = ["--num-minibatches", "2"] if trainer is train_ppo else []
    trainer.main([*ENV, "--core", "feedback", "--core-opt", OPTIONS, "--num-envs", str(ENVS), "--rollout", str(ROLLOUT),
                  "--total-steps", str(3 * ENVS * ROLLOUT), "--threads", "1", "--run-dir", str(tmp_path), *extra])
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("core feedback: ") and "carry=gate" in line and "keep_slot=True" in line, line
    evaluate.main([str(tmp_path), "--episodes", "4", "--greedy"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["global_step"] == 3 * ENVS * ROLLOUT and result["episodes"] == 4


@pytest.mark.parametrize("trainer_class, config_class", [(Trainer, A2CConfig), (PPOTrainer, PPOConfig)], ids=["a2c", "ppo"])
def test_a_resumed_run_makes_the_updates_of_an_unstopped_one(tmp_path, trainer_class, config_class):
    def config(folder, updates):
        return resolve_config(dict(env="corridor", core="feedback", num_envs=ENVS, rollout=ROLLOUT, total_steps=updates * ENVS * ROLLOUT,
                                   seed=5, run_dir=str(tmp_path / folder), threads=1, learning_rate=1e-2,
                                   core_options=dict(SMALL, carry="gate", keep_slot=True),
                                   env_options={"length": 3, "max_episode_steps": 7}), config_class)

    assert_resume_makes_the_unstopped_updates(trainer_class, config, ENVS * ROLLOUT)


def test_the_cached_memory_learner_refuses_the_kept_slot():
    """PPO's cached_memory learner reads the memory window acting wrote; the kept slot is not in
    it, so a run with it is refused, not trained on another model."""
    with pytest.raises(ValueError, match=r"learner 'cached_memory' reads the memory window acting wrote, and the kept slot \(keep_slot=True\) is not in it"):
        resolve_config(dict(env="corridor", core="feedback", learner="cached_memory", core_options=dict(SMALL, keep_slot=True)), PPOConfig)
    resolve_config(dict(env="corridor", core="feedback", learner="cached_memory", core_options=dict(SMALL, carry="gate")), PPOConfig)
