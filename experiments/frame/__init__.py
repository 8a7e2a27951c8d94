"""The frame every experiment runs in: its flags (flags.py), its jobs run in parallel and resumed
(jobs.py) on this machine or a Slurm cluster (launch.py, slurm.py) and kept in a ledger to resume
elsewhere (ledger.py), the time it will take
(estimate.py), and what it makes of the runs: IQM and bootstrap intervals (stats.py), learning
curves (curves.py), validation histories (seq_history.py), and the machine it ran on (machine.py).

Imports agents, seqtasks, envs and durable; never an experiment above it.
"""
