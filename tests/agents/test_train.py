"""The trainer: exact resume, actor workers, dead workers, checkpoints, Ctrl-C at any moment, the command line."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.utils.tensorboard

import agents.learners.train
import train_a2c
from agents.config.a2c_config import resolve_config
from agents.runtime.actors import ActorError
from agents.runtime.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from agents.plot_curves import read_scalars
from agents.runtime.seeding import env_seeds
from agents.learners.train import Trainer
from tests.ctrl_c import exit_code, press_ctrl_c_in, signal_when
from tests.float32 import close32
from tests.trained import assert_same_parameters, trained_parameters

SMALL = {
    "feedback": {"d_model": 16, "n_layers": 2, "n_heads": 2, "span": 8},
    "lstm": {"hidden_size": 16},
    "gru": {"hidden_size": 16},
    "mlp": {"hidden_size": 16},
}


def small_config(tmp_path, core="feedback", updates=3, **fields):
    given = dict(env="corridor", core=core, num_envs=6, rollout=8, total_steps=updates * 6 * 8, seed=3,
                 run_dir=str(tmp_path), core_options=SMALL[core], env_options={"length": 3, "max_episode_steps": 7}, threads=1)
    return resolve_config({**given, **fields})


@pytest.mark.parametrize("core", ["feedback", "lstm"])
def test_resume_equals_an_uninterrupted_run(tmp_path, core):
    # Episodes of at most 7 steps in rollouts of 8: resume happens mid-episode with memory carried.
    straight = trained_parameters(small_config(tmp_path / "straight", core, updates=6))
    trained_parameters(small_config(tmp_path / "split", core, updates=3))
    moved = (tmp_path / "split").rename(tmp_path / "moved")  # a run folder resumes where it is now
    resumed = Trainer.from_checkpoint(str(moved), {"total_steps": 6 * 6 * 8})
    try:
        assert resumed.resumed_how.startswith("envs and memory continue")
        resumed.train()
    finally:
        resumed.close()
    assert resumed.updates == 6
    assert_same_parameters(straight, resumed.policy.state_dict())
    # TensorBoard holds every update once, the last one before the checkpoint included.
    assert not (tmp_path / "split").exists() and load_checkpoint(moved, "a2c")["counters"]["updates"] == 6
    steps, _ = read_scalars(str(moved), "charts/SPS")
    assert steps.tolist() == [48 * (u + 1) for u in range(6)]


def test_actor_workers_train_exactly_like_in_process_stepping(tmp_path):
    local = trained_parameters(small_config(tmp_path / "local", num_actors=0))
    workers = trained_parameters(small_config(tmp_path / "workers", num_actors=2))
    assert_same_parameters(local, workers)


def test_a_dead_worker_stops_training_with_an_error_and_a_checkpoint(tmp_path):
    trainer = Trainer(small_config(tmp_path, num_actors=2, updates=1000))
    try:
        trainer.update()
        os.kill(trainer.pool._processes[1].pid, signal.SIGKILL)
        with pytest.raises(ActorError, match="actor worker 1 .* died"):
            trainer.train()
    finally:
        trainer.close()
    payload = load_checkpoint(tmp_path, "a2c")
    assert payload["counters"]["updates"] >= 1 and payload["envs"] is None
    resumed = Trainer.from_checkpoint(str(tmp_path))
    try:
        assert resumed.resumed_how.startswith("clean episode restart")
        # fresh streams keyed by the step, not a replay of the first episodes
        assert resumed.pool.seeds == env_seeds(3, range(6), "training", restart=resumed.global_step) != env_seeds(3, range(6), "training")
        resumed.update()
    finally:
        resumed.close()


def test_a_kill_during_a_checkpoint_write_leaves_the_previous_one_loadable(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, torch
        from agents.runtime.checkpoint import save_checkpoint
        save_checkpoint({str(tmp_path / 'c.pt')!r}, "a2c", {{"counters": {{"n": 1}}}})
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # die after writing, before the rename
        save_checkpoint({str(tmp_path / 'c.pt')!r}, "a2c", {{"counters": {{"n": 2}}, "policy": {{"big": torch.zeros(1_000_000)}}}})
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd())
    assert result.returncode == -signal.SIGKILL
    assert load_checkpoint(tmp_path / "c.pt", "a2c")["counters"]["n"] == 1


def test_corrupt_and_foreign_checkpoints_give_clear_errors(tmp_path):
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(tmp_path, "a2c")
    save_checkpoint(tmp_path / "checkpoint.pt", "seqtasks", {})
    with pytest.raises(CheckpointError, match="'seqtasks' checkpoint, expected 'a2c'"):
        load_checkpoint(tmp_path, "a2c")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "elsewhere", "a2c")


def test_paper_preset_has_the_paper_maze_settings():
    config = resolve_config({"env": "maze", "core": "feedback", "preset": "paper", "run_dir": "x"})
    assert (config.num_envs, config.rollout, config.optimizer, config.learning_rate, config.entropy_coef) == (1024, 100, "adam", 3e-4, 5e-4)
    assert config.core_options == {"d_model": 256, "n_layers": 2, "n_heads": 4, "span": 200}
    lstm = resolve_config({"env": "water_maze", "core": "lstm", "preset": "paper", "learning_rate": 1e-3, "run_dir": "x"})
    # The paper's RMSprop epsilon 0.01 on its summed losses is 0.01 / (64 x 200) on our mean losses.
    assert (lstm.optimizer, lstm.optimizer_eps, lstm.learning_rate, lstm.core_options) == ("rmsprop", 0.01 / 12_800, 1e-3, {"hidden_size": 64, "n_layers": 2})


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--env", "nowhere"], "'nowhere'"),
        (["--core", "rnn"], "'rnn'"),
        (["--num-envs", "0"], "num_envs must be >= 1, got 0"),
        (["--optimizer", "sgd"], "'sgd'"),
        (["--lr-schedule", "cosine"], "'cosine'"),
        (["--core-opt", "span=wide"], "span='wide'"),
        (["--core", "lstm", "--core-opt", "span=8"], "'span' for core 'lstm'"),
        (["--env", "corridor", "--env-opt", "length=x"], "length must be an integer >= 2, got 'x'"),  # the env names strings
        (["--env", "corridor", "--env-opt", "doors=sideways"], "doors must be one of ['random', 'fixed'], got 'sideways'"),
        (["--env-opt", "length"], "env option 'length' must look like KEY=VALUE"),
        (["--env", "corridor", "--env-opt", "lenght=8"], "corridor has no option 'lenght'; its options are length, max_episode_steps, doors"),
        (["--gamma", "1.5"], "gamma must be in [0, 1], got 1.5"),
        (["--num-envs", "8", "--num-actors", "99"], "between 0 and num_envs (8), got 99"),
        (["--device", "tpu"], "'tpu'"),
        (["--precision", "fp16"], "precision must be one of ['fp32', 'bf16'], got 'fp16'"),
        (["--resume", "/nonexistent/run"], "no checkpoint at '/nonexistent/run'"),
        (["--resume", "/nonexistent/run", "--core", "lstm"], "--core lstm would change it"),
        # Options travel outside the config's fields, but a resumed run keeps its own just the same.
        (["--resume", "/nonexistent/run", "--core-opt", "hidden_size=16"],
         "--resume keeps the run's config; --core-opt hidden_size=16 would change it "
         "(only --device, --log-every, --num-actors, --save-every, --threads, --total-steps may be given)"),
        (["--resume", "/nonexistent/run", "--env-opt", "length=3", "--total-steps", "9"], "; --env-opt length=3 would change it"),
        (["--total-steps", "many"], "'many'"),
    ],
)
def test_bad_arguments_exit_2_naming_the_value(argv, named, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        train_a2c.main(argv if "--resume" in argv else argv + ["--run-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


def test_a_run_saved_on_a_gpu_resumes_without_one_given_device_cpu(tmp_path, monkeypatch, capsys):
    """A run trained with --device cuda keeps that device in its config. Resumed where torch
    sees no GPU, it exits 2 naming the flag that overrides it; with --device cpu it resumes."""
    trained_parameters(small_config(tmp_path, "lstm", updates=1))
    payload = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    payload["config"]["device"] = "cuda"  # as a GPU machine would have saved it
    torch.save(payload, tmp_path / "checkpoint.pt")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exit_info:
        train_a2c.main(["--resume", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "device 'cuda', but torch sees no CUDA GPU here; use --device cpu (or auto)" in capsys.readouterr().err
    train_a2c.main(["--resume", str(tmp_path), "--device", "cpu", "--total-steps", str(2 * 6 * 8)])
    assert load_checkpoint(tmp_path, "a2c")["counters"]["updates"] == 2


def test_command_line_run_writes_config_checkpoint_and_tensorboard(tmp_path, capsys):
    train_a2c.main(["--env", "corridor", "--core", "lstm", "--core-opt", "hidden_size=8", "--num-envs", "4", "--rollout", "4",
                    "--total-steps", "64", "--threads", "1", "--run-dir", str(tmp_path), "--log-every", "1"])
    assert (tmp_path / "config.json").is_file()
    assert load_checkpoint(tmp_path, "a2c")["counters"]["global_step"] == 64
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"charts/SPS", "charts/learning_rate", "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/explained_variance"} <= tags


@pytest.mark.parametrize("core", ["feedback", "lstm", "gru"])
def test_kept_acting_graph_gives_the_recomputed_update(tmp_path, core):
    """Learning from the graph kept while acting equals rerunning the chunk: the gradients of
    every update are compared, not the weights they lead to, where a gradient a few percent off
    would hide in the initial values. (Plain SGD: Adam would magnify float noise in near-zero
    gradients into whole steps, and the weights after one update differ only by rounding.)"""
    gradients = {}
    for learner in ("recompute", "acting_graph"):
        trainer = Trainer(small_config(tmp_path / learner, core, learner=learner))  # seeds the generators
        named = list(trainer.policy.named_parameters())
        trainer.optimizer = torch.optim.SGD([p for _, p in named], lr=0.1)
        taken = gradients[learner] = []  # one {name: gradient} per update, as the optimiser takes it
        trainer.optimizer.register_step_pre_hook(lambda *_, named=named, taken=taken: taken.append({n: p.grad.clone() for n, p in named}))
        try:
            for _ in range(3):  # with episode ends inside rollouts and memory carried between them
                trainer.update()
        finally:
            trainer.close()
    assert len(gradients["recompute"]) == len(gradients["acting_graph"]) == 3
    for update, (kept, recomputed) in enumerate(zip(gradients["acting_graph"], gradients["recompute"])):
        for name, want in recomputed.items():  # float32 sums back through 8 steps, two ways: rounding relative to the largest
            torch.testing.assert_close(kept[name], want, **close32(terms=8, scale=want.abs().max().item()),
                                       msg=lambda message, name=name, update=update: f"update {update}, {name}: {message}")


def test_acting_graph_needs_a_core_fed_step_by_step(tmp_path):
    with pytest.raises(ValueError, match="'mlp' is not"):
        Trainer(small_config(tmp_path, core="mlp", learner="acting_graph"))


@pytest.mark.parametrize("signum, group", [
    pytest.param(signal.SIGINT, True, id="SIGINT-group"),     # Ctrl-C at a terminal: the whole process group
    pytest.param(signal.SIGTERM, False, id="SIGTERM-alone"),  # kill, timeout: the learner alone
    pytest.param(signal.SIGTERM, True, id="SIGTERM-group"),   # scancel, a Slurm time limit: every process of the job
    pytest.param(signal.SIGHUP, False, id="SIGHUP-alone"),    # the terminal closed
    pytest.param(signal.SIGUSR2, True, id="SIGUSR2-group"),   # submitit's warning before a Slurm time limit or on preemption
])
def test_a_stop_signal_saves_a_checkpoint_with_the_envs(tmp_path, signum, group):
    """A stop signal reaches the learner (and, sent to the group, its workers): the learner
    saves, envs included, and exits 128 + the signal with one line and no traceback; the workers
    leave the signal to it."""
    command = [sys.executable, "train_a2c.py", "--env", "corridor", "--core", "lstm", "--core-opt", "hidden_size=8",
               "--num-envs", "4", "--rollout", "4", "--num-actors", "2", "--threads", "1", "--total-steps", "1000000000",
               "--save-every", "0.001", "--run-dir", str(tmp_path)]  # a checkpoint after each update: the loop runs
    code, err = signal_when(command, lambda: (tmp_path / "checkpoint.pt").is_file(), signum, group)
    assert code == 128 + signum, err
    assert f"continue with --resume {tmp_path}" in err and "Traceback" not in err
    payload = load_checkpoint(tmp_path, "a2c")
    assert payload["counters"]["updates"] >= 1 and payload["envs"] is not None


def test_preemption_signals_one_after_the_other_still_save_whole_updates(tmp_path):
    """Slurm preempts with SIGTERM then SIGUSR2 to every process: the second is the same request
    again, not a second Ctrl-C, so the update under way still finishes and the envs are saved."""
    command = [sys.executable, "train_a2c.py", "--env", "corridor", "--core", "lstm", "--core-opt", "hidden_size=8",
               "--num-envs", "4", "--rollout", "4", "--num-actors", "2", "--threads", "1", "--total-steps", "1000000000",
               "--save-every", "0.001", "--run-dir", str(tmp_path)]
    code, err = signal_when(command, lambda: (tmp_path / "checkpoint.pt").is_file(), (signal.SIGTERM, signal.SIGUSR2))
    # Both may be pending when Python looks, and it runs handlers in signal-number order (USR2 first).
    assert code in (128 + signal.SIGTERM, 128 + signal.SIGUSR2), err
    assert load_checkpoint(tmp_path, "a2c")["envs"] is not None


def test_a_run_folder_removed_while_training_gets_its_checkpoint_back(tmp_path):
    """The folder is made again and the checkpoint written into it, not as a file named like
    the folder (which failed the run and the next one in that folder)."""
    trainer = Trainer(small_config(tmp_path / "run", "lstm", updates=2))
    try:
        trainer.train()
        shutil.rmtree(tmp_path / "run")
        trainer.save()
    finally:
        trainer.close()
    assert (tmp_path / "run").is_dir()
    assert load_checkpoint(tmp_path / "run" / "checkpoint.pt", "a2c")["counters"]["updates"] == 2


A2C_FLAGS = ["--env", "corridor", "--core", "lstm", "--core-opt", "hidden_size=8", "--num-envs", "4", "--rollout", "4",
             "--num-actors", "0", "--threads", "1", "--total-steps", "48"]  # 3 updates of 16 frames


@pytest.fixture(scope="module")
def unstopped_policy(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("unstopped")
    train_a2c.main([*A2C_FLAGS, "--run-dir", str(run_dir)])
    return load_checkpoint(run_dir, "a2c")["policy"]


ANY_CALL = lambda *args, **kwargs: True  # noqa: E731
PHASES = [  # where Ctrl-C is pressed, and the updates the checkpoint then holds (None: no checkpoint)
    ("setup", agents.learners.train, "build_policy", ANY_CALL, None),
    ("opening the log", torch.utils.tensorboard, "SummaryWriter", ANY_CALL, 0),  # imported where the log opens
    ("an update", Trainer, "update", lambda trainer: trainer.updates == 1, 2),
    ("the last checkpoint write", torch, "save", ANY_CALL, 3),
]


@pytest.mark.parametrize("phase, owner, name, when, saved_updates", PHASES, ids=[phase[0] for phase in PHASES])
def test_ctrl_c_anywhere_exits_130_and_resumes_to_the_same_weights(tmp_path, monkeypatch, capsys, unstopped_policy, phase, owner, name, when, saved_updates):
    run_dir = tmp_path / "run"
    press_ctrl_c_in(monkeypatch, owner, name, when)
    assert exit_code(train_a2c.main, [*A2C_FLAGS, "--run-dir", str(run_dir)]) == 130
    err = capsys.readouterr().err
    monkeypatch.undo()
    if saved_updates is None:
        assert "interrupted: while setting up; nothing was saved" in err
        assert not (run_dir / "checkpoint.pt").exists()
        return
    assert f"interrupted: at step {saved_updates * 16}; continue with --resume {run_dir}" in err
    assert load_checkpoint(run_dir, "a2c")["counters"]["updates"] == saved_updates
    train_a2c.main(["--resume", str(run_dir)])
    assert_same_parameters(load_checkpoint(run_dir, "a2c")["policy"], unstopped_policy)


def test_ctrl_c_during_a_checkpoint_write_lets_it_finish(tmp_path, monkeypatch):
    press_ctrl_c_in(monkeypatch, torch, "save")
    with pytest.raises(KeyboardInterrupt):  # held back until the checkpoint is in place
        save_checkpoint(tmp_path / "c.pt", "a2c", {"counters": {"n": 2}})
    assert load_checkpoint(tmp_path / "c.pt", "a2c")["counters"]["n"] == 2
    assert [path.name for path in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left
