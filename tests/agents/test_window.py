"""--bptt K (agents/learners/window.py): the gradient of an update reaches the K - T steps before its
rollout, for A2C and PPO and every core that carries memory; K = T is today's learner bit for bit;
the window survives a checkpoint; a bad K is refused naming it."""

import dataclasses

import pytest
import torch

from agents.learners.a2c import gae_advantages
from agents.config.a2c_config import A2CConfig, resolve_config
from agents.cores.feedback.reference import ReferenceState, reference_of
from agents.learners.ppo import PPOTrainer
from agents.config.ppo_config import PPOConfig
from agents.learners.train import Trainer
from agents.learners.window import GradientWindow
from tests.float32 import close32
from tests.trained import assert_same_parameters, trained_parameters

SMALL = {
    "feedback": {"d_model": 16, "n_layers": 2, "n_heads": 2, "span": 4},
    "transformer": {"d_model": 16, "n_layers": 2, "n_heads": 2, "span": 4},
    "lstm": {"hidden_size": 16},
}
ENVS, STEPS = 8, 8  # episodes of at most 7 steps: some continue from one rollout into the next
LEARNERS = {"a2c": (Trainer, A2CConfig), "ppo": (PPOTrainer, PPOConfig)}


def small(tmp_path, core="lstm", algo="a2c", updates=2, **fields):
    given = dict(env="corridor", core=core, num_envs=ENVS, rollout=STEPS, total_steps=updates * ENVS * STEPS, seed=5,
                 run_dir=str(tmp_path), core_options=SMALL[core], env_options={"length": 3, "max_episode_steps": 7},
                 threads=1, learning_rate=1e-2, **fields)
    if algo == "ppo":
        given.update(num_minibatches=1, update_epochs=1)
    return resolve_config(given, LEARNERS[algo][1])


def cue_swapped(r, where: torch.Tensor):
    """The rollout with the corridor's colours (1 blue, 2 green) swapped in the observations at
    `where` (T, B) bool: a different cue, the same rules."""
    obs = r.inputs.obs.clone()
    obs[:-1][where] = torch.where(obs[:-1][where] > 0, 3 - obs[:-1][where], obs[:-1][where])
    return dataclasses.replace(r, inputs=dataclasses.replace(r.inputs, obs=obs))


def update_gradients(trainer, previous, current) -> list[torch.Tensor]:
    """The gradients the update on `current` takes after a window that stored `previous`."""
    trainer.window.clear()
    trainer.window.advance(trainer.policy, previous)
    parameters = [p for p in trainer.policy.parameters() if p.requires_grad]
    taken = []
    trainer.optimizer_step = lambda loss, stats: taken.append(
        [torch.zeros_like(p) if g is None else g for g, p in zip(torch.autograd.grad(loss, parameters, allow_unused=True), parameters)])
    if isinstance(trainer, PPOTrainer):
        advantages = gae_advantages(current.reward, current.values, current.terminated, current.truncated, current.valid,
                                    trainer.config.gamma, trainer.config.gae_lambda)
        inputs = trainer.window.learning_inputs(current, bootstrap=False)
        trainer.learn_minibatch(current, inputs, torch.arange(ENVS), advantages, advantages + current.values[:-1])
    else:
        trainer.learn(current)
    return taken[0]


def two_rollouts(trainer):
    ppo = isinstance(trainer, PPOTrainer)
    first, _ = trainer.actor.collect(STEPS, keep_outputs=ppo)
    second, _ = trainer.actor.collect(STEPS, keep_outputs=ppo)
    return first, second


