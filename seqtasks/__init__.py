"""Supervised sequence toy tasks on the memory cores of agents/cores.

The tasks of the Feedback Transformer paper (copy, reverse, counting, random walk, algorithmic)
and the long-term memory problems of Raffel & Ellis (adding, multiplication, XOR), generated
here from a seed; every core with a token embedding and an output head, and the feed-forward
attention models. `python -m seqtasks` trains one model on one task; the experiments that compare
them (Table 1's claim, feed-forward attention on long sequences, reservoirs, persistent memory)
are in experiments/.

  tasks/       the generators, one file per task family
  data.py      episodes as flat arrays plus offsets; splits.py: disjoint train/valid/test
  models.py    core + embedding + head; ffattn.py: feed-forward attention
  streams.py   token tasks as one stream in BPTT blocks; sequences.py: per-sequence batches
  metrics.py   accuracies; config.py: the hyperparameters; train.py: the loop and checkpoints
"""
