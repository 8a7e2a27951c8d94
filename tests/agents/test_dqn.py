"""The recurrent DQN (train_dqn.py, agents/learners/dqn/): replay equals acting, the targets by hand,
double Q, the epsilon schedules, exact resume with the replay, every core, bad flags."""

import json
import re

import numpy as np
import pytest
import torch

import evaluate
import train_dqn
from agents.config.a2c_config import resolve_config
from agents.config.dqn_config import DQNConfig
from agents.evaluation import load_run
from agents.learners.play import evaluation_seeds, playing_actor
from agents.learners.dqn.epsilon import epsilon
from agents.learners.dqn.loss import replayed_q, td_loss
from agents.learners.dqn.replay import FILES
from agents.learners.dqn.targets import bootstrap_values, n_step_targets
from agents.learners.dqn.trainer import DQNTrainer
from agents.runtime.actors import LocalEnvs
from agents.runtime.checkpoint import load_checkpoint
from tests.agents.test_ppo import SMALL as PPO_SMALL
from tests.trained import assert_same_parameters

SMALL = {**PPO_SMALL, "feedback": {**PPO_SMALL["feedback"], "step": "python"}}  # test_ppo's sizes; no build of the compiled step here
TMAZE = {"env": "tmaze", "env_options": {"length": 3}}  # episodes of 4 steps: whole-episode replay
CORRIDOR = {"env": "corridor", "env_options": {"length": 3, "max_episode_steps": 7}, "replay": "segments"}


def small(tmp_path, core="lstm", **fields):
    given = dict(core=core, num_envs=3, rollout=8, total_steps=10_000, seed=4, run_dir=str(tmp_path), core_options=SMALL[core],
                 threads=1, learning_rate=1e-2, batch_size=4, learning_starts=24, replay_capacity=2_000, save_every=1e6, **TMAZE)
    return resolve_config({**given, **fields}, DQNConfig)


def act_recording(trainer: DQNTrainer, updates: int) -> list[torch.Tensor]:
    """Run `updates` acting phases; the Q values (B, A) acting chose from at each step."""
    seen = []
    choose = trainer.actor.choose
    trainer.actor.choose = lambda q, greedy: (seen.append(q.detach().clone()), choose(q, greedy))[1]
    for _ in range(updates):
        trainer.update()
    return seen


# ---------------------------------------------------------------- replay equals acting


@pytest.mark.parametrize("core, state, burn", [("lstm", "stored", 3), ("gru", "stored", 3), ("lru", "stored", 3), ("ffm", "stored", 3),
                                               ("mamba", "stored", 3), ("transformer", "empty", 8)])
