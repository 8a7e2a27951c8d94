"""Env steps per second and peak memory of every core, at the Feedback Transformer paper's maze sizes.

The cores, built as in the paper's maze runs (input_dim 256, float32):
  feedback, transformer   n_layers 2, d_model 256, n_heads 4, span 200
  lstm                    n_layers 3, hidden_size 256
  reservoir-ffn           reservoir kind ffn: 2 trained layers and 1 frozen FFN, else as transformer
  reservoir-esn           reservoir kind esn: 256 units, readout d_model 256
  mlp                     hidden_size 256, n_layers 2
  naive-feedback,         step by step under plain autograd (memory grown with torch.cat, every
  naive-transformer       key and value recomputed each step): the Feedback reference model
                          (agents/cores/feedback/reference.py) and benchmarks/naive_cores.py's
                          Transformer, sized as above: the baselines
  feedback-cpu, lstm-cpu, the A2C CPU preset's cores (agents/config/a2c_config.py's preset_values:
  gru-cpu, ffm-cpu,       feedback 2 layers, d_model 64, 4 heads, span 64; lstm and gru 1 x 128;
  lru-cpu, mamba-cpu,     ffm d_model 64 with its default 32 x 4 state; lru 2 layers, d_model 64,
  transformer-cpu,        64 state units each; mamba 2 layers, d_model 64, its defaults: 128 inner
  gtrxl-cpu               channels of 16 state units, 4 taps; transformer as feedback, and
                          gtrxl the same transformer with gating=gru, GTrXL's gated layers),
                          learning calls of T = 32 (the preset's rollout; --cpu-steps)
and for each core and batch size B (envs) it measures, side by side in one run:
  acting    env steps/s of T = 1 calls under torch.no_grad() with core.eval(), each call passed the
            state the last returned, from a full memory: B * calls / seconds;
  learning  env steps/s of one T = 100 call (--cpu-steps, 32, for the -cpu rows) from a full carried state,
            forward and backward of a scalar loss (y * a fixed random tensor).mean(): T * B /
            seconds per repetition;
  memory    the peak of each, above the memory in use once the core and its inputs are built
            (so the carried state counts, the weights and inputs do not): on CPU peak RSS
            (ru_maxrss), on CUDA torch.cuda.max_memory_allocated.

How each (core, B) runs: in a subprocess of its own (so peaks do not mix), which prints one JSON
line. It builds the core and the inputs, records the memory in use, then fills the memory: the
real cores by one no_grad call with T = span (200), the naive references by building their state
directly (random memory of the full span, all valid). The peak is then reset (on CPU by writing 5
to /proc/self/clear_refs, which resets ru_maxrss too; where that is refused, the peaks include
the fill call), so that the fill call's own working memory is not counted. Acting: one untimed
warm-up call, then calls until `--seconds` have passed (at least one). The peak is reset again;
learning: one untimed warm-up repetition, then repetitions from the same full state until
`--seconds` have passed (at least one). On CUDA every timed call is synchronised. The warm-up
matters on CPU even for long calls: naive-feedback learning at B = 64 took 33 s first and 18 s
after (a first call faults in its 14 GB page by page; later calls reuse the heap).

Skipped on CPU, by measurement on a 2-core, 24 GiB machine (the skip line says why):
  naive-* at B = 1024, both modes: their learning pass keeps every step's keys and values over
    the whole span for the backward pass, 14 GB at B = 64, so about 230 GB at B = 1024. Their
    acting would fit (about 1 s a call), but the targets need B = 64 only.
  feedback learning at B = 1024: one repetition takes minutes (its 100 steps are sequential),
    twice that with its warm-up, which would double the run. Its acting is measured.
Everything else runs; the largest are transformer and reservoir-ffn learning at B = 1024 (13 GB,
about 30 s a repetition). Nothing is skipped on CUDA; a mode that runs out of GPU memory is
reported as OOM. `--cores` and `--sizes` pick what runs.

At the end, for B = 64 on CPU, it checks the targets whose two sides it measured (`targets`;
PASS / FAIL lines, SKIP for a target not measured, as benchmarks/targets.py prints them):
feedback acting >= 5x naive-feedback acting, feedback learning >= 3x naive-feedback learning and
>= 0.8x transformer learning, feedback-cpu learning >= 1/3 of lstm-cpu's (a learning step at
most 3 times the LSTM's: issue 21); and prints, as information, feedback / transformer, and the
linear memories (ffm-cpu, lru-cpu) against lstm-cpu and feedback-cpu, mamba-cpu against
lstm-cpu and lru-cpu, gru-cpu against lstm-cpu, and gtrxl-cpu against transformer-cpu (what the
gates cost) and lstm-cpu, where both were measured. `--json` also writes the command, the
machine, the load average before and after, every row's numbers and the ratios.

    python benchmarks/cores.py                                    # everything, about 7-8 minutes
    python benchmarks/cores.py --cores feedback naive-feedback transformer feedback-cpu lstm-cpu --sizes 64 --check   # the targets
    python benchmarks/cores.py --seconds 0.5 --markdown bench.md  # quicker; also write the table
    python benchmarks/cores.py --cores ffm-cpu lru-cpu lstm-cpu feedback-cpu --sizes 64 --threads 1 --cpu-steps 1024
    python benchmarks/cores.py --cores lstm-cpu gru-cpu ffm-cpu lru-cpu mamba-cpu transformer-cpu gtrxl-cpu --sizes 64 --threads 1 --json cores.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script: the project root goes first on sys.path
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from agents.config.a2c_config import preset_values  # noqa: E402
from agents.cores import make_core  # noqa: E402
from durable.records import write_json, write_text  # noqa: E402
from experiments.frame.machine import cpu_model  # noqa: E402
from benchmarks.targets import Verdict, ratio_target, report  # noqa: E402
from agents.cores.feedback.reference import ReferenceState, reference_of  # noqa: E402
from benchmarks.naive_cores import NaiveTransformer  # noqa: E402

INPUT_DIM = 256
LEARN_STEPS = 100  # T of a learning call (the paper's rollout) ...
CPU_LEARN_STEPS = 32  # ... and of the -cpu rows by default (the CPU preset's)
ATTENTION = dict(n_layers=2, d_model=256, n_heads=4, span=200)


def cpu_preset(core: str) -> dict:
    """The A2C CPU preset's options for `core` (the same for every env)."""
    return preset_values("corridor", core, "cpu")[1]


