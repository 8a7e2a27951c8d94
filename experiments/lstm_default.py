"""Which gate initialisation should the LSTM start from? Both, on five measures, and the rule's answer.

    python -m experiments.lstm_default      # reads assets/mazes/ and assets/memory_length/, writes lstm_default.md and .json there

From 2026-11-27 to 2026-12-06 the LSTM's default was chrono's (`gate_init=chrono`, T_max 100),
decided on the recall task, the corridor and the maze, the water maze unmeasured; these five
measures decided it again. Each side's IQM over its seeds with a 95% stratified-bootstrap
interval (rliable):

- the corridor, the maze, the easy maze and the water maze: evaluation return after 2M frames
  (experiments/mazes.py: A2C at the cpu preset, 100 episodes with sampled actions), from one
  mazes.py JSON per initialisation (INITS: the same command with `--core-opt gate_init=X`);
- the recall task without the clock (experiments/frames_to_solve.py, A2C, `lstm` is PyTorch's
  and `lstm-chrono` chrono's, its T_max twice the episode): each seed's reach, the longest length L it solved with every
  shorter length of the sweep solved too. A seed that solved every length run so far has a reach
  of at least its last one: a lower bound.

The rule: one side is better on a measure when its interval lies wholly above the other's (and
the other holds no lower bound, which could still rise); the default is the side better on more
measures, and a tie keeps PyTorch's, torch's own initialisation. While a lower bound leaves a
measure open and could swing the count, the answer is "undecided".
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from agents.cores.lstm import LSTMConfig
from durable.records import read_record, write_json, write_text
from experiments.frame.flags import results_folder
from experiments.frame.stats import iqm_interval
from experiments.frame.tables import format_interval, markdown_table

INITS = {"pytorch": "lstm_default_pytorch", "chrono": "lstm_default_chrono"}  # mazes.py's output per initialisation
ENVS = ("corridor", "maze", "maze_easy", "water_maze")
RECALL = {"pytorch": "lstm", "chrono": "lstm-chrono"}  # frames_to_solve.py's model per initialisation


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=results_folder("memory_length"), help="where frames_to_solve.json is and the answer goes; "
                        "the mazes' JSON are in the mazes folder beside it (default: assets/memory_length/)")
    args = parser.parse_args(argv)
    measures = {env: env_measure(args.out.parent / "mazes", env) for env in ENVS}
    measures["recall"] = recall_measure(args.out / "frames_to_solve.json")
    for measure in measures.values():
        if measure is not None:
            measure["better"] = better(measure["pytorch"], measure["chrono"])
    answer = decide(measures)
    write_json(args.out / "lstm_default.json", {"rule": __doc__.split("The rule: ")[1].strip(), "default_now": LSTMConfig.gate_init,
                                                 "answer": answer, "measures": measures}, indent=1)
    table = answer_table(measures, answer)
    write_text(args.out / "lstm_default.md", table)
    print(table)


def env_measure(mazes: Path, env: str) -> dict | None:
    """{init: {"iqm", "ci_low", "ci_high", "per_seed", "lower_bound": False}} of `env`'s
    evaluation return, or None until both initialisations' JSON have it."""
    sides = {}
    for init, stem in INITS.items():
        summary = read_record(mazes / f"{stem}.json")
        row = None if summary is None else summary["envs"].get(env, {}).get("cores", {}).get("lstm")
        if row is None:
            return None
        sides[init] = {**row["eval_return"], "per_seed": [run["eval"]["return"] for run in row["per_seed"]], "lower_bound": False,
                       "source": f"{stem}.json"}
    return sides


def recall_measure(path: Path) -> dict | None:
    """Each seed's reach on the recall task, per initialisation, or None until the sweep has both models."""
    sweep = read_record(path)
    if sweep is None or not all(model in sweep["models"] for model in RECALL.values()):
        return None
    sides = {}
    for init, model in RECALL.items():
        reaches, open_ = seed_reaches(sweep["models"][model]["lengths"])
        sides[init] = {**iqm_interval({"reach": np.array(reaches, dtype=float)})["reach"], "per_seed": reaches, "lower_bound": any(open_),
                       "source": f"{path.name}, {model}"}
    return sides


