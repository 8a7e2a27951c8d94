"""The Feedback Transformer core (Fan et al. 2020), one file a job: the core and when each path runs
(core.py), the plain-autograd reference every fast path is tested against (reference.py), a step
and its backward by hand in Python (step.py), and the same in C++ (csrc/feedback_step.cpp, built
at first use by compiled.py).
"""
