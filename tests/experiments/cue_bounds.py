"""Where the corridor's cue separation (experiments/cue_memory.py) tells memory from none.

Without memory the core's outputs at the doors are the same numbers for either cue up to float32
rounding: measured 4e-8 to 9e-8 (an MLP, a span-1 Transformer out of reach; seeds 0-3), under one
epsilon (1.2e-7). With memory they differ by the share of the cue the core carries: 0.028 to 0.19
for fresh LSTM, Transformer and Feedback policies (seeds 0-3) and 0.14 to 0.22 for span-2
Transformers after the quick experiment's 256 frames. The bounds leave rounding 80 epsilons and
the weakest memory measured a factor of 28, so a core whose memory carried 30 times less than a
fresh LSTM's would still count as memory, and one that carries nothing never does (each test
checks a core without memory against the lower bound, so the measure is shown to see the
difference).
"""

NO_MEMORY_BELOW = 1e-5
MEMORY_ABOVE = 1e-3
