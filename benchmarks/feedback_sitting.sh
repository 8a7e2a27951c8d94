#!/usr/bin/env bash
# The Feedback core's speed goals (docs/speed.md, "The goals in one sitting"), measured one after
# another on an otherwise idle machine, one torch thread, each log kept:
#
#   benchmarks/feedback_sitting.sh LOGS AUTHORS BASE CLEANRL
#
# LOGS     a folder for the logs (made); the PPO comparison's JSON, tables and figures go to
#          assets/ppo_peers_speed_{long,short}.*
# AUTHORS  a checkout of facebookresearch/transformer-sequential OUTSIDE this repository
#          (CC BY-NC 4.0: none of it may enter it; benchmarks/authors.py imports it at run time)
# BASE     a checkout of this repository at e946a57 (`git worktree add --detach BASE e946a57`),
#          the commit before the mixed-precision work, for the Table 9 A/B
# CLEANRL  CleanRL's checkout and environment (scripts/cleanrl_peer.sh CLEANRL)
#
# In order: the compiled step against the fused step and the LSTM; A2C end to end, every core,
# then the Feedback core with the Python fused step; seqtasks against the authors' code; the
# Table 9 A/B against BASE in one process (compiled, then this tree's Python step); PPO's
# Feedback agent against ppo_trxl, 3 seeds each, at MemoryS9's 96-step episodes and at 24-step
# ones. About 45 minutes on a 2-core machine.
set -euo pipefail
LOGS=$(realpath -m "${1:?LOGS}"); AUTHORS=$(realpath "${2:?AUTHORS}"); BASE=$(realpath "${3:?BASE}"); CLEANRL=$(realpath "${4:?CLEANRL}")
cd "$(dirname "$0")/.."
mkdir -p "$LOGS"
run() {  # NAME COMMAND...: the command's output into LOGS/NAME.txt, with the load before and after
    local name=$1; shift
    echo "$name: $*"
    { echo "\$ $*"; uptime; "$@"; uptime; } > "$LOGS/$name.txt" 2>&1
}
run compiled python benchmarks/feedback_compiled.py --threads 1 --seconds 2 --rounds 3
run a2c python benchmarks/a2c.py --sizes cpu --cores feedback transformer lstm mlp --actors 0 --no-learner-comparison \
    --threads 1 --seconds 20 --rounds 2
FEEDBACK_RL_COMPILED=0 run a2c_fused python benchmarks/a2c.py --sizes cpu --cores feedback lstm --actors 0 \
    --no-learner-comparison --threads 1 --seconds 20 --rounds 2
run seqtasks_authors python benchmarks/seqtasks.py --cores feedback transformer --authors "$AUTHORS" --seconds 20 --threads 1
run table9_against_base python benchmarks/seqtasks_against.py "$BASE" --rounds 10
FEEDBACK_RL_COMPILED=0 run table9_fused_against_base python benchmarks/seqtasks_against.py "$BASE" --rounds 10
for episodes in long short; do
    env=experiments.peer_envs:SymbolicMemoryS9-v0
    [ "$episodes" = short ] && env=experiments.peer_envs:SymbolicMemoryS9Short-v0
    run "ppo_$episodes" python -m experiments.ppo_peers --cleanrl "$CLEANRL" --agents feedback cleanrl_trxl --env "$env" \
        --frames 40960 --no-estimate --name "ppo_peers_speed_$episodes" --runs-dir "$LOGS/ppo_runs_$episodes"
done
echo "logs in $LOGS"
