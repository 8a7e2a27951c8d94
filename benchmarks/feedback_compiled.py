"""The Feedback core's compiled step against its Python fused step and the LSTM, in one run.

At the A2C CPU preset (B 64 envs, d_model 64, 2 layers, 4 heads, span 64; the LSTM 1 x 128, as
benchmarks/cores.py's feedback-cpu and lstm-cpu rows), for each of

  compiled  the Feedback core with step=compiled (agents/cores/feedback/csrc, built first if needed)
  fused     the same core, same weights, with step=python (the Python fused step)
  lstm      the LSTM core

it times the learning pass (one call of T = 32 steps, the preset's rollout, with gradients, from
a state holding a full span, then the backward of a loss over its outputs) and acting (calls of
T = 1 without gradients, each from the state before), interleaved round by round (A B C, C B A,
...: benchmarks/targets.py) so that a change in the machine's load falls on all of them; the
median round is reported, and ratios come only from this run.

    python benchmarks/feedback_compiled.py --threads 1 --seconds 2 --rounds 3
    python benchmarks/feedback_compiled.py --threads 1 --profile   # then where the learning pass goes
    python benchmarks/feedback_compiled.py --threads 1 --scaling   # then the pass against batch and span
    python benchmarks/feedback_compiled.py --threads 1 --rounds 5 --recall --json assets/speed/feedback_compiled_carry_epyc.json

--profile adds torch.profiler over 5 learning calls of the compiled Feedback core and of the LSTM:
each one's ATen operations by self time per step, and the share of the call outside them (on the
compiled path: its C++ loops, the attention's); the loops against the bandwidth of their
access pattern and against their own rate with the windows in the L2 cache; the pass against the
floor of its parts (step_roofline). Then it splits an acting call (T = 1, no gradients) of the
compiled core into its C++ steps and the Python around them.

--scaling adds the learning pass per step of the compiled core at span 2 and 64 and of the LSTM,
at B = 1, 4, 16 and 64 envs, interleaved: B = 1 is about the cost a step has whatever the batch
(its operations' calls, allocations and Python), and span 64 less span 2 at B 64 the attention's
share of the preset's step (at span 2 its loops read two slots).

--recall adds the learning call of a whole recall episode (L = 64: T = 65 steps, an episode
start at the first, from an empty memory, B 64, the preset's sizes) of the gated carry
(carry=gate), the tanh write (memory_write=tanh, read raw, the orthogonal value path), the kept
slot (keep_slot=True) and the paper's model, each on the compiled step and on the Python one (the
weights they share the same), interleaved, `--rounds` rounds of `--seconds`: the median round, ms a call. --json
writes the run's medians (and --recall's rounds), the command, the machine and the load average
to a file.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.cores.feedback import compiled as feedback_compiled  # noqa: E402

from agents.cores.append_log import HEADROOM  # noqa: E402
from agents.cores import make_core  # noqa: E402
from agents.runtime.freed_memory import keep_freed_memory  # noqa: E402
from durable.records import write_json  # noqa: E402
from experiments.frame.machine import cpu_model  # noqa: E402
from benchmarks.cpp_dispatch import cpp_dispatch_cost  # noqa: E402
from benchmarks.op_replay import l2_cache_bytes, replayed_floor  # noqa: E402
from benchmarks.targets import interleaved, per_call  # noqa: E402

INPUT_DIM, BATCH, LEARN_STEPS = 32, 64, 32
FEEDBACK = dict(d_model=64, n_layers=2, n_heads=4, span=64)
LSTM = dict(hidden_size=128, n_layers=1)
PATHS = ("compiled", "fused", "lstm")
RECALL_LENGTH = 64  # --recall: an episode of L = 64, T = L + 1 steps (the cue, L - 1 steps, the query)
# --recall's cores: name -> options beside FEEDBACK
TANH = dict(memory_write="tanh", read_norm=False, value_init="orthogonal")  # the tanh write as the recall runs train it
RECALL = {"carry, compiled": dict(carry="gate", step="compiled"), "carry, python": dict(carry="gate", step="python"),
          "tanh, compiled": dict(TANH, step="compiled"), "tanh, python": dict(TANH, step="python"),
          "kept, compiled": dict(keep_slot=True, step="compiled"), "kept, python": dict(keep_slot=True, step="python"),
          "paper, compiled": dict(step="compiled"), "paper, python": dict(step="python")}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=2.0, help="per path, mode and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="then profile the learning pass (compiled, LSTM)")
    parser.add_argument("--scaling", action="store_true", help="then the learning pass against batch and span")
    parser.add_argument("--recall", action="store_true", help="then a recall episode's learning call: the carry, the tanh write, the kept slot and the paper's model, each step")
    parser.add_argument("--json", default=None, help="also write the medians, the command and the machine to this file")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    torch.set_num_threads(args.threads)
    kept = keep_freed_memory()  # as trainers do
    began = time.perf_counter()
    if feedback_compiled.extension() is None:  # any build happens here, not inside a timing
        raise SystemExit("the compiled Feedback step is not available here (see the line above); nothing to compare")
    build_s = time.perf_counter() - began
    torch.manual_seed(0)
    cores = {"compiled": make_core("feedback", INPUT_DIM, **FEEDBACK, step="compiled"), "lstm": make_core("lstm", INPUT_DIM, **LSTM)}
    cores["fused"] = make_core("feedback", INPUT_DIM, **FEEDBACK, step="python")
    cores["fused"].load_state_dict(cores["compiled"].state_dict())  # the same weights
    x, first = torch.randn(LEARN_STEPS, BATCH, INPUT_DIM), torch.zeros(LEARN_STEPS, BATCH, dtype=torch.bool)
    states = {name: full_state(core, BATCH) for name, core in cores.items()}

    def learn(core, state):
        learning_call(core, x, state, first)

    def act(core, state):
        with torch.no_grad():
            for t in range(8):
                _, state = core(x[t : t + 1], state, first[t : t + 1])

    times = {(path, mode): [] for path in PATHS for mode in ("learn", "act")}
    for path in interleaved(list(PATHS), args.rounds):
        core, state = cores[path], states[path]
        times[path, "learn"].append(per_call(lambda: learn(core, state), args.seconds) / LEARN_STEPS)
        times[path, "act"].append(per_call(lambda: act(core, state), args.seconds) / 8)
    median = {key: statistics.median(value) for key, value in times.items()}
    print(f"{cpu_model()}, torch {torch.__version__}, {args.threads} thread(s), {args.rounds} interleaved rounds of {args.seconds} s; "
          f"compiled step ready in {build_s:.1f} s (a build, or loading the cached one); freed memory kept: {kept}")
    print("| path | learning pass per step (ms) | acting, T = 1 call (ms) | rounds (learning, ms) |")
    print("|---|---|---|---|")
    for path in PATHS:
        rounds = ", ".join(f"{1e3 * s:.2f}" for s in times[path, "learn"])
        print(f"| {path} | {1e3 * median[path, 'learn']:.2f} | {1e3 * median[path, 'act']:.2f} | {rounds} |")
    for mode in ("learn", "act"):
        print(f"{mode}: compiled / fused time {median['compiled', mode] / median['fused', mode]:.2f}; "
              f"feedback compiled / lstm {median['compiled', mode] / median['lstm', mode]:.2f}; "
              f"feedback fused / lstm {median['fused', mode] / median['lstm', mode]:.2f}")
    if args.profile:
        attention = {}
        for name in ("compiled", "lstm"):
            attention[name] = profile_learning(name, lambda: learn(cores[name], states[name]))
        bandwidth = attention_roofline(attention["compiled"])
        in_cache = BATCH * loops_in_cache()
        print(f"attention loops: {1e3 * attention['compiled']:.3f} ms a step measured; at their rate with the windows in the L2 cache "
              f"(the time each env adds, from B = {LOOPS_IN_CACHE[0]} to {LOOPS_IN_CACHE[1]}) {1e3 * in_cache:.3f} ms: measured / bound "
              f"{attention['compiled'] / in_cache:.2f}")
        loops_bound = max(("bandwidth bound", bandwidth), ("in-cache rate", in_cache), key=lambda bound: bound[1])
        step_roofline(lambda: learn(cores["compiled"], states["compiled"]), median["compiled", "learn"], loops_bound)
        split_acting(cores["compiled"], states["compiled"], x[:1], first[:1])
    if args.scaling:
        learning_scaling(args.rounds, min(args.seconds, 0.5))
    recall = recall_learning_calls(args.rounds, args.seconds) if args.recall else None
    if args.json:
        write_json(args.json, {
            "command": " ".join(["python", "benchmarks/feedback_compiled.py", *(sys.argv[1:] if argv is None else argv)]),
            "machine": f"{cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__}, {args.threads} thread(s)",
            "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()), "rounds": args.rounds, "seconds": args.seconds,
            "ms": {f"{path} {mode}": 1e3 * median[path, mode] for path in PATHS for mode in ("learn", "act")},  # (learn: per step; act: per call)
            "recall": recall,
        }, indent=1)


def full_state(core, batch: int):
    """`core`'s state after a span (FEEDBACK's) of random inputs from its initial state, no gradients."""
    span = FEEDBACK["span"]
    with torch.no_grad():
        _, state = core(torch.randn(span, batch, INPUT_DIM), core.initial_state(batch, "cpu"), torch.zeros(span, batch, dtype=torch.bool))
    return state


def learning_call(core, x, state, first) -> None:
    """One learning pass: the call over x (T, B, input) from `state`, then the backward of a loss over its outputs."""
    y, _ = core(x, state, first)
    y.square().sum().backward()


def learning_pass_at(core, batch: int):
    """`core`'s learning pass at `batch` envs, as a function of no arguments: a call of
    LEARN_STEPS steps of fresh random inputs, from a state holding a full span."""
    x, first = torch.randn(LEARN_STEPS, batch, INPUT_DIM), torch.zeros(LEARN_STEPS, batch, dtype=torch.bool)
    return functools.partial(learning_call, core, x, full_state(core, batch), first)


def recall_learning_calls(rounds: int, seconds: float) -> dict:
    """One learning call over a whole recall episode (T = RECALL_LENGTH + 1 steps, an episode
    start at the first, from an empty memory, B = BATCH) of each of RECALL's cores, the same
    weights (the paper's model's are the carry's but its gate; the tanh write's but the gate and
    the read's norm; the kept slot's but its own gate), interleaved round by round; prints
    the median round and the ratios, returns them with every round, in ms a call."""
    torch.manual_seed(0)
    cores = {name: make_core("feedback", INPUT_DIM, **FEEDBACK, **options) for name, options in RECALL.items()}
    weights = cores["carry, compiled"].state_dict()
    for core in cores.values():
        core.load_state_dict({**core.state_dict(), **{k: v for k, v in weights.items() if k in core.state_dict()}})
    steps = RECALL_LENGTH + 1
    x, first = torch.randn(steps, BATCH, INPUT_DIM), torch.zeros(steps, BATCH, dtype=torch.bool)
    first[0] = True
    calls = {name: functools.partial(learning_call, core, x, core.initial_state(BATCH, "cpu"), first) for name, core in cores.items()}
    times = {name: [] for name in cores}
    for name in interleaved(list(cores), rounds):
        times[name].append(1e3 * per_call(calls[name], seconds))
    median = {name: statistics.median(value) for name, value in times.items()}
    print(f"a recall episode's learning call (L = {RECALL_LENGTH}: T = {steps}, B = {BATCH}, from an empty memory), ms a call:")
    print("| core, step | median (ms) | rounds (ms) |")
    print("|---|---|---|")
    for name in cores:
        print(f"| {name} | {median[name]:.0f} | {', '.join(f'{t:.0f}' for t in times[name])} |")
    print(f"carry compiled / carry python {median['carry, compiled'] / median['carry, python']:.2f}; "
          f"carry compiled / paper compiled {median['carry, compiled'] / median['paper, compiled']:.2f}; "
          f"tanh compiled / tanh python {median['tanh, compiled'] / median['tanh, python']:.2f}; "
          f"tanh compiled / paper compiled {median['tanh, compiled'] / median['paper, compiled']:.2f}; "
          f"kept compiled / kept python {median['kept, compiled'] / median['kept, python']:.2f}; "
          f"kept compiled / paper compiled {median['kept, compiled'] / median['paper, compiled']:.2f}")
    return {"steps": steps, "batch": BATCH, "sizes": FEEDBACK, "median_ms": median, "rounds_ms": times}


SCALING_BATCHES = (1, 4, 16, 64)
SCALING_SPANS = (2, 64)


def learning_scaling(rounds: int, seconds: float) -> dict[tuple[str, int], float]:
    """The learning pass per step (T = LEARN_STEPS, from a state holding a full span) of the
    compiled Feedback core at each of SCALING_SPANS and of the LSTM, at each of SCALING_BATCHES,
    interleaved round by round; prints the medians in ms and returns them in seconds, by (model,
    batch)."""
    models = {f"feedback span {span}": make_core("feedback", INPUT_DIM, **{**FEEDBACK, "span": span}, step="compiled") for span in SCALING_SPANS}
    models["lstm"] = make_core("lstm", INPUT_DIM, **LSTM)
    cases = {}
    for name, core in models.items():
        for batch in SCALING_BATCHES:
            cases[name, batch] = learning_pass_at(core, batch)
    times = {case: [] for case in cases}
    for case in interleaved(list(cases), rounds):
        times[case].append(per_call(cases[case], seconds) / LEARN_STEPS)
    median = {case: statistics.median(value) for case, value in times.items()}
    print("learning pass per step (ms) against the batch B:")
    print("| model | " + " | ".join(f"B {batch}" for batch in SCALING_BATCHES) + " |")
    print("|---|" + "---|" * len(SCALING_BATCHES))
    for name in models:
        print(f"| {name} | " + " | ".join(f"{1e3 * median[name, batch]:.3f}" for batch in SCALING_BATCHES) + " |")
    full, last = f"feedback span {SCALING_SPANS[-1]}", SCALING_BATCHES[-1]
    print(f"at B {last}: a step's cost at B 1 {median[full, 1] / median[full, last]:.0%} of the span-{SCALING_SPANS[-1]} step; "
          f"span {SCALING_SPANS[-1]} less span {SCALING_SPANS[0]} {1e3 * (median[full, last] - median[f'feedback span {SCALING_SPANS[0]}', last]):.3f} ms "
          f"({1 - median[f'feedback span {SCALING_SPANS[0]}', last] / median[full, last]:.0%})")
    return median


def profile_learning(name: str, learn) -> float:
    """The ATen operations of `learn` (one learning call of LEARN_STEPS steps) by self time per
    step, and the compiled step's attention loops (feedback::attend, feedback::attend_backward,
    named in the profile by the C++); returns those loops' seconds a step."""
    from torch.profiler import ProfilerActivity, profile

    calls = 5
    wall = per_call(learn, 1.0) / LEARN_STEPS  # a step, without the profiler
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            learn()
    ops = sorted((e for e in prof.key_averages() if e.key.startswith("aten::")), key=lambda e: -e.self_cpu_time_total)
    per_step = lambda us: us / 1e6 / calls / LEARN_STEPS  # noqa: E731  (profiler microseconds -> seconds a step)
    inside = sum(per_step(e.self_cpu_time_total) for e in ops)
    print(f"{name}: {1e3 * wall:.2f} ms a step; under the profiler, ATen operations {1e3 * inside:.2f} ms ({inside / wall:.0%}), "
          f"outside them {1e3 * (wall - inside):.2f} ms ({1 - inside / wall:.0%})")
    for e in ops[:8]:
        print(f"  {e.key:34s} {1e6 * per_step(e.self_cpu_time_total):6.0f} us a step, {e.count / calls / LEARN_STEPS:5.1f} calls a step")
    loops = loop_seconds(prof, calls, LEARN_STEPS)
    for key, seconds in loops.items():
        print(f"  {key:34s} {1e6 * seconds:6.0f} us a step")
    return sum(loops.values())