def test_replayed_segments_give_acting_outputs_from_their_start_state_after_the_burn_in(tmp_path, core, state, burn):
    """From the state acting had at the segment's start; or, for the Transformer (2 layers, span 4),
    from the empty state with a burn-in of n_layers x span steps, which rebuilds its whole window."""
    # No learning (learning_starts beyond the run): the weights acting used are the replay's.
    trainer = DQNTrainer(small(tmp_path, core, **CORRIDOR, burn_in=burn, segment_length=4, n_step=2, learning_starts=10**9,
                               segment_state=state))
    try:
        live = torch.stack(act_recording(trainer, 5))  # (time, B, A)
        B, M, stride = 3, burn + 4 + 2, 4
        assert len(trainer.replay) == B * ((40 - M) // stride + 1)
        index = torch.arange(len(trainer.replay))
        arrays = trainer.replay.arrays
        # the batch the learner builds, all sequences in storage order: segment k of env b at k * B + b
        trainer.replay.sample = lambda count: {name: values[index.numpy()] for name, values in arrays.items()}
        batch = trainer.batch(len(index))
        with torch.no_grad():
            replayed = replayed_q(trainer.policy, batch.inputs, batch.start_state, trainer.burn_in)  # (M - burn, E, A), as the learner runs it
        for i in range(len(index)):
            k, b = divmod(i, B)
            torch.testing.assert_close(replayed[:, i], live[k * stride + burn: k * stride + M, b], atol=1e-5, rtol=1e-5)
        assert batch.inputs.first[1:].any(), "episodes should start inside segments"
    finally:
        trainer.close()


def test_replayed_episodes_give_acting_outputs(tmp_path):
    trainer = DQNTrainer(small(tmp_path, "lstm", learning_starts=10**9))
    try:
        live = act_recording(trainer, 2)  # 16 steps of episodes of 4 steps and the last observation: 3 whole each
        episodes = []
        running = [[] for _ in range(3)]
        for q, valid in zip(live, trainer_valid_steps(trainer, len(live))):
            for b in range(3):
                running[b].append(q[b])
                if not valid[b]:
                    episodes.append(torch.stack(running[b]))
                    running[b] = []
        assert len(trainer.replay) == len(episodes) == 9
        index = np.arange(len(episodes))
        arrays = trainer.replay.arrays
        trainer.replay.sample = lambda count: {name: values[index] for name, values in arrays.items()}
        batch = trainer.batch(len(index))
        with torch.no_grad():
            replayed = replayed_q(trainer.policy, batch.inputs, batch.start_state, 0)
        for i, episode in enumerate(episodes):
            torch.testing.assert_close(replayed[: len(episode), i], episode, atol=1e-5, rtol=1e-5)
    finally:
        trainer.close()


def trainer_valid_steps(trainer, steps):
    """The T-maze of length 3 with NEXT_STEP autoreset: 4 steps of an episode, then its last observation."""
    return [np.full(3, (t % 5) != 4) for t in range(steps)]


# ---------------------------------------------------------------- targets


def test_n_step_targets_by_hand():
    g = 0.5
    # one sequence: steps 0-2 an episode that terminates at step 2, step 3 its last observation
    # (not valid), steps 4-7 an episode truncated at step 6, step 7 its last observation
    reward = torch.tensor([1.0, 2.0, 4.0, 0.0, 8.0, 16.0, 32.0, 0.0])[:, None]
    terminated = torch.tensor([0, 0, 1, 0, 0, 0, 0, 0], dtype=torch.bool)[:, None]
    truncated = torch.tensor([0, 0, 0, 0, 0, 0, 1, 0], dtype=torch.bool)[:, None]
    valid = torch.tensor([1, 1, 1, 0, 1, 1, 1, 0], dtype=torch.bool)[:, None]
    boot = torch.tensor([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0])[:, None]
    target, complete = n_step_targets(reward, terminated, truncated, valid, boot, g, 2)
    want = [1 + g * 2 + g**2 * 30,  # two rewards, then B at step 2
            2 + g * 4,  # ends (terminated) at step 2: no bootstrap
            4,  # terminated: its reward alone
            0,  # not valid: no target
            8 + g * 16 + g**2 * 70,  # two rewards, B at step 6
            16 + g * 32 + g**2 * 80,  # truncated at 6: B at its last observation, step 7
            32 + g * 80,
            0]
    assert target[:, 0].tolist() == pytest.approx(want)
    assert complete[:, 0].tolist() == [True, True, True, False, True, True, True, False]
    # three steps: step 4's target needs step 7 (B) and step 5's would need step 8, past the end
    target3, complete3 = n_step_targets(reward[4:7], terminated[4:7], torch.zeros(3, 1, dtype=torch.bool), valid[4:7],
                                        boot[4:7], g, 2)
    assert complete3[:, 0].tolist() == [True, False, False]
    assert target3[0, 0].item() == pytest.approx(8 + g * 16 + g**2 * 70)
    # n = 1 is the one-step target
    one, _ = n_step_targets(reward, terminated, truncated, valid, boot, g, 1)
    assert one[:3, 0].tolist() == pytest.approx([1 + g * 20, 2 + g * 30, 4])


def test_double_q_picks_with_the_online_network_and_values_with_the_target():
    online = torch.tensor([[[1.0, 5.0, 2.0]]])  # picks action 1
    target = torch.tensor([[[9.0, 3.0, 7.0]]])  # whose own best is action 0
    assert bootstrap_values(online, target, double=True).item() == 3.0
    assert bootstrap_values(online, target, double=False).item() == 9.0


def test_the_loss_bootstraps_from_the_target_network_at_the_online_argmax(tmp_path):
    trainer = DQNTrainer(small(tmp_path, "lstm", learning_starts=10**9, gamma=0.9))
    try:
        act_recording(trainer, 2)
        with torch.no_grad():  # a target network other than the online one
            for parameter in trainer.target.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.5)
        batch = trainer.batch(6)
        loss, _ = td_loss(trainer.policy, trainer.target, batch, 0, None, 0.9, 1, True, "mse")
        with torch.no_grad():
            q = trainer.policy(batch.inputs, batch.start_state)[0]
            q_target = trainer.target(batch.inputs, batch.start_state)[0]
        best = q.argmax(-1, keepdim=True)[1:]
        value = q_target[1:].gather(-1, best).squeeze(-1)  # (M - 1, K): B at step t + 1
        goal = batch.reward[:-1] + 0.9 * value * ~batch.terminated[:-1]
        taken = q.gather(-1, batch.action.unsqueeze(-1)).squeeze(-1)[:-1]
        mask = batch.valid[:-1]
        want = ((taken - goal).square() * mask).sum() / mask.sum()
        torch.testing.assert_close(loss.detach(), want)
    finally:
        trainer.close()