# row name -> (make_core name, options, naive reference made from that core, or None)
CORES = {
    "feedback": ("feedback", ATTENTION, None),
    "transformer": ("transformer", ATTENTION, None),
    "lstm": ("lstm", dict(n_layers=3, hidden_size=256), None),
    "reservoir-ffn": ("reservoir", dict(kind="ffn", n_reservoir=1, **ATTENTION), None),
    "reservoir-esn": ("reservoir", dict(kind="esn", units=256, d_model=256), None),
    "mlp": ("mlp", dict(hidden_size=256, n_layers=2), None),
    "naive-feedback": ("feedback", ATTENTION, reference_of),
    "naive-transformer": ("transformer", ATTENTION, NaiveTransformer),
    "feedback-cpu": ("feedback", cpu_preset("feedback"), None),
    "lstm-cpu": ("lstm", cpu_preset("lstm"), None),
    "ffm-cpu": ("ffm", cpu_preset("ffm"), None),
    "lru-cpu": ("lru", cpu_preset("lru"), None),
    "mamba-cpu": ("mamba", cpu_preset("mamba"), None),
    "gru-cpu": ("gru", cpu_preset("gru"), None),
    "transformer-cpu": ("transformer", cpu_preset("transformer"), None),
    "gtrxl-cpu": ("transformer", {**cpu_preset("transformer"), "gating": "gru"}, None),
}
SIZES = [1, 64, 1024]
TARGET_B = 64
# (ours, reference, mode, at least): steps/s ratios at B = TARGET_B on CPU. Feedback learning
# against our transformer: the paper's claim that the Feedback Transformer trains about as fast
# where the data comes one step at a time anyway (issue 14: at least 0.8x).
TARGETS = [("feedback", "naive-feedback", "acting", 5.0), ("feedback", "naive-feedback", "learning", 3.0),
           ("feedback", "transformer", "learning", 0.8), ("feedback-cpu", "lstm-cpu", "learning", 1 / 3)]
# (ours, reference): steps/s ratios printed as information, per B, where both were measured
RATIOS = [("feedback", "transformer"), ("ffm-cpu", "lstm-cpu"), ("ffm-cpu", "feedback-cpu"),
          ("lru-cpu", "lstm-cpu"), ("lru-cpu", "feedback-cpu"), ("mamba-cpu", "lstm-cpu"), ("mamba-cpu", "lru-cpu"),
          ("gru-cpu", "lstm-cpu"), ("gtrxl-cpu", "transformer-cpu"), ("gtrxl-cpu", "lstm-cpu")]
