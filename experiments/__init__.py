"""Experiments: each a module run as `python -m experiments.NAME`, many training runs in parallel
processes, evaluated, aggregated over seeds (interquartile mean and stratified-bootstrap
confidence intervals, rliable) and written to its folder of assets/ (assets/EXPERIMENT/) as JSON
(raw per-seed numbers included), a markdown table and figures. An interrupted experiment resumes
where it stopped when run again. Every module is listed here (tests/experiments/test_index.py checks it).

Runners, reinforcement learning (train_a2c.py / train_ppo.py runs):

    corridor_span.py        the corridor against the attention span (Figure 3)
    feedback_forgetting.py  why training erases the small-span Feedback core's memory of the cue, and what keeps it
    head_init.py            how the actor and critic heads start, and what it does to learning
    mazes.py                the mazes (Figures 4 and 6 of the paper) at a CPU budget
    memory_length.py        how far back each core remembers: success against the T-maze's (or bsuite's recall task's) length, each run's reading
    cliff_budget.py         whether more frames move a memory length cliff: each model's first failing length run again, longer
    window_cost.py          what a gradient window that follows the episode costs: time to solve against fixed and aligned
    ppo_peers.py            our PPO beside sb3-contrib's RecurrentPPO and CleanRL's ppo_trxl, same task and settings
    tune.py                 settings searched with Optuna at one budget per core, the best re-run on fresh seeds beside the preset

Runners, supervised (python -m seqtasks runs):

    long_sequences.py       Raffel & Ellis's long-term problems: feed-forward attention against the unweighted mean
    memory_reach.py         Table 1 of the paper at CPU scale: memory a Transformer cannot reach and a Feedback one can
    seq_variants.py         model variants over wall-clock time: Reservoir Transformers, all-attention layers
    ffattn_diagnostics.py   why feed-forward attention learned the adding problem slowly: one measurement per hypothesis

Analysers of runs, and the probes they share:

    cue_memory.py           how much of the corridor's cue a core still holds at the doors; the walks the probes take
    maze_memory.py          whether a maze agent goes back to objects it has seen
    memory_growth.py        which weights' training grew a Feedback corridor agent's memory
    tmaze_policy.py         what a T-maze agent does: walks, reaches the junction, turns, turns the right way
    tmaze_answer.py         the T-maze sweeps' answer in one table and figure: runs solved per length, A2C, PPO and DQN, beside Ni et al.'s budgets
    memory_probes.py        what an agent's memory path does on episodes walked to the step that needs the cue
    recall_cliff.py         why recall fails past a length: a memory length sweep's runs probed, fresh and trained
    memory_length_answer.py  the recall sweeps' answer in one table and figure: each core's reach, A2C and PPO, and its cliff's measurements
    frames_to_solve.py      what carrying one bit L steps costs to learn: frames to solve the recall task (no clock), every core
    frames_to_solve_answer.py  the cost curves' answer: longest length solved, its frames, the slope (censored fit), holding at 2L
    past_length.py          a solved recall run tried at L/2, 2L, 4L and 8L, without training
    keep_cue.py             the Feedback memory's ways of keeping the cue, probed fresh: the policies the recall runs start from
    keep_cue_table.py       their table on the memory-length page: probes fresh and trained, recall with A2C and PPO, from the JSON
    lstm_default.py         the LSTM's gate initialisation on five measures (four envs, the recall reach) and the default rule's answer
    memory_trace.py         a corridor training run that probes its agent's memory as it trains

Peers (ppo_peers.py's other side):

    peer_envs.py            MiniGrid Memory as ppo_trxl's recipe sees it, as symbols, for every agent
    peer_sb3.py             one RecurrentPPO run, logged as ours are
    peer_cleanrl.py         one ppo_trxl.py run, from its checkout, in its own environment

The frame below them all (experiments/frame/, which imports no experiment):

    frame/flags.py          the flags every experiment ends with, list flags whose values must differ, --quick's budget
    frame/jobs.py           running training / evaluation commands in parallel, resumable, one progress bar
    frame/preloaded.py      the commands started as forks of one process that has imported torch, not as fresh ones
    frame/launch.py         where the jobs run: here or on Slurm, and the stages every experiment runs
    frame/ledger.py         a sweep's finished runs kept in one committed file, so that it resumes on another machine
    frame/calls.py          the commands of every call whose work a results file holds
    frame/train_flags.py    an experiment's training flags checked by the trainer's own parser before anything is written
    frame/slurm.py          the jobs as Slurm jobs, through submitit
    frame/study.py          an Optuna study kept in its folder, run to a fixed number of trials, resumed after any stop
    frame/estimate.py       the expected training time on this machine, printed before an experiment starts
    frame/stats.py          IQM and bootstrap confidence intervals over seeds, runs solved with their Wilson interval
    frame/tables.py         the markdown tables written beside the JSON, and the cells they share
    frame/curves.py         learning curves from TensorBoard, on a common frame grid, and their figure
    frame/seq_history.py    a seqtasks run's validation history at equal updates or equal time
    frame/analyse.py        the command line of an analyser of finished runs: RUN_DIR ...
    frame/machine.py        what the machine a result came from was
"""
