"""The task generators against independent reference code: a direct walker, an interpreter for
the programs, and targets recomputed from the inputs."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqtasks.data import IGNORE
from seqtasks.tasks.algorithmic import AlgorithmicTask
from seqtasks.tasks.copy import CopyTask
from seqtasks.tasks.counting import CountingTask
from seqtasks.tasks.long_term import LongTermTask
from seqtasks.tasks.random_walk import RandomWalkTask
from tests.float32 import approx32

SETTINGS = settings(derandomize=True, deadline=None, max_examples=25)


def episodes_of(episodes):
    for a, b in zip(episodes.offsets[:-1], episodes.offsets[1:]):
        yield episodes.inputs[a:b], episodes.targets[a:b]


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), length=st.integers(1, 12), test_length=st.integers(1, 30), reverse=st.booleans(), split=st.sampled_from(["train", "valid", "test"]))
def test_copy_and_reverse_targets(seed, length, test_length, reverse, split):
    task = CopyTask(length, test_length, reverse)
    episodes = task.generate(np.random.default_rng(seed), 5, split)
    n = test_length if split == "test" else length
    assert len(episodes) == 5
    for inputs, targets in episodes_of(episodes):
        names = [task.input_tokens[i] for i in inputs]
        digits = names[:n]
        assert all(d.isdigit() for d in digits) and names[n] == "=" and names[n + 1 :] == ["?"] * n
        expected = digits[::-1] if reverse else digits
        assert list(targets[: n + 1]) == [IGNORE] * (n + 1)
        assert [task.output_tokens[t] for t in targets[n + 1 :]] == expected


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), max_count=st.integers(1, 60))
def test_counting_targets(seed, max_count):
    task = CountingTask(max_count)
    episodes = task.generate(np.random.default_rng(seed), 8, "train")
    for inputs, targets in episodes_of(episodes):
        text = "".join(task.input_tokens[i] for i in inputs)
        n = text.count("A")
        assert 1 <= n <= max_count and text == "A" * n + "?" * (n + 1)
        answer = "".join(task.output_tokens[t] for t in targets if t != IGNORE)
        assert answer == "B" * n + "." and (targets[:n] == IGNORE).all()


def walk(actions, size):
    """The reference walker: one action at a time, as the task's text states it."""
    row = col = size // 2
    dr, dc = -1, 0  # facing north
    cells = []
    for action in actions:
        if action == "left":
            dr, dc = -dc, dr
        elif action == "right":
            dr, dc = dc, -dr
        elif 0 <= row + dr < size and 0 <= col + dc < size:
            row, col = row + dr, col + dc
        cells.append(f"{row},{col}")
    return cells


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 9), walk_length=st.integers(1, 40))
def test_random_walk_matches_a_direct_walker(seed, size, walk_length):
    task = RandomWalkTask(size, walk_length)
    episodes = task.generate(np.random.default_rng(seed), 6, "train")
    for inputs, targets in episodes_of(episodes):
        actions = [task.input_tokens[i] for i in inputs]
        assert actions[0] == "reset" and "reset" not in actions[1:] and len(actions) == walk_length + 1
        assert targets[0] == IGNORE
        assert [task.output_tokens[t] for t in targets[1:]] == walk(actions[1:], size)


def test_random_walk_turns_change_where_forward_goes():
    # left, forward from the centre of a 4x4 grid facing north: west to (2, 1); right, forward: east to (2, 3)
    assert walk(["left", "forward"], 4) == ["2,2", "2,1"]
    assert walk(["right", "forward", "forward"], 4) == ["2,2", "2,3", "2,3"]  # the second is off the grid: ignored


