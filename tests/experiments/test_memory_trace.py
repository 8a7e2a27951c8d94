"""The memory trace (experiments/memory_trace.py) and its probes (experiments/memory_probes.py):
probing leaves training untouched, the trace survives a resume (a cut-off one is written again),
and the probes measure what they say, including the mechanism the corridor page names (a memory
read through a LayerNorm keeps less of the cue the larger its cue-independent part)."""

import json

import pytest
import torch
from gymnasium.spaces import MultiDiscrete

from agents.config.a2c_config import A2CConfig
from agents.runtime.checkpoint import load_checkpoint
from agents.learners.train import Trainer, build_policy
from experiments import memory_trace
from experiments.cue_memory import walk_to_doors
from experiments.memory_probes import probe
from tests.experiments.cue_bounds import MEMORY_ABOVE, NO_MEMORY_BELOW

CORRIDOR = {"length": 5, "max_episode_steps": 20}
TINY = ["--env", "corridor", "--env-opt", "length=5,max_episode_steps=20", "--core", "feedback", "--core-opt", "d_model=8,n_heads=2,span=1",
        "--num-envs", "4", "--rollout", "8", "--no-previous-inputs", "--threads", "1", "--save-every", "1e9", "--seed", "3"]


def policy(core: str, **core_options):
    torch.manual_seed(0)
    config = A2CConfig(env="corridor", core=core, core_options=core_options, env_options=CORRIDOR)
    return build_policy(config, MultiDiscrete([3, 3, 3]), 4).eval()


def weights(run_dir) -> dict:
    return load_checkpoint(run_dir, Trainer.kind)["policy"]


def test_probing_changes_nothing_the_run_learns(tmp_path):
    """A traced run and a plain train_a2c.py run of the same flags end with the same weights, bit for bit."""
    from train_a2c import main as train

    memory_trace.main(["a2c", *TINY, "--total-steps", "96", "--run-dir", str(tmp_path / "traced")])
    train([*TINY, "--total-steps", "96", "--run-dir", str(tmp_path / "plain")])
    traced, plain = weights(tmp_path / "traced"), weights(tmp_path / "plain")
    assert traced.keys() == plain.keys() and all(torch.equal(traced[k], plain[k]) for k in traced)


def test_the_trace_probes_on_schedule_and_continues_on_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(memory_trace, "EARLY", 32)
    monkeypatch.setattr(memory_trace, "EARLY_UNTIL", 64)
    monkeypatch.setattr(memory_trace, "LATER", 64)
    run = tmp_path / "run"
    memory_trace.main(["a2c", *TINY, "--total-steps", "96", "--run-dir", str(run)])
    first = json.loads((run / "trace.json").read_text())["probes"]
    assert [p["frames"] for p in first] == [0, 32, 64, 96]  # before any update, every 32 to 64, the end
    assert first[0]["train_success"] is None and all(0 <= p["train_success"] <= 1 for p in first[1:] if p["train_success"] is not None)
    (run / "trace.json").write_text((run / "trace.json").read_text()[:50])  # cut off, as a crash mid-write once left it
    memory_trace.main(["a2c", "--resume", str(run), "--total-steps", "96", "--threads", "1"])
    assert json.loads((run / "trace.json").read_text())["probes"] == first  # written again from the checkpoint
    memory_trace.main(["a2c", "--resume", str(run), "--total-steps", "256", "--threads", "1"])
    probes = json.loads((run / "trace.json").read_text())["probes"]
    assert probes[:4] == first  # kept from the checkpoint, not restarted
    assert [p["frames"] for p in probes[4:]] == [128, 192, 256]  # every 64 after 64


def test_the_trace_refuses_an_env_that_is_not_the_corridor(tmp_path):
    with pytest.raises(SystemExit) as stop:
        memory_trace.main(["a2c", "--env", "maze", "--total-steps", "64", "--run-dir", str(tmp_path)])
    assert stop.value.code == 2  # parser.error, after naming the env
    with pytest.raises(SystemExit, match="usage: python -m experiments.memory_trace {a2c,ppo} TRAIN_ARGS"):
        memory_trace.main(["sac"])


def test_probes_of_cores_with_and_without_memory():
    """An MLP sees nothing of the cue at the doors and no gradient gets back to it; an LSTM and a
    fresh Feedback core carry some and pass some back. The Feedback core's own numbers: softmax(w)
    sums to 1, one memory vector per step of the walk (start cell to doors)."""
    walk = walk_to_doors(CORRIDOR)
    mlp, lstm, feedback = probe(policy("mlp"), walk), probe(policy("lstm"), walk), probe(policy("feedback", span=1, n_layers=2), walk)
    assert mlp["cue_separation"] < NO_MEMORY_BELOW and mlp["gradient_to_cue"] == 0 and mlp["value_gradient_to_cue"] == 0
    for memory in (lstm, feedback):
        assert memory["cue_separation"] > MEMORY_ABOVE and memory["gradient_to_cue"] > 0 and memory["value_gradient_to_cue"] > 0
        assert len(memory["output_separation"]) == walk.obs.shape[0]
    assert sum(feedback["layer_weights"]) == pytest.approx(1.0) and len(feedback["memory_gap"]) == walk.obs.shape[0]
    assert 0 < feedback["retention"] < 1 and "layer_weights" not in lstm


