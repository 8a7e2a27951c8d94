#!/usr/bin/env bash
# CleanRL's ppo_trxl.py beside this repository, in its own Python environment, for
# experiments/ppo_peers.py: a checkout at the commit the experiment was run with, and a virtual
# environment with the versions its lock file (cleanrl/ppo_trxl/uv.lock) pins. Nothing of it
# enters this repository (CleanRL is MIT; we run it, we do not copy it).
#
#   scripts/cleanrl_peer.sh [DIR]        # default ../cleanrl-peer; then
#   python -m experiments.ppo_peers --cleanrl DIR
#
# CLEANRL_SOURCE: where to clone from (default GitHub); TORCH: the torch requirement (default
# torch; e.g. torch==2.13.0 for a local CPU wheel).
set -euo pipefail
DIR=${1:-../cleanrl-peer}
COMMIT=fe8d8a03c41a7ef5b523e2e354bd01c363e786bb  # vwxyzjn/cleanrl master, 2026-04-20
SOURCE=${CLEANRL_SOURCE:-https://github.com/vwxyzjn/cleanrl}
mkdir -p "$DIR"
[ -d "$DIR/cleanrl/.git" ] || git clone -q "$SOURCE" "$DIR/cleanrl"
git -C "$DIR/cleanrl" checkout -q "$COMMIT"
[ -x "$DIR/venv/bin/python" ] || python3 -m venv "$DIR/venv"
"$DIR/venv/bin/pip" install -q "${TORCH:-torch}"
"$DIR/venv/bin/pip" install -q gymnasium==0.29.0 minigrid==2.5.0 memory-gym==1.0.2 tyro==0.8.14 einops==0.7.0 \
    tensorboard pygame==2.4.0 "numpy<2.3"
echo "CleanRL's ppo_trxl.py and its Python are in $DIR: python -m experiments.ppo_peers --cleanrl $DIR"