def run_program(text):
    """The reference interpreter: executes the program text, checks its rules, returns the
    printed values. Statements are separated by ';'; the program ends with END."""
    assert text.endswith("END")
    values, printed = {}, []

    def read(name):
        assert name in values, f"{name} used before initialisation"
        return values[name]

    def step(var, op):
        values[var] = read(var) + (1 if op == "++" else -1)
        assert 1 <= values[var] <= 10

    for statement in text[: -len("END")].split(";")[:-1]:
        words = statement.split()
        if words[0] == "print":
            printed.append(read(words[1]))
        elif words[0] == "if":
            _, a, op, b, colon, var, change = words
            assert colon == ":"
            left, right = read(a), (int(b) if b.isdigit() else read(b))
            assert b != a
            # the nested step must be legal on both paths
            assert 1 <= read(var) + (1 if change == "++" else -1) <= 10
            if {"<": left < right, ">": left > right, "==": left == right}[op]:
                step(var, change)
        elif words[1] == "=":
            assert words[0] not in values, f"{words[0]} initialised twice"
            values[words[0]] = int(words[2])
            assert 1 <= values[words[0]] <= 10
        else:
            step(*words)
    return printed


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n_vars=st.integers(1, 5), program_length=st.integers(1, 60))
def test_algorithmic_programs_match_an_interpreter(seed, n_vars, program_length):
    task = AlgorithmicTask(n_vars, program_length)
    episodes = task.generate(np.random.default_rng(seed), 6, "train")
    for inputs, targets in episodes_of(episodes):
        names = [task.input_tokens[i] for i in inputs]
        text = " ".join(names)
        assert text.count(";") == program_length and names.count("END") == 1
        printed = run_program(text)
        scored = targets != IGNORE
        assert [int(task.output_tokens[t]) for t in targets[scored]] == printed
        assert all(names[i - 1] == "print" for i in np.flatnonzero(scored))  # the target sits on the printed variable


def test_algorithmic_uses_every_statement_kind():
    task = AlgorithmicTask(3, 100)
    text = " ".join(task.input_tokens[i] for i in task.generate(np.random.default_rng(0), 20, "train").inputs)
    for word in ("=", "++", "--", "print", "if", "<", ">", "=="):
        assert f" {word} " in f" {text} "


@pytest.mark.parametrize("n_vars", [0, 6])
def test_algorithmic_rejects_bad_variable_counts(n_vars):
    with pytest.raises(ValueError, match=rf"n_vars must be in 1 \.\. 5, got {n_vars}"):
        AlgorithmicTask(n_vars)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), problem=st.sampled_from(["adding", "multiplication", "xor"]), length=st.integers(6, 300), variable=st.booleans())
def test_long_term_targets_and_markers(seed, problem, length, variable):
    task = LongTermTask(problem, length, variable)
    sequences = task.generate(np.random.default_rng(seed), 10, "train")
    longest = math.ceil(1.1 * length) if variable else length
    for k, (a, b) in enumerate(zip(sequences.offsets[:-1], sequences.offsets[1:])):
        values, marker = sequences.inputs[a:b, 0], sequences.inputs[a:b, 1]
        n = b - a
        assert length <= n <= longest
        assert marker[0] == marker[-1] == -1 and set(np.unique(marker)) <= {-1, 0, 1}
        marked = np.flatnonzero(marker == 1)
        assert len(marked) == 2 and (marker == -1).sum() == 2
        assert 1 <= marked.min() <= 9 and marked.max() < n // 2  # one in the first ten steps, both before the middle
        x, y = values[marked]
        expected = {"adding": 0.5 + (x + y) / 4, "multiplication": x * y, "xor": float(x != y)}[problem]
        assert sequences.targets[k] == approx32(expected, terms=3)  # float32 targets vs float32 inputs: 3 roundings
        if problem == "adding":
            assert -1 <= values.min() and values.max() <= 1
        elif problem == "multiplication":
            assert 0 <= values.min() and values.max() <= 1
        else:
            assert set(np.unique(values)) <= {0.0, 1.0}


def test_long_term_mean_targets_match_the_output_bias():
    rng = np.random.default_rng(0)
    for problem in ("adding", "multiplication", "xor"):
        task = LongTermTask(problem, 50)
        assert task.generate(rng, 4000, "train").targets.mean() == pytest.approx(task.mean_target, abs=0.02)


def test_long_term_rejects_bad_settings():
    with pytest.raises(ValueError, match="unknown long-term problem 'sum'"):
        LongTermTask("sum")
    with pytest.raises(ValueError, match="seq_length must be >= 6.*got 5"):
        LongTermTask("adding", 5)
