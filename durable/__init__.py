"""Work that survives a stop: records written whole or not at all (records.py), the stop signals
(Ctrl-C, SIGTERM, Slurm's warning) that end a run without losing what it made (interrupt.py), and
the locks and logs written in place that follow no link (owned_files.py).

The bottom layer: it imports nothing of the project, and envs, agents, seqtasks, experiments and
benchmarks all write through it.
"""
