#!/usr/bin/env bash
# One long training across nodes: torchrun on every node of a Slurm allocation, one rendezvous.
#
#   sbatch --nodes=2 --ntasks-per-node=1 --cpus-per-task=16 --gpus-per-node=4 --time=24:00:00 \
#       --export=ALL,NPROC_PER_NODE=4 scripts/slurm_torchrun.sh --env maze --core feedback --preset paper --run-dir runs/maze-paper
#
# srun starts one task per node (--ntasks-per-node=1), and each runs torchrun with NPROC_PER_NODE
# processes (default 1; one per GPU), meeting the others at the first node of the allocation
# (c10d rendezvous, port RDZV_PORT, default 29500). The arguments are train_a2c.py's; `--num-envs`
# is the total over all processes. Stopped by its time limit or scancel, the run keeps its last
# periodic checkpoint (--save-every): submit the same script again with `--resume RUN_DIR`.
# PYTHON names the interpreter (default: python). docs/cluster.md has the rest.
set -euo pipefail
head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
exec srun --kill-on-bad-exit=1 "${PYTHON:-python}" -m torch.distributed.run \
    --nnodes "$SLURM_JOB_NUM_NODES" --nproc-per-node "${NPROC_PER_NODE:-1}" \
    --rdzv-backend c10d --rdzv-endpoint "$head_node:${RDZV_PORT:-29500}" --rdzv-id "$SLURM_JOB_ID" \
    train_a2c.py "$@"