def differs(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return any(not torch.allclose(x, y, rtol=1e-3, atol=1e-6) for x, y in zip(a, b))


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
@pytest.mark.parametrize("core", ["lstm", "feedback", "transformer"])
def test_the_previous_rollout_reaches_the_gradient_only_inside_the_window(tmp_path, core, algo):
    """K = 2T: swapping the cue in the previous rollout changes this update's gradient; K = T:
    it changes nothing (the window stores no step)."""
    gradients = {}
    for bptt in (STEPS, 2 * STEPS):
        trainer = LEARNERS[algo][0](small(tmp_path / str(bptt), core, algo, bptt=bptt, learner="recompute"))
        try:
            previous, current = two_rollouts(trainer)
            everywhere = torch.ones_like(previous.inputs.first[:-1])
            gradients[bptt] = [update_gradients(trainer, rollout, current) for rollout in (previous, cue_swapped(previous, everywhere))]
        finally:
            trainer.close()
    assert all(torch.equal(a, b) for a, b in zip(*gradients[STEPS]))
    assert differs(*gradients[2 * STEPS])


@pytest.mark.parametrize("core", ["lstm", "feedback"])
def test_episode_starts_inside_the_window_cut_the_gradient(tmp_path, core):
    """Changing only steps of the previous rollout that come before a later episode start of
    their env (inside that rollout) leaves the gradient as it was, to float32 rounding."""
    trainer = Trainer(small(tmp_path, core, bptt=2 * STEPS, learner="recompute"))
    try:
        previous, current = two_rollouts(trainer)
        first = previous.inputs.first[:-1]  # (T, B)
        # later_start[t, b]: env b begins an episode at some step after t within the previous rollout
        later_start = torch.flip(torch.cummax(torch.flip(first.int(), [0]), 0).values, [0]).bool()
        before_a_start = torch.zeros_like(first)
        before_a_start[:-1] = later_start[1:]
        assert before_a_start.any() and not before_a_start.all()
        same, changed = (update_gradients(trainer, rollout, current) for rollout in (previous, cue_swapped(previous, before_a_start)))
        # ...while changing the steps after each env's last start moves it.
        after = update_gradients(trainer, cue_swapped(previous, ~before_a_start), current)
    finally:
        trainer.close()
    for a, b in zip(same, changed):
        torch.testing.assert_close(b, a, **close32(terms=4 * STEPS, scale=float(a.abs().max()) + 1e-12))
    assert differs(same, after)


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
@pytest.mark.parametrize("core", ["feedback", "lstm"])
def test_a_window_of_the_rollout_is_the_default_learner_bit_for_bit(tmp_path, core, algo):
    """--bptt T trains exactly as no --bptt (the Feedback core keeping its acting graph under A2C)."""
    trainer_class = LEARNERS[algo][0]
    runs = []
    for bptt in (0, STEPS):
        trainer = trainer_class(small(tmp_path / str(bptt), core, algo, updates=3, bptt=bptt))
        try:
            trainer.train()
        finally:
            trainer.close()
        runs.append((trainer.keep_graph, trainer.policy.state_dict()))
    assert runs[0][0] == runs[1][0]
    assert_same_parameters(runs[0][1], runs[1][1])


@pytest.mark.parametrize("core", ["feedback", "lstm"])
def test_resume_keeps_the_window(tmp_path, core):
    """A run stopped and resumed with K = 3T makes the updates of one never stopped: the stored
    steps and the window's start state are in the checkpoint."""
    fields = dict(bptt=3 * STEPS)
    straight = trained_parameters(small(tmp_path / "straight", core, updates=6, **fields))
    trained_parameters(small(tmp_path / "split", core, updates=3, **fields))
    resumed = Trainer.from_checkpoint(str(tmp_path / "split"), {"total_steps": 6 * ENVS * STEPS})
    try:
        assert len(resumed.window) == 2 * STEPS
        assert (resumed.window.inputs.starts == resumed.window.inputs.first.cpu().numpy()).all()  # episodes pack as before the stop
        resumed.train()
    finally:
        resumed.close()
    assert_same_parameters(straight, resumed.policy.state_dict())


def test_the_window_fills_then_holds_k_minus_t_steps(tmp_path):
    trainer = Trainer(small(tmp_path, "lstm", bptt=20))  # K - T = 12: not a multiple of T
    try:
        lengths = []
        for _ in range(4):
            trainer.update()
            lengths.append(len(trainer.window))
            assert (trainer.window.inputs.starts == trainer.window.inputs.first.numpy()).all()  # the host's copy, for packing
    finally:
        trainer.close()
    assert lengths == [8, 12, 12, 12]


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(bptt=4), r"bptt \(K\) must be 0 \(the rollout\), >= rollout \(8\) or 'episode', got 4"),
        (dict(bptt=-8), r"bptt must be an integer K >= 0 or 'episode', got -8"),
        (dict(bptt="forever"), r"bptt must be an integer K >= 0 or 'episode', got 'forever'"),
        (dict(bptt=16, learner="acting_graph"), r"learner 'acting_graph' learns from the rollout only; bptt 16 reaches further back"),
        (dict(bptt="episode", learner="acting_graph"), r"learner 'acting_graph' learns from the rollout only; bptt episode reaches"),
        (dict(bptt=16, bptt_max=32), r"bptt_max caps --bptt episode: give it with --bptt episode"),
        (dict(bptt="episode", bptt_max=4), r"bptt_max must be 0 \(no cap\) or >= rollout \(8\), got 4"),
    ],
)
def test_a_bad_window_is_refused_naming_it(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        small(tmp_path, "feedback", **fields)


def test_max_history_is_k_minus_t_or_the_caps(tmp_path):
    assert [small(tmp_path, bptt=bptt).max_history for bptt in (0, STEPS, 20)] == [0, 0, 12]
    assert small(tmp_path, bptt="episode").max_history is None and small(tmp_path, bptt="episode", bptt_max=20).max_history == 12


def test_a_window_of_a_bad_size_or_another_runs_checkpoint_is_refused_naming_it():
    for max_history in (-1, None):
        with pytest.raises(ValueError, match=rf"a gradient window keeps max_history = K - T >= 0 steps .*, got {max_history}"):
            GradientWindow(max_history)
    saved = GradientWindow(4).state_dict()
    with pytest.raises(ValueError, match=r"the checkpoint's gradient window \(max_history 4, following episodes: False\) "
                                         r"is not this run's \(8, False\)"):
        GradientWindow(8).load_state_dict(saved, torch.device("cpu"))


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
def test_the_feedback_cores_window_gradient_equals_the_reference_models(tmp_path, algo):
    """K = 2T with the Feedback core on its default path (compiled, on the CPU in float32): the
    update's gradient, reaching back through the window's stored steps and the episode starts in
    them, equals the one its reference model (feedback/reference.py) gives from the same rollouts."""
    trainer = LEARNERS[algo][0](small(tmp_path / "fast", "feedback", algo, bptt=2 * STEPS, learner="recompute"))
    previous, current = two_rollouts(trainer)
    assert previous.inputs.first[1:-1].any() or current.inputs.first[1:-1].any(), "no episode starts inside the window"
    fast = update_gradients(trainer, previous, current)
    twin = LEARNERS[algo][0](small(tmp_path / "reference", "feedback", algo, bptt=2 * STEPS, learner="recompute"))
    twin.policy.load_state_dict(trainer.policy.state_dict())
    twin.policy.core = reference_of(trainer.policy.core)
    span = SMALL["feedback"]["span"]

    def as_reference(r):  # the rollout's start state as the reference model keeps it: the last S memory vectors
        state = r.start_state
        return dataclasses.replace(r, start_state=ReferenceState(state.memory[:, state.end - span : state.end], state.valid, state.memory.new_zeros(state.memory.shape[0], 0)))

    slow = update_gradients(twin, as_reference(previous), as_reference(current))
    for got, want in zip(fast, slow):
        torch.testing.assert_close(got, want, **close32(terms=2 * STEPS * ENVS, scale=float(want.abs().max())))


TMAZE = 5  # episodes of L + 1 = 6 steps and a reset step: one every 7 steps, in lockstep, so with
# rollouts of 4 every phase of an episode against a rollout comes round within 7 updates


def tmaze(tmp_path, core, algo, bptt, updates=8, **fields):
    options = {"lstm": {"hidden_size": 8}, "feedback": {"d_model": 8, "n_layers": 1, "n_heads": 2, "span": 2},
               "transformer": {"d_model": 8, "n_layers": 1, "n_heads": 2, "span": 8}}[core]
    given = dict(env="tmaze", core=core, num_envs=2, rollout=4, total_steps=updates * 8, seed=1, run_dir=str(tmp_path),
                 core_options=options, env_options={"length": TMAZE}, threads=1, bptt=bptt, **fields)
    if algo == "ppo":
        given.update(num_minibatches=1, update_epochs=1)
    return resolve_config(given, LEARNERS[algo][1])


def decisions_see_their_cue(trainer) -> list[bool]:
    """For each decision (an episode's last step) in each update's rollout: whether its episode's
    first step, the cue, is among the learning call's inputs and swapping it changes the decision's
    logits (so reaches its gradient)."""
    seen, learning_inputs = [], trainer.window.learning_inputs

    def inspected(r, bootstrap):
        w = learning_inputs(r, bootstrap)
        with torch.no_grad():
            logits, _ = w.call(trainer.policy, packed=False)
            for t, b in torch.nonzero(r.terminated).tolist():
                decision, cue = t, w.history + t - TMAZE  # the call's outputs begin after the history
                if cue < 0 or not w.inputs.first[cue, b]:
                    seen.append(False)
                    continue
                obs = w.inputs.obs.clone()
                obs[cue, b, 1] = 3 - obs[cue, b, 1]  # the signal: 1 up <-> 2 down
                swapped, _ = dataclasses.replace(w, inputs=dataclasses.replace(w.inputs, obs=obs)).call(trainer.policy, packed=False)
                seen.append(not torch.equal(swapped[decision, b], logits[decision, b]))
        return w

    trainer.window.learning_inputs = inspected
    try:
        trainer.train()
    finally:
        trainer.close()
    return seen


@pytest.mark.parametrize("algo", ["a2c", "ppo"])
@pytest.mark.parametrize("core", ["lstm", "feedback", "transformer"])
def test_following_episodes_every_decision_sees_its_cue_at_every_phase(tmp_path, core, algo):
    # Under a fixed K = max(T, L + 1) = 6 (what the memory-length sweep used), the cue of an episode
    # that began in the rollout before is outside the learning call for some phases (test below).
    seen = decisions_see_their_cue(LEARNERS[algo][0](tmaze(tmp_path, core, algo, "episode")))
    assert len(seen) >= 4 and all(seen)


def test_a_fixed_window_of_the_episodes_length_misses_cues_at_some_phases(tmp_path):
    seen = decisions_see_their_cue(Trainer(tmaze(tmp_path, "lstm", "a2c", TMAZE + 1)))
    assert len(seen) >= 4 and not all(seen) and any(seen)


def test_following_episodes_stores_only_what_running_episodes_need(tmp_path):
    # Episodes of 7 steps in lockstep: after update u, 4u steps have passed, and the running
    # episode began at the last multiple of 7 (none is stored when the next step begins one).
    trainer = Trainer(tmaze(tmp_path, "lstm", "a2c", "episode"))
    try:
        lengths = []
        for _ in range(7):
            trainer.update()
            lengths.append(len(trainer.window))
    finally:
        trainer.close()
    assert lengths == [(4 * u) % 7 for u in range(1, 8)]


def test_following_episodes_needs_a_bounded_episode_or_a_cap(tmp_path):
    config = tmaze(tmp_path, "lstm", "a2c", "episode")
    with pytest.raises(ValueError, match="--bptt episode needs episodes of bounded length, and env 'Blackjack-v1' has no time limit"):
        Trainer(dataclasses.replace(config, env="Blackjack-v1", env_options={}))
    capped = Trainer(dataclasses.replace(config, bptt_max=8))  # at most 8 - 4 stored: every cut episode's start state advanced
    try:
        for _ in range(7):
            capped.update()
            assert len(capped.window) <= 4
    finally:
        capped.close()


def test_resume_keeps_the_episode_window(tmp_path):
    straight = trained_parameters(tmaze(tmp_path / "straight", "lstm", "a2c", "episode", updates=6))
    trained_parameters(tmaze(tmp_path / "split", "lstm", "a2c", "episode", updates=3))
    resumed = Trainer.from_checkpoint(str(tmp_path / "split"), {"total_steps": 6 * 8})
    try:
        assert len(resumed.window) == (3 * 4) % 7 and resumed.window.episodes
        resumed.train()
    finally:
        resumed.close()
    assert_same_parameters(straight, resumed.policy.state_dict())