# ---------------------------------------------------------------- epsilon


def test_epsilon_schedules():
    # Ni et al.'s: 1 to 1/T over the first 10% of training
    assert epsilon("ni", 0, 1000, 0, 0, 0, 20) == 1.0
    assert epsilon("ni", 50, 1000, 0, 0, 0, 20) == pytest.approx((1 + 1 / 20) / 2)
    assert epsilon("ni", 100, 1000, 0, 0, 0, 20) == pytest.approx(1 / 20)
    assert epsilon("ni", 900, 1000, 0, 0, 0, 20) == pytest.approx(1 / 20)
    assert epsilon("linear", 0, 1000, 0.8, 0.1, 0.5, None) == pytest.approx(0.8)
    assert epsilon("linear", 250, 1000, 0.8, 0.1, 0.5, None) == pytest.approx(0.45)
    assert epsilon("linear", 999, 1000, 0.8, 0.1, 0.5, None) == pytest.approx(0.1)
    assert epsilon("constant", 0, 1000, 0.8, 0.1, 0.5, None) == 0.1
    with pytest.raises(ValueError, match="no bound on its episodes"):
        epsilon("ni", 0, 1000, 0, 0, 0, None)


def test_acting_explores_at_epsilon(tmp_path):
    trainer = DQNTrainer(small(tmp_path, "mlp", num_envs=64))
    try:
        q = torch.tensor([[0.0, 1.0, 0.0, 0.0]]).expand(64, 4)
        for eps, share in ((0.0, 0.0), (1.0, 0.75)):
            trainer.actor.epsilon = eps
            chosen = torch.cat([trainer.actor.choose(q, False) for _ in range(40)])
            assert (chosen != 1).float().mean().item() == pytest.approx(share, abs=0.03)
        assert (trainer.actor.choose(q, True) == 1).all()
    finally:
        trainer.close()


# ---------------------------------------------------------------- resume, checkpoints, evaluate


def run_updates(trainer: DQNTrainer, updates: int) -> None:
    for _ in range(updates):
        trainer.update()


