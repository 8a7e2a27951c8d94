"""Run CleanRL's ppo_trxl.py in a run folder, with CleanRL's own Python environment.

    python -m experiments.peer_cleanrl --python CLEANRL_VENV/bin/python --script CHECKOUT/cleanrl/ppo_trxl/ppo_trxl.py \\
        --run-dir DIR -- --env_id experiments.peer_envs:SymbolicMemoryS9-v0 --seed 1 ...

ppo_trxl.py is MIT-licensed but not ours: it runs from a checkout outside this repository, with
the versions its lock file pins (gymnasium 0.29, minigrid 2.5: under Gymnasium 1.x its episode
bookkeeping overruns, since vector envs there reset one step later), in the environment that
scripts/cleanrl_peer.sh makes. This launcher only puts it in place: it empties RUN_DIR/runs (a
stopped run starts again from zero: ppo_trxl.py has no resume), makes RUN_DIR the working folder
(ppo_trxl.py writes its TensorBoard events to ./runs/NAME), lets that Python import
experiments.peer_envs from this repository (PYTHONPATH), and then becomes ppo_trxl.py (exec), so
a stop signal sent to this process reaches the trainer itself and nothing is left running.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", type=Path, required=True, help="the Python of CleanRL's environment")
    parser.add_argument("--script", type=Path, required=True, help="ppo_trxl.py in a CleanRL checkout")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="ppo_trxl.py's flags, after --")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = make_parser()
    args = parser.parse_args(argv)
    for path, what in ((args.python, "--python"), (args.script, "--script")):
        if not path.is_file():
            parser.error(f"{what} {path}: no such file (scripts/cleanrl_peer.sh makes CleanRL's checkout and environment)")
    flags = args.args[1:] if args.args[:1] == ["--"] else args.args
    shutil.rmtree(args.run_dir / "runs", ignore_errors=True)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    os.chdir(args.run_dir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    python, script = str(args.python.absolute()), str(args.script.resolve())
    os.execve(python, [python, script, *flags], env)


if __name__ == "__main__":
    main()
