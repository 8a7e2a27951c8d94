#!/usr/bin/env bash
# The Feedback core's speed goals (docs/speed.md, "The goals in one sitting"), measured one after
# another on an otherwise idle machine, one torch thread, each log kept:
#
#   benchmarks/feedback_sitting.sh LOGS AUTHORS CLEANRL [TAG]
#
# LOGS     a folder for the logs (made); the PPO comparison's JSON, tables and figures go to
#          assets/ppo_peers/ppo_peers_speed_{long,short}[_TAG].*
# AUTHORS  a checkout of facebookresearch/transformer-sequential OUTSIDE this repository
#          (CC BY-NC 4.0: none of it may enter it; benchmarks/authors.py imports it at run time)
# CLEANRL  CleanRL's checkout and environment (scripts/cleanrl_peer.sh CLEANRL)
# TAG      names this sitting's PPO results beside an earlier sitting's (e.g. the machine: xeon)
#
# In order: the compiled step against the fused step and the LSTM, with its profile, the
# attention's roofline and acting's split; A2C end to end, every core; seqtasks against the
# authors' code; the learning pass per step at a window of 1,024 against 32; PPO's Feedback agent,
# with its default learner and with --learner cached_memory (the agent feedback_cached), against
# ppo_trxl, 3 seeds each, at MemoryS9's 96-step episodes and at 24-step ones. About 30 minutes on
# a 2-core machine.
set -euo pipefail
LOGS=$(realpath -m "${1:?LOGS}"); AUTHORS=$(realpath "${2:?AUTHORS}"); CLEANRL=$(realpath "${3:?CLEANRL}"); TAG=${4:+_$4}
cd "$(dirname "$0")/.."
mkdir -p "$LOGS"
run() {  # NAME COMMAND...: the command's output into LOGS/NAME.txt, with the load before and after
    local name=$1; shift
    echo "$name: $*"
    { echo "\$ $*"; uptime; "$@"; uptime; } > "$LOGS/$name.txt" 2>&1
}
run compiled python benchmarks/feedback_compiled.py --threads 1 --seconds 2 --rounds 3 --profile
run a2c python benchmarks/a2c.py --sizes cpu --cores feedback transformer lstm mlp --actors 0 --no-learner-comparison \
    --threads 1 --seconds 20 --rounds 2
run seqtasks_authors python benchmarks/seqtasks.py --cores feedback transformer --authors "$AUTHORS" --seconds 20 --threads 1
run long_window python benchmarks/long_window.py --rounds 3
for episodes in long short; do
    env=experiments.peer_envs:SymbolicMemoryS9-v0
    [ "$episodes" = short ] && env=experiments.peer_envs:SymbolicMemoryS9Short-v0
    run "ppo_$episodes" python -m experiments.ppo_peers --cleanrl "$CLEANRL" --agents feedback feedback_cached cleanrl_trxl --env "$env" \
        --frames 40960 --no-estimate --name "ppo_peers_speed_$episodes$TAG" --runs-dir "$LOGS/ppo_runs_$episodes"
done
echo "logs in $LOGS"