def loop_seconds(profiled, calls: int, steps: int) -> dict[str, float]:
    """Seconds a step of each of the compiled step's C++ loops (its `feedback::` records, as the
    C++ names them) in a torch.profiler run of `calls` learning calls of `steps` steps each."""
    return {e.key: e.self_cpu_time_total / 1e6 / calls / steps for e in profiled.key_averages() if e.key.startswith("feedback::")}


LOOPS_IN_CACHE = (2, 8)  # batches whose windows lie in the L2 cache (at span 64: 32 and 128 KB a layer's keys)


def loops_in_cache(batches: tuple[int, int] = LOOPS_IN_CACHE, calls: int = 8, repeats: int = 3) -> float:
    """The attention loops' seconds a step per env with the windows in the L2 cache: the time
    each env adds to the loops between a learning call of batches[0] envs and one of batches[1],
    whose windows, gradients and weights' rows all fit in the cache (the difference leaves out
    what a call of the loops costs whatever its batch). Each batch's loops are timed over `calls`
    calls `repeats` times and the least kept, so that another process taking the core for a
    moment does not land in the difference. At B 64 the windows are far out of the L2 cache; if
    the loops there take no more than B times this, bytes are not what bounds them."""
    from torch.profiler import ProfilerActivity, profile

    seconds = []
    for batch in batches:
        torch.manual_seed(0)
        learn = learning_pass_at(make_core("feedback", INPUT_DIM, **FEEDBACK, step="compiled"), batch)
        learn()  # warm
        timed = []
        for _ in range(repeats):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(calls):
                    learn()
            timed.append(sum(loop_seconds(prof, calls, LEARN_STEPS).values()))
        seconds.append(min(timed))
    return (seconds[1] - seconds[0]) / (batches[1] - batches[0])


