"""Algorithmic task (Feedback Transformer paper, section 7.4): run small programs, predict prints.

A program is `program_length` statements, then END. Statements, over `n_vars` variables:
  initialisation   x = 3 ;              each variable once, before any other use of it
  step             x ++ ;  x -- ;
  print            print x ;            the only statement with a target: x's value
  conditional      if x < 4 : y -- ;    comparisons <, >, == against a constant or another
                   if x == z : y ++ ;   variable; the nested statement is a step (no print)
Values stay in 1 .. 10: a step (nested or not) is drawn only where it keeps its variable in
range whatever the condition. Each statement's kind is uniform among those possible (no
initialisation once all variables have one, nothing else before the first); variables, values,
comparisons and whether the right side is a variable (when another one is initialised: half the
time) are uniform. The paper's example also nests initialisations in conditionals; here they are
not, so "initialised before use" holds on every path (a project decision).

Each token is one input; the target sits on the variable token of a print, since after reading
`print x` the model must say x's value.

Inputs: the variables, the values "1" .. "10", then = ++ -- print if < > == : ; END.
Outputs: the values "1" .. "10" (class = value - 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqtasks.data import IGNORE, Episodes, offsets_from_lengths

VARIABLE_NAMES = ("x", "y", "z", "u", "v")
LOW, HIGH = 1, 10
SYMBOLS = ("=", "++", "--", "print", "if", "<", ">", "==", ":", ";", "END")
INIT, STEP, PRINT, CONDITIONAL = range(4)
WIDTH = 8  # tokens of the longest statement, `if x < 4 : y -- ;`
PAD = -1


def _pick(rng: np.random.Generator, allowed: np.ndarray) -> np.ndarray:
    """(E, K) bool -> (E,) an allowed column per row, uniformly (0 where none is allowed)."""
    keys = rng.random(allowed.shape)
    keys[~allowed] = -1.0
    return keys.argmax(axis=1)


def _row(*columns) -> np.ndarray:
    """Token columns (scalars or (E,) arrays) -> (E, WIDTH), padded with PAD."""
    columns = np.broadcast_arrays(*columns)
    row = np.stack(columns, axis=1)
    return np.pad(row, ((0, 0), (0, WIDTH - row.shape[1])), constant_values=PAD)


@dataclass(frozen=True)
class AlgorithmicTask:
    n_vars: int = 3
    program_length: int = 100

    kind = "tokens"
    output_tokens = tuple(str(v) for v in range(LOW, HIGH + 1))
    finite = False

    def __post_init__(self):
        if not 1 <= self.n_vars <= len(VARIABLE_NAMES):
            raise ValueError(f"n_vars must be in 1 .. {len(VARIABLE_NAMES)}, got {self.n_vars!r}")

    @property
    def input_tokens(self) -> tuple[str, ...]:
        return VARIABLE_NAMES[: self.n_vars] + self.output_tokens + SYMBOLS

    def generate(self, rng: np.random.Generator, count: int, split: str) -> Episodes:
        n_vars, length = self.n_vars, self.program_length
        token = {name: i for i, name in enumerate(self.input_tokens)}
        value_token = token["1"] - LOW  # + value
        step_token = np.array([token["++"], token["--"]])
        compare_token = np.array([token["<"], token[">"], token["=="]])
        rows = np.arange(count)
        values = np.zeros((count, n_vars), dtype=np.int64)  # 0: not initialised yet
        tokens = np.full((count, length, WIDTH), PAD, dtype=np.int64)
        targets = np.full((count, length, WIDTH), IGNORE, dtype=np.int64)
        for s in range(length):  # vectorised over programs, sequential over statements
            live = values > 0  # (E, V)
            # (E, V * 2): variable v may be incremented (column 2v) or decremented (2v + 1)
            steppable = (live[:, :, None] & np.stack([values < HIGH, values > LOW], axis=-1)).reshape(count, -1)
            any_live = live.any(axis=1)
            kind = _pick(rng, np.stack([~live.all(axis=1), any_live, any_live, any_live], axis=1))

            new_var, new_value = _pick(rng, ~live), rng.integers(LOW, HIGH + 1, count)
            step = _pick(rng, steppable)
            print_var = _pick(rng, live)

            left = _pick(rng, live)
            others = live.copy()
            others[rows, left] = False
            right_is_var = others.any(axis=1) & (rng.random(count) < 0.5)
            right_var, constant = _pick(rng, others), rng.integers(LOW, HIGH + 1, count)
            compare = rng.integers(0, 3, count)
            a, b = values[rows, left], np.where(right_is_var, values[rows, right_var], constant)
            holds = np.choose(compare, [a < b, a > b, a == b])
            nested = _pick(rng, steppable)

            statements = np.stack(
                [
                    _row(new_var, token["="], value_token + new_value, token[";"]),
                    _row(step // 2, step_token[step % 2], token[";"]),
                    _row(token["print"], print_var, token[";"]),
                    _row(
                        token["if"], left, compare_token[compare], np.where(right_is_var, right_var, value_token + constant),
                        token[":"], nested // 2, step_token[nested % 2], token[";"],
                    ),
                ],
                axis=1,
            )  # (E, 4, WIDTH)
            tokens[:, s] = statements[rows, kind]
            printing = kind == PRINT
            targets[printing, s, 1] = values[rows, print_var][printing] - LOW

            initialising, stepping, firing = kind == INIT, kind == STEP, (kind == CONDITIONAL) & holds
            values[rows[initialising], new_var[initialising]] = new_value[initialising]
            values[rows[stepping], step[stepping] // 2] += 1 - 2 * (step[stepping] % 2)
            values[rows[firing], nested[firing] // 2] += 1 - 2 * (nested[firing] % 2)

        end = np.full((count, 1), token["END"])
        tokens = np.concatenate([tokens.reshape(count, -1), end], axis=1)  # (E, S * WIDTH + 1)
        targets = np.concatenate([targets.reshape(count, -1), np.full((count, 1), IGNORE)], axis=1)
        kept = tokens != PAD
        return Episodes(tokens[kept], targets[kept], offsets_from_lengths(kept.sum(axis=1)))
