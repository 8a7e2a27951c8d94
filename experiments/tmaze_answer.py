"""The passive T-maze's answer in one table and one figure: the runs each learner solves at each
length, on-policy (A2C, PPO) beside off-policy (DQN, Ni et al.'s learner) and beside Ni et al.'s
own budgets and result.

    python -m experiments.tmaze_answer          # from the JSON in assets/memory_length/, in seconds

Trains nothing. It reads what the T-maze sweeps wrote (experiments/memory_length.py on the plain
passive T-maze, no env option), a length still under way from its sweep's ledger
(memory_length_answer.curve), as blocks, one per learner and budget:

- A2C and PPO at 200,000 frames a run, L = 2 to 16, every core (PPO's FFM and LRU to 128);
- A2C and PPO at bsuite's 10,000 episodes a run, the span-16 cores, L = 16 to 128;
- DQN (train_dqn.py: whole episodes replayed, epsilon falling to 1/(L + 1)) stopped when solved,
  capped at 400,000 frames a run, L = 32 and on.

The budgets differ between blocks, so a row says how far its learner got at its budget, not a
race between learners; each block's budget is in the table. Ni et al.'s budget at each length
(experiments/memory_length.py: ni_frames) is a row of its own, and their result (a GPT-2 over the
whole episode with DQN solves L = 1,500) is marked in the figure. Writes OUT/tmaze_answer.json,
.md and .png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from agents.plot_curves import save_figure, style_axes
from durable.records import write_json, write_text
from experiments.frame.flags import results_folder
from experiments.frame.tables import markdown_table
from experiments.memory_length import NI_TRANSFORMER_SOLVES, ni_frames
from experiments.memory_length_answer import answer, solved_text

NAME = "tmaze_answer"
# Each block: its learner, its budget in words, and the sweeps (file stems in OUT) it reads.
BLOCKS = {
    "a2c_200k": ("A2C", "200,000 frames", ["memory_length_tmaze_episode", "memory_length_tmaze_episode_linear"]),
    "a2c_bsuite": ("A2C", "10,000 episodes", ["memory_length_headline"]),
    "ppo_200k": ("PPO", "200,000 frames", ["memory_length_tmaze_episode_ppo", "memory_length_tmaze_episode_linear_ppo"]),
    "ppo_bsuite": ("PPO", "10,000 episodes", ["memory_length_headline_ppo"]),
    "dqn": ("DQN", "stopped when solved, at most 400,000 frames", ["memory_length_tmaze_dqn"]),
}


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=results_folder("memory_length"),
                        help="where the sweeps' JSON is and the results go (default: assets/memory_length/)")
    return parser


def tmaze_answer(out: Path, blocks_read: dict[str, tuple[str, str, list[str]]] = BLOCKS) -> dict:
    """Every block's models (`blocks_read`, shaped as BLOCKS): runs solved at each length (Wilson
    interval where the length is done, the count so far where it is under way) and the longest
    length most seeds solve."""
    found = answer(out, {key: {"sweeps": stems, "longer": [], "probes": []} for key, (_, _, stems) in blocks_read.items()})
    blocks = {}
    for key, (learner, budget, stems) in blocks_read.items():
        models = found["learners"][key]["models"]
        blocks[key] = {"learner": learner, "budget": budget, "sweeps": stems,
                       "models": {model: {"solved": entry["solved"], "reaches": entry["reaches"], "stopped": entry["stopped"]}
                                  for model, entry in models.items()}}
    lengths = sorted({int(length) for block in blocks.values() for model in block["models"].values() for length in model["solved"]})
    return {"command": "python -m experiments.tmaze_answer", "lengths": lengths, "blocks": blocks,
            "ni": {"budget_frames": {str(length): ni_frames(length) for length in lengths}, "transformer_solves": NI_TRANSFORMER_SOLVES}}


def reach_text(entry: dict) -> str:
    """The longest length most seeds solve ("none"), with "going on" while a longer one is under
    way; "under way" for a model none of whose lengths is finished yet."""
    under_way = any(cell.get("under_way") for cell in entry["solved"].values())
    if entry["reaches"] is None and under_way:
        return "under way"
    return f"{entry['reaches'] or 'none'}{', going on' if under_way else ''}"


def table(result: dict) -> str:
    lengths = result["lengths"]
    rows = [[block["learner"], block["budget"], model, *(solved_text(entry["solved"].get(str(length)), str(length) in entry["stopped"])
                                                          for length in lengths), reach_text(entry)]
            for block in result["blocks"].values() for model, entry in block["models"].items()]
    rows.append(["DQN (Ni et al.)", "their budget a run", "GPT-2 over the episode",
                 *(f"{result['ni']['budget_frames'][str(length)] / 1e6:g}M steps" for length in lengths),
                 f"{result['ni']['transformer_solves']:,} (their paper)"])
    return markdown_table(
        ["learner", "budget a run", "model", *(f"L {length}" for length in lengths), "longest L most seeds solve"], rows,
        "The passive T-maze (the goal side shown at the first step only, exactly L + 1 steps), runs solved at each length "
        "(greedy success >= 0.95 on 100 episodes): A2C and PPO at two budgets, DQN stopped when solved; seeds per length as in "
        "each sweep's table (3 or 5). \"n of m so far\": a length under way; stop: not run, the model's sweep having stopped "
        "after two lengths no seed solved; -: not run. The last row is Ni et al.'s budget at each length, not a result of ours.")


def draw(result: dict, out: Path) -> None:
    """One panel per learner: the share of runs that solve each length (finished lengths; a length
    under way hollow, its runs so far), a colour per model in every panel, a line style per
    budget, models side by side at each length; Ni et al.'s L = 1,500 marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    blocks = result["blocks"].values()
    learners = list(dict.fromkeys(block["learner"] for block in blocks))
    names = list(dict.fromkeys(model for block in blocks for model in block["models"]))
    colours = {name: plt.get_cmap("tab20")(i % 20) for i, name in enumerate(names)}
    styles = {budget: style for budget, style in zip(dict.fromkeys(block["budget"] for block in blocks), ["-", "--", ":", "-."])}
    offsets = dict(zip(names, np.linspace(-0.12, 0.12, len(names))))
    figure, panels = plt.subplots(1, len(learners), figsize=(4.6 * len(learners) + 2.6, 4.2), dpi=100, sharey=True)
    ticks = [*result["lengths"], result["ni"]["transformer_solves"]]
    for axes, learner in zip(panels, learners):
        for block in (block for block in blocks if block["learner"] == learner):
            for model, entry in block["models"].items():
                shift = 2 ** offsets[model]  # side by side at each length
                done = [(int(length) * shift, cell["solved"] / cell["runs"]) for length, cell in entry["solved"].items()
                        if not cell.get("under_way")]
                if done:
                    axes.plot(*zip(*done), marker="o", markersize=4, linewidth=1.3, linestyle=styles[block["budget"]], color=colours[model])
                for length, cell in entry["solved"].items():
                    if cell.get("under_way"):
                        axes.plot([int(length) * shift], [cell["solved"] / cell["runs"]], marker="o", markerfacecolor="none",
                                  color=colours[model])
        axes.plot([result["ni"]["transformer_solves"]], [1.0], marker="*", markersize=12, color="black", linestyle="none")
        axes.set_xscale("log", base=2)
        axes.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
        axes.minorticks_off()
        axes.set_ylim(-0.03, 1.05)
        axes.set_title(learner, loc="left", fontsize=10)
        axes.set_xlabel("T-maze length L")
        style_axes(axes)
    panels[0].set_ylabel("share of runs that solve L")
    handles = [Line2D([], [], color=colours[name], marker="o", markersize=4, label=name) for name in names]
    handles += [Line2D([], [], color="gray", linestyle=style, label=budget) for budget, style in styles.items()]
    handles += [Line2D([], [], color="gray", marker="o", markerfacecolor="none", linestyle="none", label="a length under way: its runs so far"),
                Line2D([], [], color="black", marker="*", markersize=10, linestyle="none",
                       label=f"Ni et al.: GPT-2 over the episode, DQN, solves {result['ni']['transformer_solves']:,}")]
    save_figure(figure, panels[-1], out, handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    result = tmaze_answer(args.out)
    write_json(args.out / f"{NAME}.json", result, indent=1)
    write_text(args.out / f"{NAME}.md", table(result))
    draw(result, args.out / f"{NAME}.png")
    print(table(result))


if __name__ == "__main__":
    main()