@pytest.mark.parametrize("replay", [TMAZE, CORRIDOR], ids=["episodes", "segments"])
def test_resume_equals_an_uninterrupted_run_with_its_replay(tmp_path, replay):
    # rollouts of 8 steps against episodes of 4 (+1): the split falls inside episodes, after learning started
    fields = dict(replay, burn_in=2, segment_length=3, n_step=2) if replay is CORRIDOR else dict(replay, n_step=2)
    straight = DQNTrainer(small(tmp_path / "straight", **fields))
    try:
        run_updates(straight, 4)
    finally:
        straight.close()
    split = DQNTrainer(small(tmp_path / "split", **fields))
    try:
        run_updates(split, 2)
        assert split.gradient_steps > 0
        split.save()
        split.save()  # the second save writes the other file and removes the first
        assert sorted(p.name for p in (tmp_path / "split").glob("replay-*.npz")) == [FILES[1]]
    finally:
        split.close()
    # a save killed after writing the next replay file and before the checkpoint: the checkpoint's file holds
    (tmp_path / "split" / FILES[0]).write_bytes(b"torn")
    resumed = DQNTrainer.from_checkpoint(str(tmp_path / "split"))
    try:
        assert resumed.resumed_how.startswith("envs and memory continue")
        run_updates(resumed, 2)
    finally:
        resumed.close()
    assert resumed.gradient_steps == straight.gradient_steps
    assert_same_parameters(straight.policy.state_dict(), resumed.policy.state_dict())
    assert_same_parameters(straight.target.state_dict(), resumed.target.state_dict())
    for name, values in straight.replay.arrays.items():
        assert np.array_equal(values, resumed.replay.arrays[name]), name


def test_actor_workers_train_exactly_like_in_process_stepping(tmp_path):
    weights = []
    for actors in (0, 2):
        trainer = DQNTrainer(small(tmp_path / str(actors), num_actors=actors))
        try:
            run_updates(trainer, 4)
            assert trainer.gradient_steps > 0
            weights.append(trainer.policy.state_dict())
        finally:
            trainer.close()
    assert_same_parameters(*weights)


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def test_the_command_line_trains_resumes_and_evaluate_scores_it(tmp_path, capsys):
    """Not greedy, evaluate.py plays a DQN run as it trained: epsilon-greedy at its schedule's last
    epsilon (Ni et al.'s: 1/T past the first 10%, T = 4 steps here), never by a softmax over Q
    values; --epsilon 0 is the greedy policy exactly, --epsilon 1 the uniform one."""
    run = tmp_path / "run"
    flags = ["--env", "tmaze", "--env-opt", "length=3", "--core", "lstm", "--core-opt", "hidden_size=8", "--num-envs", "4",
             "--rollout", "8", "--batch-size", "4", "--learning-starts", "32", "--threads", "1", "--run-dir", str(run)]
    train_dqn.main([*flags, "--total-steps", "64"])
    assert load_checkpoint(run, "dqn")["counters"]["global_step"] == 64
    with pytest.raises(SystemExit) as refused:
        train_dqn.main([*flags, "--total-steps", "64"])
    assert refused.value.code == 2 and "already holds a run" in capsys.readouterr().err
    train_dqn.main(["--resume", str(run), "--total-steps", "128"])
    assert load_checkpoint(run, "dqn")["counters"]["global_step"] == 128
    capsys.readouterr()
    evaluate.main([str(run), "--episodes", "8", "--greedy"])
    out = capsys.readouterr().out
    greedy = last_json(out)
    assert "tmaze (length=3), lstm core trained 128 frames" in out and "epsilon" not in greedy
    evaluate.main([str(run), "--episodes", "8"])
    out = capsys.readouterr().out
    assert "epsilon-greedy (epsilon 0.25) actions" in out and last_json(out)["epsilon"] == 0.25
    evaluate.main([str(run), "--episodes", "8", "--epsilon", "0"])
    assert last_json(capsys.readouterr().out)["results"]["agent"] == greedy["results"]["agent"]

    pool = LocalEnvs("tmaze", evaluation_seeds(0, 2), {"length": 3})
    try:
        actor = playing_actor(pool, load_run(str(run), torch.device("cpu")).policy, torch.device("cpu"), 1.0)
        q = torch.tensor([[0.0, 5.0, 1.0, 2.0]] * 2)  # (B, A): action 1 is the greedy one
        torch.manual_seed(0)
        uniform = torch.stack([actor.choose(q, greedy=False) for _ in range(2000)])
        shares = torch.bincount(uniform.flatten(), minlength=4) / uniform.numel()
        assert torch.allclose(shares, torch.full((4,), 0.25), atol=0.03)  # 4,000 draws: over 4 standard errors
        actor.epsilon = 0.0
        assert (actor.choose(q, greedy=False) == 1).all()
    finally:
        pool.close()


