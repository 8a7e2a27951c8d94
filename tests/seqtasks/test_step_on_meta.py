"""The seqtasks update on the meta device, a stand-in for CUDA (see
tests/cores/test_meta_device.py): `Run.step` (the next block's loss, backward, clipping, the
optimiser and schedule steps) makes no tensor on the CPU by mistake and reads nothing back to
the host; the loss and the count of targets it returns stay on the device, read when logged.

The LSTM and GRU are left out: their calls over T > 1 steps read their resets back
(agents/cores/recurrent.py).
"""

import pytest
import torch

from seqtasks.config import resolve_config
from seqtasks.train import Run, make_optimizer, warmup_schedule

META = torch.device("meta")
SMALL = dict(n_train=16, n_valid=4, n_test=4, d_model=8, n_layers=1, n_heads=2, span=4, dropout=0.1, batch_size=4, bptt=6,
             warmup=2, threads=1, grad_clip=1.0)


def meta_run(tmp_path, **fields) -> Run:
    """A run built on the CPU, then its model, optimiser, schedule and data moved to meta."""
    config, _ = resolve_config({**SMALL, **fields, "run_dir": str(tmp_path)}, cuda=False)
    run = Run(config, {}, tmp_path)
    run.model.to(META)
    run.train_model, run.optimizer = run.model, make_optimizer(config, run.model)
    run.schedule = warmup_schedule(config, run.optimizer)
    run.device = run.regime.device = META
    return run


@pytest.mark.parametrize("core", ["feedback", "transformer", "reservoir", "mlp"])
@pytest.mark.parametrize("task", ["random_walk", "adding"])
def test_an_update_runs_on_meta(tmp_path, task, core):
    run = meta_run(tmp_path, task=task, core=core, grid_size=3, walk_length=6, seq_length=8)
    for _ in range(2):  # the second from the carried memory (token tasks)
        loss, count = run.step()
        assert (loss.device, count.device) == (META, META)
    assert all(p.grad.device == META for p in run.model.parameters() if p.requires_grad)
