"""Which way the linear memories (ffm, lru) should run a learning call's recurrence on this CPU:
agents/cores/linear_scan.py's stepwise scan, its doubling scan over the whole call or chunk by
chunk, or a chunked closed form, timed forward and backward at T = 32, 256 and 1,024.

The recurrence is h_t = a h_{t-1} + v_t, restarted where an episode starts (h_t = v_t where
first[t]); a (N,) complex, v (T, B, N) complex. Each way is timed as a learning pass: the decay
and the inputs require gradients, the loss is sum(states * a fixed random tensor) over the real
and imaginary parts, then backward. The ways:

  stepwise               one multiply-add a step, in place, its backward a second such scan from
                         the last step back (linear_scan's way on a CPU: STEPWISE_DEVICES)
  doubling, whole call   linear_scan(..., chunk >= T): log2(T) rounds of elementwise complex work
                         over the whole call, each round's products kept for the backward
  doubling, chunk K      linear_scan(..., chunk=K): log2(K) rounds over K steps at a time, the
                         state carried from chunk to chunk (T / K chunks one after another)
  closed form, chunk K   `closed_form` below: within a chunk, h_t = a^t (C_t - C_s-1) with C the
                         cumulative sum of a^-j v_j and s the step the episode began (or a^t (a
                         h_in + C_t) before the chunk's first episode start): one cumsum, a gather
                         and elementwise products, no rounds

The closed form divides by powers of a: within a chunk it needs |a|^-(K-1) finite and |a|^(K-1)
not below float32's smallest normal number, about 2^-126, so it is exact to rounding only for K
<= 1 + 126 / log2(1 / min |a|): at FFM's initial decays (min |a| = 1/2) K <= 127, at LRU's (min
|a| = 0.9) K <= 829, and a learned decay can leave those bounds at any time (FFM's alpha is not
bounded). So the closed form is timed only where its chunk is within that bound at the initial
decays, and the error column says how far each way is from a complex128 doubling scan.

Sizes: B = 64, N = 128 (FFM's default m x c = 32 x 4; its initial decays) and N = 64 (LRU's
default state; its initial decays, r_min 0.9, r_max 0.999); episode starts drawn with probability
1/32 a step. Every way is timed `--repeats` times, interleaved (benchmarks/targets.py: A B C, C
B A, ...), each sample the mean of calls over `--seconds` after one untimed call; the table gives
the median. One torch thread by default (as the trainers' actors run).

Then, for every chunk K (the doubling scan, a chunk of K >= T being the whole call), the
geometric mean over the T measured of its time over the fastest doubling chunk's at that T:
the chunk with the smallest, over both problems, is the one agents/cores/linear_scan.py's CHUNK
should be (the doubling scan runs where the stepwise one does not: a GPU). The targets (--check):
CHUNK's mean at most 1.1 x that chunk's, and at every problem and T the stepwise scan (the CPU's
way) at most 1.1 x the fastest way's time, all from this run.

    python benchmarks/linear_scan.py                                  # about 10 minutes on a shared 2-core EPYC
    python benchmarks/linear_scan.py --json scan.json --markdown scan.md --check
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import torch

if __package__ in (None, ""):  # run as a script: the project root goes first on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.cores.ffm import FFMConfig, FFMCore  # noqa: E402
from agents.cores import linear_scan as scan_module  # noqa: E402
from agents.cores.linear_scan import CHUNK, linear_scan  # noqa: E402
from agents.cores.lru import LRUConfig, LRULayer  # noqa: E402
from benchmarks.targets import Verdict, interleaved, per_call, ratio_target, report  # noqa: E402
from durable.records import write_json, write_text  # noqa: E402
from experiments.frame.machine import cpu_model, load_line  # noqa: E402

LENGTHS = [32, 256, 1024]
CHUNKS = [16, 32, 64, 128, 256]  # CHUNK is added where it is not among them
CLOSED_CHUNKS = [16, 64, 128]
BATCH = 64
RESET_P = 1 / 32  # episode starts a step
TARGET_SLOWDOWN = 1.1  # CHUNK's score at most this times the fastest doubling chunk's
SMALLEST_NORMAL_LOG2 = 126  # float32: normal numbers down to 2^-126


# ---- the closed form, the alternative timed against the doubling scan ----


def closed_form(decay: torch.Tensor, inputs: torch.Tensor, first: torch.Tensor, state: torch.Tensor, chunk: int) -> torch.Tensor:
    """linear_scan's states by a cumulative sum within chunks of `chunk` steps: decay (N,) complex,
    inputs (T, B, N) complex, first (T, B) bool, state (B, N) complex -> (T, B, N) complex. Exact
    to rounding only while |decay|^-(chunk - 1) stays a normal float (the module docstring). The
    chunk loop is linear_scan's, so that the two ways differ only within a chunk."""
    parts = []
    for start in range(0, inputs.shape[0], chunk):
        states = _closed_chunk(decay, inputs[start : start + chunk], first[start : start + chunk], state)
        parts.append(states)
        state = states[-1]
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _closed_chunk(decay: torch.Tensor, inputs: torch.Tensor, first: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """closed_form over one chunk."""
    steps = inputs.shape[0]
    t = torch.arange(steps, device=inputs.device)
    log_decay = torch.log(decay)  # (N,)
    up = torch.exp(t[:, None] * log_decay)[:, None]  # (K, 1, N): a^t
    sums = torch.cumsum(inputs * torch.exp(-t[:, None] * log_decay)[:, None], dim=0)  # (K, B, N): C_t
    began = torch.cummax(torch.where(first, t[:, None], -1), dim=0).values  # (K, B): the step the episode began, -1 before the chunk's first
    before = torch.cat([torch.zeros_like(sums[:1]), sums[:-1]])  # (K, B, N): C_(t-1), C_-1 = 0
    index = began.clamp(min=0)[..., None].expand_as(sums)
    base = torch.where((began >= 0)[..., None], before.gather(0, index), -decay * state)  # C_(s-1), or -a h_in
    return up * (sums - base)


def closed_form_limit(decay: torch.Tensor) -> int:
    """The longest chunk for which the closed form stays exact at `decay` (the module docstring)."""
    slowest_log2 = -math.log2(decay.abs().min().item())
    return 1 + int(SMALLEST_NORMAL_LOG2 / slowest_log2)


# ---- the problems: the cores' initial decays ----


def initial_decays() -> dict[str, torch.Tensor]:
    """name -> the (N,) complex64 decay a default core starts from: FFM's gamma, LRU's lambda."""
    torch.manual_seed(0)
    ffm = FFMCore(1, FFMConfig()).decay(torch.float32).detach()
    lru_config = LRUConfig()
    lru = LRULayer(lru_config.d_model, lru_config.state_size, lru_config).decay(torch.float32).detach()
    return {f"ffm N={ffm.numel()}": ffm, f"lru N={lru.numel()}": lru}


def problem(decay: torch.Tensor, steps: int, batch: int) -> dict[str, torch.Tensor]:
    """A learning call's tensors for `decay`: the decay and inputs (leaves that take gradients),
    episode starts, a carried state and the loss weights."""
    units = decay.numel()
    generator = torch.Generator().manual_seed(steps)
    return {
        "decay": decay.clone().requires_grad_(),
        "inputs": torch.randn(steps, batch, units, dtype=torch.complex64, generator=generator).requires_grad_(),
        "first": torch.rand(steps, batch, generator=generator) < RESET_P,
        "state": torch.randn(batch, units, dtype=torch.complex64, generator=generator),
        "weight": torch.randn(steps, batch, units, 2, generator=generator),
    }


def on(devices: tuple[str, ...]):
    """linear_scan run as it runs where STEPWISE_DEVICES is `devices`: ("cpu",) one step after
    another on this CPU, () by doubling rounds (a GPU's way)."""

    def scan(decay, inputs, first, state, chunk):
        with mock.patch.object(scan_module, "STEPWISE_DEVICES", devices):
            return linear_scan(decay, inputs, first, state, chunk)

    return scan


SCANS = {"doubling": on(()), "stepwise": on(("cpu",)), "closed": closed_form}


def ways(steps: int, limit: int, chunks: list[int], closed_chunks: list[int]) -> list[tuple[str, int]]:
    """(way, chunk) to time at T = `steps`: the stepwise scan (a chunk means nothing to it), the
    doubling scan whole and at every chunk below T, the closed form at every chunk within `limit`
    (chunk T for the whole call)."""
    doubling = [("doubling", steps)] + [("doubling", k) for k in chunks if k < steps]
    closed = [("closed", min(k, steps)) for k in closed_chunks if k <= limit]
    return [("stepwise", steps)] + doubling + list(dict.fromkeys(closed))


def learning_pass(way: str, chunk: int, p: dict[str, torch.Tensor]):
    """A call for timing: forward, the loss, backward, gradients to the decay and the inputs."""
    scan = SCANS[way]

    def call():
        states = scan(p["decay"], p["inputs"], p["first"], p["state"], chunk)
        (torch.view_as_real(states) * p["weight"]).sum().backward()
        p["decay"].grad = p["inputs"].grad = None

    return call


def error(way: str, chunk: int, p: dict[str, torch.Tensor]) -> float:
    """The largest error of the way's states against a complex128 doubling scan over the whole
    call, over the largest state (float32's rounding is about 1e-7)."""
    scan = SCANS[way]
    with torch.no_grad():
        decay = p["decay"]
        states = scan(decay, p["inputs"], p["first"], p["state"], chunk)
        exact = SCANS["doubling"](decay.to(torch.complex128), p["inputs"].to(torch.complex128), p["first"],
                                  p["state"].to(torch.complex128), p["inputs"].shape[0])
    return ((states.to(torch.complex128) - exact).abs().max() / exact.abs().max()).item()


def label(way: str, chunk: int, steps: int) -> str:
    if way == "stepwise":
        return "stepwise"
    if chunk >= steps:
        return f"{way}, whole call"
    return f"{way}, chunk {chunk}"


# ---- the choice of CHUNK and the target ----


def chunk_scores(times: dict[tuple[str, int, str, int], float], name: str, lengths: list[int], candidates: list[int]) -> dict[int, float]:
    """For each candidate chunk of the doubling scan, the geometric mean over `lengths` of its time
    over the fastest doubling time at that length (1.0: fastest everywhere). times: (problem, T,
    way, chunk) -> seconds; a candidate of at least T runs the whole call."""
    scores = {}
    for candidate in candidates:
        logs = []
        for steps in lengths:
            doubling = [seconds for (n, t, way, _), seconds in times.items() if (n, t, way) == (name, steps, "doubling")]
            logs.append(math.log(times[name, steps, "doubling", min(candidate, steps)] / min(doubling)))
        scores[candidate] = math.exp(sum(logs) / len(logs))
    return scores


def target(scores: dict[int, float], chunk: int) -> Verdict:
    """The fastest chunk's score over CHUNK's (`chunk_scores`, over both problems: lower is
    faster), at least 1 / TARGET_SLOWDOWN."""
    return ratio_target(f"fastest doubling chunk / CHUNK={chunk}, time over the lengths and problems", min(scores.values()),
                        scores.get(chunk), 1 / TARGET_SLOWDOWN, f"chunk {chunk} not measured")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", nargs="+", type=int, default=LENGTHS, help="T of the learning calls")
    parser.add_argument("--chunks", nargs="+", type=int, default=CHUNKS, help="doubling chunks (CHUNK is always added)")
    parser.add_argument("--closed-chunks", nargs="+", type=int, default=CLOSED_CHUNKS, help="closed-form chunks")
    parser.add_argument("--batch", type=int, default=BATCH, help="B envs")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=0.2, help="timed per sample, after one untimed call")
    parser.add_argument("--repeats", type=int, default=5, help="samples per way, interleaved; the median is reported")
    parser.add_argument("--json", default=None, help="also write the measurements to this file")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless CHUNK is within the target of the fastest chunk")
    args = parser.parse_args(argv)
    for flag in ("lengths", "chunks", "closed_chunks"):
        if min(getattr(args, flag)) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    torch.set_num_threads(args.threads)
    chunks = sorted(set(args.chunks) | {CHUNK})
    decays = initial_decays()
    began = time.perf_counter()

    runs = {}  # (problem, T, way, chunk) -> (call, error)
    for name, decay in decays.items():
        limit = closed_form_limit(decay)
        for steps in args.lengths:
            p = problem(decay, steps, args.batch)
            for way, chunk in ways(steps, limit, chunks, args.closed_chunks):
                runs[name, steps, way, chunk] = (learning_pass(way, chunk, p), error(way, chunk, p))
    samples = {key: [] for key in runs}
    for key in interleaved(list(runs), args.repeats):
        samples[key].append(per_call(runs[key][0], args.seconds))
    times = {key: statistics.median(values) for key, values in samples.items()}

    machine = f"{cpu_model()}, {load_line()}; python {platform.python_version()}, torch {torch.__version__}, {args.threads} thread(s)"
    print(machine)
    print(f"B = {args.batch}, complex64, forward + backward (gradients to the decay and the inputs), episode starts "
          f"with probability {RESET_P:.3g} a step; median of {args.repeats} interleaved samples of >= {args.seconds:g} s\n")
    lines = ["| problem | T | way | ms a call | us a step | against the fastest | error |", "|---|---:|---|---:|---:|---:|---:|"]
    for name in decays:
        for steps in args.lengths:
            keys = [key for key in runs if key[:2] == (name, steps)]
            fastest = min(times[key] for key in keys)
            for key in keys:
                seconds = times[key]
                lines.append(f"| {name} | {steps} | {label(key[2], key[3], steps)} | {seconds * 1e3:.2f} | "
                             f"{seconds / steps * 1e6:.1f} | {seconds / fastest:.2f}x | {runs[key][1]:.1e} |")
    print("\n".join(lines))

    candidates = sorted(set(chunks) | {max(args.lengths)})  # the largest: the whole call at every T
    scores = {name: chunk_scores(times, name, args.lengths, candidates) for name in decays}
    print(f"\ndoubling chunk: geometric mean over T = {args.lengths} of its time over the fastest doubling chunk's (a chunk >= T: the whole call)")
    print("| chunk | " + " | ".join(decays) + " | both |\n|---:|" + "---:|" * (len(decays) + 1))
    both = {k: math.prod(scores[name][k] for name in decays) ** (1 / len(decays)) for k in candidates}
    for k in candidates:
        print(f"| {k} | " + " | ".join(f"{scores[name][k]:.3f}" for name in decays) + f" | {both[k]:.3f} |")
    best = min(candidates, key=both.get)
    print(f"fastest across the lengths and both problems: chunk {best}; linear_scan.CHUNK = {CHUNK}\n")

    worst = min(min(times[key] for key in runs if key[:2] == cell) / times[(*cell, "stepwise", cell[1])]
                for cell in {key[:2] for key in runs})
    stepwise = ratio_target("fastest way / stepwise (the CPU's), the worst problem and T", worst, 1.0, 1 / TARGET_SLOWDOWN, "")
    status = report([target(both, CHUNK), stepwise], args.check)
    if args.markdown:
        write_text(args.markdown, "\n".join(lines) + "\n")
        print(f"table written to {args.markdown}")
    if args.json:
        record = {
            "command": " ".join(["python", "benchmarks/linear_scan.py", *(sys.argv[1:] if argv is None else argv)]),
            "machine": machine, "batch": args.batch, "repeats": args.repeats, "chunk_constant": CHUNK, "best_chunk": best,
            "rows": [{"problem": n, "T": t, "way": w, "chunk": k, "seconds": times[n, t, w, k], "samples": samples[n, t, w, k],
                      "error": runs[n, t, w, k][1]} for n, t, w, k in runs],
            "chunk_scores": {name: {str(k): v for k, v in s.items()} for name, s in scores.items()},
        }
        write_json(args.json, record, indent=1)
        print(f"measurements written to {args.json}")
    print(f"total {time.perf_counter() - began:,.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