MODES = ("acting", "learning")
WORKER_TIMEOUT_S = 900


def skips(name: str, batch: int, device: str) -> dict[str, str]:
    """The modes of (name, batch) not measured on `device`, with why (see the module docstring)."""
    if device != "cpu":
        return {}
    if name.startswith("naive-") and batch >= 1024:
        reason = "its learning pass would keep ~230 GB of activations (14 GB at B = 64)"
        return {mode: reason for mode in MODES}
    if name == "feedback" and batch >= 1024:
        return {"learning": "one repetition of 100 sequential steps takes minutes on CPU"}
    return {}


# ---- one (core, B), in a worker process ----


class Memory:
    """Memory in use and its peak since the last reset, in bytes: RSS on CPU, allocated on CUDA."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.exact_reset = True

    def current(self) -> int:
        if self.cuda:
            return torch.cuda.memory_allocated()
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def peak(self) -> int:
        if self.cuda:
            return torch.cuda.max_memory_allocated()
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

    def reset_peak(self):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            return
        try:  # give freed heap back first, so that it does not stay counted as resident
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset the resident high-water mark (ru_maxrss) to the current RSS
        except OSError:
            self.exact_reset = False


def build(name: str, device: torch.device):
    """(step, module, full state): step(x, state, first) -> (y, state); module holds the weights."""
    core_name, options, naive = CORES[name]
    core = make_core(core_name, INPUT_DIM, **options).to(device)
    step = core if naive is None else naive(core)
    return step, (step if isinstance(step, torch.nn.Module) else core)  # the reference model has its own weights


def full_state(name: str, step, module, batch: int, device: torch.device):
    """A state whose memory holds a whole span of steps of the running episode."""
    _, options, naive = CORES[name]
    if naive is reference_of:  # (memory (B, S, D), valid (B, S), no kept slot (B, 0))
        span, width = options["span"], options["d_model"]
        memory = torch.randn(batch, span, width, device=device)
        return ReferenceState(memory, torch.ones(batch, span, dtype=torch.bool, device=device), memory.new_zeros(batch, 0))
    if naive is NaiveTransformer:  # (inputs (B, L, S, D), valid (B, S))
        span, width, layers = options["span"], options["d_model"], options["n_layers"]
        inputs = torch.randn(batch, layers, span, width, device=device)
        return inputs, torch.ones(batch, span, dtype=torch.bool, device=device)
    span = options.get("span", 1)  # the recurrent cores need one step; the MLP carries nothing
    with torch.no_grad():
        x = torch.randn(span, batch, INPUT_DIM, device=device)
        _, state = step(x, module.initial_state(batch, device), torch.zeros(span, batch, dtype=torch.bool, device=device))
    return state


def time_calls(call, seconds: float, sync) -> tuple[int, float]:
    """(calls, seconds they took) of call() after one untimed warm-up call, repeated until
    `seconds` have passed (at least once)."""
    call()
    sync()
    calls, start = 0, time.perf_counter()
    while True:
        call()
        sync()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls, elapsed


def measure(name: str, batch: int, device: torch.device, seconds: float, modes: list[str], cpu_steps: int = CPU_LEARN_STEPS) -> dict:
    """All the numbers of one (core, B), for `modes` (acting, learning or both); the -cpu rows
    learn over calls of `cpu_steps` steps."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    memory = Memory(device)
    torch.manual_seed(0)
    step, module = build(name, device)
    x1 = torch.randn(1, batch, INPUT_DIM, device=device)
    first1 = torch.zeros(1, batch, dtype=torch.bool, device=device)
    steps = cpu_steps if name.endswith("-cpu") else LEARN_STEPS
    x = torch.randn(steps, batch, INPUT_DIM, device=device)
    first = torch.zeros(steps, batch, dtype=torch.bool, device=device)
    weight = torch.randn(steps, batch, module.output_dim, device=device)
    sync()
    base = memory.current()
    state = full_state(name, step, module, batch, device)
    sync()
    result = {"core": name, "B": batch}

    if "acting" in modes:
        memory.reset_peak()
        module.eval()

        def act():
            nonlocal state
            _, state = step(x1, state, first1)

        try:
            with torch.no_grad():
                calls, elapsed = time_calls(act, seconds, sync)
            result.update(acting=batch * calls / elapsed, acting_calls=calls, acting_peak=memory.peak() - base)
        except torch.OutOfMemoryError:
            result.update(acting_error="OOM")
            torch.cuda.empty_cache()

    if "learning" in modes:
        memory.reset_peak()
        module.train()

        def learn():
            module.zero_grad(set_to_none=True)
            y, _ = step(x, state, first)
            (y * weight).mean().backward()

        try:
            reps, elapsed = time_calls(learn, seconds, sync)
            result.update(learning=steps * batch * reps / elapsed, learning_reps=reps, learning_peak=memory.peak() - base)
        except torch.OutOfMemoryError:
            result.update(learning_error="OOM")
    result["exact_peak_reset"] = memory.exact_reset
    return result


