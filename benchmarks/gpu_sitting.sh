#!/usr/bin/env bash
# The GPU's checks and measurements (issue 49; docs/speed.md, "On a GPU") in one sitting, under
# ten minutes on one H100 or H200:
#
#   benchmarks/gpu_sitting.sh OUT
#
# 1. tests/test_cuda.py: every core on the GPU against itself on the CPU, the trainers learning
#    there, and acting through the captured CUDA graph (--cuda-graph) equal to acting without it
#    (about a minute);
# 2. benchmarks/a2c.py at the paper's sizes (maze, B = 64, T = 100, d_model 256, span 200), in one
#    run, interleaved: Feedback at its default learner (the kept acting graph), Feedback and the
#    LSTM acting through a CUDA graph (rows CORE+graph: the recompute learner), the Transformer and
#    the LSTM at their defaults (about five minutes);
# 3. benchmarks/ppo_learners.py: PPO's Feedback agent with each learner, recompute and cached
#    memory, acting through a CUDA graph (about a minute).
# Logs and the table go to OUT. A machine without gymnasium needs its wheels carried
# (docs/speed.md, "On a GPU", says which and how).
set -euo pipefail
OUT=$(realpath -m "${1:?OUT}")
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1 || true
python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tee "$OUT/test_cuda.txt"
python3 benchmarks/a2c.py --device cuda --cores feedback transformer lstm --graphed feedback lstm --actors 0 \
    --no-learner-comparison --seconds 24 --rounds 3 --markdown "$OUT/a2c_paper_gpu.md" 2>&1 | tee "$OUT/a2c_paper_gpu.txt"
python3 benchmarks/ppo_learners.py --device cuda --graphed --threads 0 2>&1 | tee "$OUT/ppo_learners_gpu.txt"
echo "logs in $OUT"