def seed_reaches(lengths: dict[str, dict]) -> tuple[list[int], list[bool]]:
    """(reach, still open) per seed from a frames-to-solve model's cells: the longest length the
    seed solved with every shorter one solved too (0 when it failed the first), and whether it
    solved every length run, so that a longer one may yet add to it."""
    seeds = sorted({run["seed"] for cell in lengths.values() for run in cell["per_seed"]})
    reaches, open_ = [], []
    for seed in seeds:
        reach, failed = 0, False
        for length in sorted(lengths, key=int):
            run = next((run for run in lengths[length]["per_seed"] if run["seed"] == seed), None)
            if run is None or not run["solved"]:
                failed = run is not None
                break
            reach = int(length)
        reaches.append(reach)
        open_.append(not failed)
    return reaches, open_


def better(pytorch: dict, chrono: dict) -> str:
    """"pytorch", "chrono", "tie", or "open": a side is better when its interval lies wholly above
    the other's and the other's is no lower bound; "open" when only a rising lower bound could
    still decide it."""
    for side, this, other in (("pytorch", pytorch, chrono), ("chrono", chrono, pytorch)):
        if this["ci_low"] > other["ci_high"] and not other["lower_bound"]:
            return side
    return "open" if pytorch["lower_bound"] or chrono["lower_bound"] else "tie"


def decide(measures: dict[str, dict | None]) -> dict:
    """The rule (the module's docstring) on the measures run: each side's wins, and the answer."""
    verdicts = [measure["better"] if measure is not None else "not run" for measure in measures.values()]
    wins = {side: verdicts.count(side) for side in ("pytorch", "chrono")}
    unknown = verdicts.count("open") + verdicts.count("not run")
    if wins["chrono"] > wins["pytorch"] + unknown:  # more, even were every open measure PyTorch's
        choice = "chrono"
    elif wins["pytorch"] >= wins["chrono"] + unknown:  # as many or more, even were every open one chrono's: a tie keeps PyTorch's
        choice = "pytorch"
    else:
        choice = "undecided"
    return {"wins": wins, "open_or_not_run": unknown, "choice": choice}


def answer_table(measures: dict[str, dict | None], answer: dict) -> str:
    rows = []
    for name, measure in measures.items():
        if measure is None:
            rows.append([name, "not run", "not run", "not run"])
            continue
        digits = 0 if name == "recall" else 2  # a length, a return
        rows.append([name, *(side_text(measure[init], digits) for init in ("pytorch", "chrono")), measure["better"]])
    wins = answer["wins"]
    caption = ("The LSTM's gate initialisation: PyTorch's against chrono's (T_max 100 on the four envs, twice the episode on the recall task, "
               "as frames_to_solve.py's lstm-chrono builds it). Corridor (16 cells), maze, easy maze, water maze: evaluation return "
               f"after 2M frames, A2C ({', '.join(f'{stem}.json' for stem in INITS.values())}); recall: each seed's reach, the longest L "
               "solved with every shorter one (frames_to_solve.json, A2C, no clock; >= a lower bound while the seed has solved every "
               "length run). IQM [95% CI], then each seed. Better: the side whose interval lies wholly above the other's.")
    footer = (f"\nBetter on: PyTorch's {wins['pytorch']}, chrono's {wins['chrono']}, open or not run {answer['open_or_not_run']}. "
              f"The rule's answer: {answer['choice']} (a tie keeps PyTorch's); the default now: {LSTMConfig.gate_init}.\n")
    return markdown_table(["measure", "PyTorch's", "chrono's", "better"], rows, caption) + footer


def side_text(side: dict, digits: int) -> str:
    bound = ">= " if side["lower_bound"] else ""
    seeds = ", ".join(f"{value:.{digits}f}" for value in side["per_seed"])
    return f"{bound}{format_interval(side, digits)} ({seeds})"


if __name__ == "__main__":
    main()