@pytest.mark.parametrize("seed", range(3))
def test_a_larger_memory_read_through_the_norm_keeps_less_of_the_cue(seed):
    """The mechanism of docs/experiments/corridor-span.md, on fresh span-1 cores: make the
    memory's cue-independent part larger (a bigger embedding bias, what training grows) and,
    read through the LayerNorm (the paper's model), the cue's retention per step falls in
    proportion (measured 0.35-0.48 -> 0.12-0.14); read raw (read_norm=False) it barely moves
    (0.24-0.29 -> 0.22-0.26)."""
    walk = walk_to_doors({"length": 8, "max_episode_steps": 32})
    retention = {}
    for read_norm in (True, False):
        torch.manual_seed(seed)
        agent = policy("feedback", span=1, n_layers=2, read_norm=read_norm)
        before = probe(agent, walk)
        with torch.no_grad():
            agent.core.embed.bias.add_(2 * torch.randn_like(agent.core.embed.bias))
        after = probe(agent, walk)
        assert sum(after["memory_norm"]) > 2.5 * sum(before["memory_norm"])  # the memory grew
        retention[read_norm] = after["retention"] / before["retention"]
    assert retention[True] < 0.5 and retention[False] > 0.8


def synthetic_run(seed: int, success: float, sizes: list[float]) -> dict:
    """A run of feedback_forgetting's summary whose probes (at 0, 20k, 100k frames) have memory sizes `sizes`."""
    probes = [{"frames": frames, "train_success": None if frames == 0 else success, "cue_separation": 1e-3 / size,
               "gradient_to_cue": 1e-3, "retention": 1 / size, "memory_norm": [size] * 8, "layer_weights": [0.3, 0.3, 0.4]}
              for frames, size in zip((0, 20_000, 100_000), sizes)]
    return {"seed": seed, "success": success, "training_seconds": 1.0, "probes": probes}


def test_the_forgetting_tables_split_solved_runs_from_failed(tmp_path):
    from experiments import feedback_forgetting

    runs = [synthetic_run(0, 1.0, [5, 6, 7]), synthetic_run(1, 0.5, [5, 10, 20]), synthetic_run(2, 0.4, [5, 12, 30])]
    summary = {"length": 8, "frames": 100_000, "algo": "a2c", "seeds": [0, 1, 2], "variants": {"paper": "the paper's"},
               "models": [{"variant": "paper", "doors": "fixed", "span": 1, "runs": runs,
                           "solved": feedback_forgetting.solved_interval([1.0, 0.5, 0.4], feedback_forgetting.SOLVED)}]}
    text = feedback_forgetting.table(summary)
    assert "| paper | fixed | 1 | 1 of 3, 0.33 [" in text and "1.00, 0.50, 0.40" in text
    assert "| 1 solved | 5.0 / 0.20 / 2e-04 / 1e-03 | 6.0 / 0.17 / 2e-04 / 1e-03 | 7.0 / 0.14 / 1e-04 / 1e-03 | 1.00 [1.00, 1.00] |" in text
    assert "| 2 failed | 5.0 / 0.20 / 2e-04 / 1e-03 | 11.0 / 0.09 / 9e-05 / 1e-03 | 25.0 / 0.04 / 4e-05 / 1e-03 | 1.00 [1.00, 1.00] |" in text  # medians
    feedback_forgetting.draw(summary, tmp_path / "figure.png")
    assert (tmp_path / "figure.png").stat().st_size > 10_000


def test_memory_growth_swaps_each_weight_group(tmp_path, capsys):
    """Each row is the fresh or trained policy with one group swapped; the fresh and trained rows
    bracket them, and a run that is not a Feedback corridor run is refused by name."""
    from experiments import memory_growth
    from train_a2c import main as train

    train([*TINY, "--core-opt", "n_layers=2", "--total-steps", "64", "--run-dir", str(tmp_path / "feedback")])
    memory_growth.main([str(tmp_path / "feedback")])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| fresh") or line.startswith("| trained")]
    names = [row[0].removeprefix("| ") for row in rows]
    assert names[:2] == ["fresh", "trained"] and "fresh, layer 2 feed-forward trained" in names and len(names) == 2 + 2 * 10
    for name, size, retention, product in rows:
        assert float(product.rstrip(" |")) == pytest.approx(float(size) * float(retention), abs=0.01)
    train(["--env", "corridor", "--env-opt", "length=5", "--core", "lstm", "--num-envs", "4", "--rollout", "8", "--total-steps", "32",
           "--run-dir", str(tmp_path / "lstm")])
    with pytest.raises(SystemExit):
        memory_growth.main([str(tmp_path / "lstm")])
    assert "is a lstm run on 'corridor'; this needs a feedback run on the corridor" in capsys.readouterr().err


def test_random_updates_do_not_grow_the_memory():
    """The control for the growth training causes (docs/experiments/corridor-span.md): 30 Adam
    steps (lr 1e-3, the preset's) along random gradients leave a fresh span-1 core's memory size
    within 10% (measured: 4.4-5.5 -> 4.5-5.5, seeds 0-2), where 10 updates of A2C take it from
    5.5 to 8."""
    walk = walk_to_doors({"length": 8, "max_episode_steps": 32})
    for seed in range(3):
        agent = policy("feedback", span=1, n_layers=2)
        torch.manual_seed(seed)
        before = sum(probe(agent, walk)["memory_norm"])
        optimizer = torch.optim.Adam(agent.parameters(), lr=1e-3)
        for _ in range(30):
            for parameter in agent.parameters():
                parameter.grad = torch.randn_like(parameter)
            optimizer.step()
        assert abs(sum(probe(agent, walk)["memory_norm"]) / before - 1) < 0.1
