"""The Feedback Transformer authors' two models, built from a checkout of their code outside
this repository, for benchmarks/seqtasks.py --authors PATH to time beside ours.

facebookresearch/transformer-sequential is licensed CC BY-NC 4.0, so none of it is in this
repository: this module imports it from PATH at run time (a clone of the public repository,
anywhere but here) and builds their FeedbackTransformer (shared key/value projections, as
`--share-proj-kv`) or TransformerSeq with their own argument parser at our configuration
(PAPER in benchmarks/seqtasks.py: their --hid-sz, --inner-hid-sz, --nlayers, --nheads,
--attn-lim, --mem-sz, --dropout, --pre-norm). An update is what their trainer does: forward
with the carried cache, cache detached, NLL loss over the block, backward, gradient-norm clip,
Adam step (their `train_batch` without its logging), on the same token blocks as our run.

One change at run time, nothing else: on torch 2.x their BufferWrite saves `buffer_grad` with
`ctx.save_for_backward` and later backward calls add into it in place, which autograd's version
check rejects. `_BufferWriteOnCtx` below replaces it, doing the same computation with the
gradient buffer kept as a plain attribute of ctx.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from seqtasks.data import IGNORE

REPOSITORY = "https://github.com/facebookresearch/transformer-sequential"


class _BufferWriteOnCtx(torch.autograd.Function):
    """Write `new` (n, ...) at `pos` of `buffer`; return each window (the last w slots up to the
    write) as a tensor on the buffer's storage. Backward adds the windows' gradients into
    `buffer_grad` and hands the written slots theirs."""

    @staticmethod
    def forward(ctx, new, buffer, pos, buffer_grad, windows):
        end = pos + new.shape[0]
        buffer[pos:end] = new
        ctx.pos, ctx.end, ctx.buffer_grad = pos, end, buffer_grad
        return tuple(torch.empty(0, dtype=buffer.dtype, device=buffer.device).set_(buffer[end - w : end]) for w in windows)

    @staticmethod
    def backward(ctx, *grads):
        for grad in grads:
            ctx.buffer_grad[ctx.end - grad.shape[0] : ctx.end] += grad
        return ctx.buffer_grad[ctx.pos : ctx.end], None, None, None, None


def import_models(path: Path):
    """Their `main` (argument parser) and `models.feedback` modules from a checkout at `path`."""
    path, ours = Path(path).resolve(), Path(__file__).resolve().parent.parent
    if path == ours or ours in path.parents:
        raise ValueError(f"{str(path)!r} is inside this repository; their code (CC BY-NC 4.0) must stay outside it")
    if not (path / "models" / "feedback.py").is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a checkout of {REPOSITORY} (no models/feedback.py there)")
    sys.path.insert(0, str(path))
    try:
        import main as their_main
        from models import feedback as their_feedback
    finally:
        sys.path.remove(str(path))
    their_feedback.BufferWrite = _BufferWriteOnCtx
    return their_main, their_feedback


class AuthorsRun:
    """Their model `core` ("feedback" or "transformer") at our configuration, stepped on the
    (T, B) token blocks of `stream` (a seqtasks TokenStream), as `Run.step` is on ours."""

    def __init__(self, path: Path, core: str, config: dict, vocab: int, batch: int, stream, device: str):
        their_main, their_feedback = import_models(path)
        flags = [
            "--data", "unused", "--hid-sz", str(config["d_model"]), "--inner-hid-sz", str(4 * config["d_model"]),
            "--nlayers", str(config["n_layers"]), "--nheads", str(config["n_heads"]), "--attn-lim", str(config["span"]),
            "--mem-sz", str(config["bptt"]), "--dropout", str(config["dropout"]), "--batch-sz", str(batch), "--pre-norm",
        ]
        flags += ["--feedback", "--share-proj-kv"] if core == "feedback" else []
        args = their_main.get_parser().parse_args(flags)
        their_main.update_args(args)
        args.vocab_sz, args.device = vocab, torch.device(device)
        model_class = their_feedback.FeedbackTransformer if core == "feedback" else their_feedback.TransformerSeq
        self.model = model_class(args).to(device)
        self.model.train()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config["lr"])
        self.grad_clip, self.bptt, self.stream, self.block = config["grad_clip"], config["bptt"], stream, 0
        self.cache = self.model.init_hid_cache(batch)

    def step(self) -> None:
        start = self.block * self.bptt
        if start + self.bptt > self.stream.width:
            self.block, start = 0, 0
        x = self.stream.inputs[start : start + self.bptt].T.contiguous()  # (B, T), their layout
        y = self.stream.targets[start : start + self.bptt].T.contiguous()
        self.block += 1
        out, cache, _ = self.model(x, self.cache, y)
        self.cache = [c.detach() for c in cache]
        loss = F.nll_loss(out.reshape(-1, out.shape[-1]), y.reshape(-1), ignore_index=IGNORE)  # our padding; their omitted labels
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad()