# ---- the parent: run the workers, print the table and the checks ----


def run_worker(name: str, batch: int, modes: list[str], args) -> dict:
    command = [sys.executable, __file__, "--worker", name, str(batch), *modes]
    command += ["--device", args.device, "--seconds", str(args.seconds), "--cpu-steps", str(args.cpu_steps)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {WORKER_TIMEOUT_S} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"worker exit {done.returncode}: {tail}"}
    return json.loads(lines[-1])


def machine_line(device: str) -> str:
    if device.startswith("cuda"):
        where = f"GPU {torch.cuda.get_device_name(torch.device(device))}"
    else:
        where = f"CPU {cpu_model()}, {os.cpu_count()} CPUs"
    return (
        f"python {platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"device {device}: {where}"
    )


def rate(value) -> str:
    return "–" if value is None else f"{value:,.0f}"


def mebibytes(value) -> str:
    return "–" if value is None else f"{value / 2**20:,.1f}"


def row(name: str, batch: int, r: dict) -> str:
    if "error" in r:
        cells = [r["error"], "–", "–", "–"]
    else:
        speeds = [r.get(f"{mode}_error") or ("skipped" if mode in r["skipped"] else rate(r.get(mode))) for mode in MODES]
        cells = speeds + [mebibytes(r.get(f"{mode}_peak")) for mode in MODES]
    return "| " + " | ".join([name, str(batch), *cells]) + " |"


def speed(results: dict, name: str, mode: str) -> float | None:
    """Steps/s of `name` in `mode` at B = TARGET_B, None where it was not measured."""
    return results.get((name, TARGET_B), {}).get(mode)


def targets(results: dict, device: str) -> list[Verdict]:
    """The verdicts on TARGETS from this run's results {(core, B): {mode: steps/s}}; off the CPU,
    which they are for, none is measured."""
    verdicts = []
    for ours, reference, mode, at_least in TARGETS:
        name = f"B={TARGET_B} {mode} {ours} / {reference} steps/s"
        if device != "cpu":
            verdicts.append(Verdict(name, at_least, None, f"the targets are for CPU (this run: --device {device})"))
        else:
            verdicts.append(ratio_target(name, speed(results, ours, mode), speed(results, reference, mode), at_least,
                                         f"needs --cores {ours} {reference} --sizes {TARGET_B}"))
    return verdicts


def learning_step_lines(results: dict) -> list[str]:
    """The learning targets' two sides as milliseconds a step of B envs, where both were measured."""
    lines = []
    for ours, reference, mode, _ in TARGETS:
        sides = [(name, speed(results, name, mode)) for name in (ours, reference)]
        if mode == "learning" and all(value for _, value in sides):
            lines.append(", ".join(f"{name} {TARGET_B / value * 1e3:.2f} ms a step" for name, value in sides))
    return lines


def ratios(results: dict, sizes: list[int]) -> list[dict]:
    """RATIOS' steps/s ratios, per B, where both sides were measured in a mode: one dict per
    (ours, reference, B) with a number for at least one mode (None for a mode not measured)."""
    found = []
    for ours, reference in RATIOS:
        for batch in sizes:
            o, r = results.get((ours, batch), {}), results.get((reference, batch), {})
            by_mode = {m: o[m] / r[m] if o.get(m) and r.get(m) else None for m in MODES}
            if any(value is not None for value in by_mode.values()):
                found.append({"ours": ours, "reference": reference, "B": batch, **by_mode})
    return found


def ratio_table(results: dict, sizes: list[int]) -> list[str]:
    """ratios() as a markdown table, [] where there is none."""
    lines = ["| ours / reference | B | acting | learning |", "|---|---:|---:|---:|"]
    for r in ratios(results, sizes):
        cells = ["–" if r[m] is None else f"{r[m]:.2f}" for m in MODES]
        lines.append(f"| {r['ours']} / {r['reference']} | {r['B']} | {cells[0]} | {cells[1]} |")
    return lines if len(lines) > 2 else []