# ---------------------------------------------------------------- every core


@pytest.mark.parametrize("core", ["transformer", "feedback"])
def test_cores_with_a_shared_ring_learn_from_segments_started_empty(tmp_path, core):
    trainer = DQNTrainer(small(tmp_path, core, **CORRIDOR, burn_in=4, segment_length=4, segment_state="empty", learning_starts=16))
    try:
        run_updates(trainer, 3)
        assert trainer.gradient_steps > 0 and len(trainer.replay) > 0
    finally:
        trainer.close()


@pytest.mark.parametrize("core", sorted(SMALL))
def test_every_core_learns_from_replayed_episodes(tmp_path, core):
    trainer = DQNTrainer(small(tmp_path, core, learning_starts=0, updates_per_step=0.1))
    try:
        before = {name: value.clone() for name, value in trainer.policy.state_dict().items()}
        run_updates(trainer, 2)
        assert trainer.gradient_steps == 4  # 2 x 24 frames x 0.1, the fraction carried
        changed = [name for name, value in trainer.policy.state_dict().items() if not torch.equal(before[name], value)]
        assert any(name.startswith("core.") for name in changed), "the core's weights should learn"
    finally:
        trainer.close()


# ---------------------------------------------------------------- bad flags


@pytest.mark.parametrize("flags, message", [
    (["--n-step", "0"], "n_step must be an integer >= 1, got 0"),
    (["--tau", "0"], "tau must be"),
    (["--entropy-coef", "0.1"], "entropy_coef=0.1: A2C's, which DQN does not read; leave --entropy-coef unset"),
    (["--epsilon-schedule", "cosine"], r"unknown epsilon_schedule 'cosine'; choose from \['ni', 'linear', 'constant'\]"),
    (["--replay", "all"], r"unknown replay 'all'; choose from \['auto', 'episodes', 'segments'\]"),
    (["--segment-state", "zero"], r"unknown segment_state 'zero'; choose from \['stored', 'empty'\]"),
    (["--replay-capacity", "20"], r"the replay holds 5 sequences of 4 steps .* fewer than one batch \(--batch-size 32\)"),
    (["--replay-capacity", str(10**14)], "the replay .* needs about .* lower --replay-capacity"),
    (["--env", "corridor", "--env-opt", "length=3", "--replay", "segments", "--core", "transformer"],
     "segment replay stores each segment's start state, and core 'transformer' keeps a field shared by the whole batch.* "
     "use --segment-state empty"),
    (["--epsilon-schedule", "linear", "--epsilon-start", "0.1", "--epsilon-end", "0.5"], r"epsilon_end \(0.5\) must be <= epsilon_start"),
])
def test_bad_flags_are_refused_with_what_is_allowed(tmp_path, capsys, flags, message):
    refused_with(tmp_path, capsys, flags, message)


@pytest.mark.parametrize("flags, message", [
    (["--replay", "episodes", "--epsilon-schedule", "linear"], "--replay episodes stores whole episodes, and env 'corridor' does not bound"),
    (["--replay", "segments"], "epsilon schedule 'ni' decays to 1/T, T the longest episode, and this env has no bound"),
])
def test_episodes_and_ni_epsilon_need_bounded_episodes(tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.setattr(LocalEnvs, "longest_episode", property(lambda self: None))  # every env here has a bound
    refused_with(tmp_path, capsys, ["--env", "corridor", "--env-opt", "length=3", *flags], message)


def refused_with(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as refused:  # --total-steps 8: a run wrongly accepted ends at once
        train_dqn.main(["--env", "tmaze", "--env-opt", "length=2", "--core", "lstm", "--threads", "1", "--total-steps", "8",
                        "--run-dir", str(tmp_path / "run"), *flags])
    assert refused.value.code == 2
    assert re.search(message, capsys.readouterr().err), message
    assert not (tmp_path / "run").exists()