def attention_roofline(measured: float | None, batch: int = BATCH, heads: int = FEEDBACK["n_heads"], span: int = FEEDBACK["span"],
                       width: int = FEEDBACK["d_model"] // FEEDBACK["n_heads"], layers: int = FEEDBACK["n_layers"],
                       steps: int = LEARN_STEPS) -> float:
    """The attention loops' time a learning step (`measured`, from the profile; None: not
    measured) against the bytes they move over the bandwidth this core gets, measured two ways;
    the sizes are the CPU preset's unless given (`steps`: the learning call's T).

    Each layer's step reads its key and value windows (B H S E each) forward; backward it reads
    them again and reads and writes their gradients (four more): 8 B H S E floats, plus the
    weights' rows (B H S) written and read five times. The first bandwidth is ATen's vectorised
    `c += a` over three contiguous buffers of the size of a layer's windows and gradients (read
    two, write one), which stay in the last-level cache as the windows do. The second is the
    same sum over the windows' own layout: rows of S floats, one per (env, head, element), at the
    buffers' stride of S + T slots, the window a slot further each call (`window_bandwidth`), as
    the loops walk them: the bound for their access pattern, whatever their arithmetic, which is
    returned (seconds a step)."""
    floats = layers * (8 * batch * heads * span * width + 5 * batch * heads * span)
    moved = 4 * floats  # float32
    a, c = torch.randn(4 * batch * heads * span * width), torch.randn(4 * batch * heads * span * width)
    seconds = per_call(lambda: c.add_(a), 1.0)
    said = f"{1e3 * measured:.3f} ms a step measured; " if measured is not None else ""
    for how, bandwidth in ((f"c += a, {3 * 4 * a.numel() / 2**20:.0f} MiB", 3 * 4 * a.numel() / seconds),
                           ("the windows' rows", window_bandwidth(batch, heads, span, width, steps))):
        predicted = moved / bandwidth
        print(f"attention loops: {said}{moved / 1e6:.1f} MB a step over {bandwidth / 1e9:.1f} GB/s ({how}) = {1e3 * predicted:.3f} ms"
              + (f": measured / bound {measured / predicted:.2f}" if measured is not None else ""))
    return predicted


