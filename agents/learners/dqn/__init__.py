"""The off-policy learner: a recurrent DQN with sequence replay, on the same policy and cores.

- sequences.py: acting's steps cut into whole episodes, or into fixed-length segments with the
  core state at their start (R2D2), as numpy arrays;
- replay.py: the buffer of those sequences (compact observations, capacity in transitions, its
  memory checked before training, saved as .npz beside the checkpoint);
- targets.py: n-step targets and double DQN's bootstrap values;
- epsilon.py: the exploration schedules; target_network.py: Polyak averaging or a copy;
- acting.py: epsilon-greedy acting through the trainers' Actor;
- trainer.py: the loop (agents/learners/train.py's Trainer with its update, checkpoint and resume).

The Q head is the policy's action head: Q(h_t, .) stands where the logits stand
(agents/model/policy.py), so greedy acting, the solve check, evaluate.py --greedy and play take a
DQN checkpoint unchanged; the critic head is not trained.
"""
