"""Experiments: each a module run as `python -m experiments.NAME`, many training runs in parallel
processes, evaluated, aggregated over seeds (interquartile mean and stratified-bootstrap
confidence intervals, rliable) and written to assets/ as JSON (raw per-seed numbers included), a
markdown table and figures. An interrupted experiment resumes where it stopped when run again.

    jobs.py           running training / evaluation commands in parallel, resumable, one progress bar
    stats.py          IQM and bootstrap confidence intervals over seeds
    curves.py         learning curves from TensorBoard, on a common frame grid, and their figure
    estimate.py       the expected training time on this machine, printed before an experiment starts
    cli.py            list flags whose values must differ (each names runs of its own)
    cue_memory.py     how much of the corridor's cue a core still holds at the doors
    mazes.py          the mazes (Figures 4 and 6 of the paper) at a CPU budget
    corridor_span.py  the corridor against the attention span (Figure 3)
    head_init.py      how the actor and critic heads start, and what it does to learning
    memory_length.py  how far back each core remembers: success against the T-maze's length, each run's reading
    window_cost.py    what a gradient window that follows the episode costs: time to solve against fixed and aligned
    ppo_peers.py      our PPO beside sb3-contrib's RecurrentPPO and CleanRL's ppo_trxl, same task and settings
    peer_envs.py      MiniGrid Memory as ppo_trxl's recipe sees it, as symbols, for every agent
    peer_sb3.py       one RecurrentPPO run, logged as ours are
    peer_cleanrl.py   one ppo_trxl.py run, from its checkout, in its own environment
"""