def window_bandwidth(batch: int, heads: int, span: int, width: int, steps: int) -> float:
    """Bytes a second of `gradient window += key window` over buffers laid out as a learning
    call's (B, H, E, S + T) keys and (B, 2, H, E, S + T) gradients, the window [t, t + S) moving a
    slot each call: rows of S floats at a stride of S + T (read two, write one)."""
    slots = span + steps
    keys, grads = torch.randn(batch, heads, width, slots), torch.randn(batch, 2, heads, width, slots)
    step = iter(range(10**12))

    def add():
        t = next(step) % steps
        grads[:, 0, ..., t : t + span].add_(keys[..., t : t + span])

    return 3 * 4 * batch * heads * width * span / per_call(add, 1.0)


PRODUCTS = ("mm", "addmm", "addmm_")
# the step's other ATen operations, grouped as the roofline names them
GROUPS = {"copies": ("copy_", "clone", "contiguous", "stack", "cat", "_to_copy"),
          "layer norms": ("native_layer_norm", "native_layer_norm_backward"),
          "softmax": ("_softmax", "_softmax_backward_data")}


def step_roofline(learn, step_seconds: float, loops_bound: tuple[str, float], steps_per_call: int = LEARN_STEPS, replay_seconds: float = 0.05) -> dict:
    """The learning pass's floor from its parts, against its measured `step_seconds`.

    Every ATen operation of one `learn()` call (`steps_per_call` steps) is replayed alone at its
    shapes (benchmarks/op_replay.py), with Python's dispatch of each replay taken off: the
    products' operations over ATen's rate at their shapes, the rest (copies, layer norms,
    softmax, element-wise operations, allocations, views) each operation's own time. Twice: warm
    (each operation over the same tensors, in the core's caches) and with its data out of the L2
    cache (over copies adding up to 4x it, taken in turn), as a learning call's operations read
    a tape written long before. The attention's C++ loops are no ATen operation; their floor is
    `loops_bound`, (what, seconds a step): the larger of the bytes they move over the bandwidth
    of their access pattern (attention_roofline) and their rate with the windows in the L2 cache
    (loops_in_cache). The call's own dispatch of each operation from C++ is added
    (benchmarks/cpp_dispatch.py, where it builds). Printed by group; returns, per way ("warm", "out of L2"), a step's
    "groups" (seconds each) and "floor" (their sum), and the products' "flops" and "calls".
    `replay_seconds`: each operation's timing, both ways together."""
    ways = {"warm": 0, "out of L2": 4 * l2_cache_bytes()}
    replayed, overhead = replayed_floor(learn, steps_per_call, evict_bytes=list(ways.values()), seconds=replay_seconds)
    operations = replayed[ways["warm"]]  # the same operations, counts and shapes either way
    count = sum(op.per_step for op in operations)
    from_cpp = cpp_dispatch_cost()  # the call's own dispatch of each operation, which the replays' times leave out
    result, groups, rest = {}, {}, collections.Counter()
    for way, evict_bytes in ways.items():
        seconds = groups[way] = collections.Counter()
        for op in replayed[evict_bytes]:
            group = "products" if op.name in PRODUCTS else next((g for g, names in GROUPS.items() if op.name in names), "the rest")
            alone = max(op.seconds - overhead * op.per_step, 0.0)
            seconds[group] += alone
            if group == "the rest" and way == "warm":
                rest[op.name] += alone
        seconds[f"attention loops ({loops_bound[0]})"] = loops_bound[1]
        if from_cpp is not None:
            seconds["C++ dispatch of the operations"] = from_cpp * count
        result[way] = {"groups": dict(seconds), "floor": sum(seconds.values())}
    products = [op for op in operations if op.name in PRODUCTS]
    flops = sum(2 * shapes[-2][0] * shapes[-2][1] * shapes[-1][1] * op.per_step for op in products for shapes in [op.shapes])
    result.update(flops=flops, calls=sum(op.per_step for op in products))
    print(f"products: {result['calls']:.1f} calls a step, {flops / 1e6:.1f} MFLOP; each shape replayed alone at ATen's rate here: "
          + ", ".join(f"{way} {1e3 * groups[way]['products']:.3f} ms a step ({gigaflops(flops, groups[way]['products'])})" for way in ways))
    dispatched = f"dispatched from C++ at {1e9 * from_cpp:.0f} ns each" if from_cpp is not None else "their dispatch from C++ left out (not built)"
    print(f"the learning pass from its parts ({count:.0f} ATen operations a step, each replayed alone less Python's "
          f"{1e6 * overhead:.1f} us dispatch of it and {dispatched}; the attention loops at their bound), ms a step:")
    print(f"  {'':34s} " + " ".join(f"{way:>10s}" for way in ways))
    for group, _ in groups["out of L2"].most_common():
        print(f"  {group:34s} " + " ".join(f"{1e3 * groups[way][group]:10.3f}" for way in ways))
    again = per_call(learn, 2.0) / steps_per_call  # the machine's speed may have moved since the table's rounds
    print(f"  {'in all':34s} " + " ".join(f"{1e3 * result[way]['floor']:10.3f}" for way in ways)
          + f"  against {1e3 * step_seconds:.3f} measured ({1e3 * again:.3f} timed again after the replays): measured / floor "
          + ", ".join(f"{way} {step_seconds / result[way]['floor']:.2f}" for way in ways))
    print("  (the rest, warm: " + ", ".join(f"{name} {1e6 * part:.0f} us" for name, part in rest.most_common(8)) + ")")
    return result