def record(results: dict, args, argv: list[str], load_before: tuple, seconds: float) -> dict:
    """What --json writes: the command and machine, each row's numbers and the ratios."""
    return {
        "command": " ".join(["python", "benchmarks/cores.py", *argv]),
        "machine": machine_line(args.device), "cpu_steps": args.cpu_steps, "learn_steps": LEARN_STEPS, "seconds": args.seconds,
        "threads": args.threads, "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
        "total_seconds": round(seconds, 1),
        "rows": [{"core": name, "B": batch, **{k: v for k, v in r.items() if k not in ("core", "B")}} for (name, batch), r in results.items()],
        "ratios": ratios(results, args.sizes),
    }


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", nargs="+", default=list(CORES), choices=list(CORES), metavar="CORE", help=f"from {list(CORES)}")
    parser.add_argument("--sizes", nargs="+", type=int, default=SIZES, help="batch sizes B")
    parser.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda, cuda:N")
    parser.add_argument("--seconds", type=float, default=1.0, help="timed work per measurement (at least one call)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--cpu-steps", type=int, default=CPU_LEARN_STEPS, help="T of the -cpu rows' learning calls")
    parser.add_argument("--markdown", default=None, help="also write the table to this file")
    parser.add_argument("--json", default=None, help="also write the command, machine, rows and ratios to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the B = 64 CPU targets pass")
    parser.add_argument("--worker", nargs="+", metavar="CORE B MODE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        parser.error(str(e))
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA device; use --device cpu")
    for batch in args.sizes:
        if batch < 1:
            parser.error(f"sizes must be >= 1, got {batch}")
    if args.seconds <= 0:
        parser.error(f"--seconds must be > 0, got {args.seconds}")
    if args.cpu_steps < 1:
        parser.error(f"--cpu-steps must be >= 1, got {args.cpu_steps}")
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.worker:
        name, batch, *modes = args.worker
        if name not in CORES or not set(modes) <= set(MODES):
            parser.error(f"--worker takes a core from {list(CORES)}, B and modes from {MODES}, got {args.worker}")
        print(json.dumps(measure(name, int(batch), device, args.seconds, modes, args.cpu_steps)), flush=True)
        return 0

    start, load_before = time.perf_counter(), os.getloadavg()
    print(machine_line(args.device))
    print(
        f"input_dim {INPUT_DIM}, float32; target {args.seconds:g} s timed per measurement after one warm-up; "
        f"acting: T = 1 calls from a full memory; learning: T = {LEARN_STEPS} (-cpu rows: {args.cpu_steps}), forward + backward; "
        "peaks above the memory in use after building the core and inputs; one subprocess per row\n"
    )
    lines = ["| core | B | acting steps/s | learning steps/s | acting peak MiB | learning peak MiB |", "|---|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    results, notes = {}, []
    for name in args.cores:
        for batch in args.sizes:
            skipped = skips(name, batch, device.type)
            modes = [mode for mode in MODES if mode not in skipped]
            result = run_worker(name, batch, modes, args) if modes else {}
            result["skipped"] = skipped
            results[name, batch] = result
            lines.append(row(name, batch, result))
            print(lines[-1], flush=True)
            for reason in dict.fromkeys(skipped.values()):
                which = " and ".join(mode for mode in MODES if skipped.get(mode) == reason)
                notes.append(f"skipped: {name} B={batch} {which}: {reason}")
            if "error" in result:
                notes.append(f"error: {name} B={batch}: {result['error']}")
            elif not result.get("exact_peak_reset", True):
                notes.append(f"note: {name} B={batch}: the peak could not be reset; it includes the fill call")
    print()
    print("\n".join(notes) if notes else "nothing skipped")
    if args.markdown:
        write_text(args.markdown, "\n".join(lines) + "\n")
        print(f"table written to {args.markdown}")

    ratio_lines = ratio_table(results, args.sizes)
    if ratio_lines:
        print("\nsteps/s ratios (informational):\n" + "\n".join(ratio_lines))
    if args.json:
        write_json(args.json, record(results, args, sys.argv[1:], load_before, time.perf_counter() - start), indent=1)
        print(f"measurements written to {args.json}")
    print()
    status = report(targets(results, device.type), args.check)
    if device.type == "cpu":
        for line in learning_step_lines(results):
            print(line)
    print(f"\ntotal {time.perf_counter() - start:,.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