def gigaflops(flops: float, seconds: float) -> str:
    """A rate as the roofline prints it; a replay no slower than its dispatch has no rate to give."""
    return f"{flops / seconds / 1e9:.0f} GFLOP/s" if seconds > 0 else "within the dispatch's time: no rate"


def split_acting(core, state, x, first, calls: int = 640) -> dict[str, float]:
    """Time `calls` acting calls in a row (each from the state the last one left) and, inside
    each, the compiled step's own call (act_steps, the whole call where the state's buffers have
    room, else forward_steps, inside FeedbackRun) and the buffers' room (FeedbackCore._room: a
    check, and every HEADROOM steps the refill, ATen copies of the window into new buffers).
    The rest is the Python
    around them: the call's checks and, on FeedbackRun's path, its setup. Means, and the median
    call's Python, which a pause of the process by the scheduler (milliseconds, on a loaded
    machine) does not move. Printed, and returned in seconds a call: call, steps, refill, python."""
    compiled, inside, refill = feedback_compiled.extension(), [0.0], [0.0]
    originals = {name: getattr(compiled, name) for name in ("act_steps", "forward_steps")}

    def timed(function, into):
        def call(*args, **arguments):
            began = time.perf_counter()
            result = function(*args, **arguments)
            into[0] += time.perf_counter() - began
            return result
        return call

    for name, function in originals.items():  # the core looks them up on the module at each call
        setattr(compiled, name, timed(function, inside))
    core._room = timed(core._room, refill)  # an instance attribute over the method, removed below
    per_call = []
    try:
        with torch.no_grad():
            for _ in range(calls):
                inside[0] = refill[0] = 0.0
                began = time.perf_counter()
                _, state = core(x, state, first)
                per_call.append((time.perf_counter() - began, inside[0], refill[0]))
    finally:
        for name, function in originals.items():
            setattr(compiled, name, function)
        del core._room
    total, steps, copies = (statistics.mean(column) for column in zip(*per_call))
    python = total - steps - copies
    median = statistics.median(call - step - copy for call, step, copy in per_call)
    print(f"feedback acting: {1e6 * total:.0f} us a call; in C++ {1e6 * steps:.0f} us ({steps / total:.0%}), the buffers' room "
          f"(a refill every {HEADROOM} calls) {1e6 * copies:.0f} us ({copies / total:.0%}), the Python around them {1e6 * python:.0f} us ({python / total:.0%}; "
          f"the median call's {1e6 * median:.0f} us, {median / statistics.median(call for call, _, _ in per_call):.0%})")
    return {"call": total, "steps": steps, "refill": copies, "python": python}


if __name__ == "__main__":
    main()
