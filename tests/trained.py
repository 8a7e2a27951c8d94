"""Helpers for tests that train: the weights a config trains to, and comparing two sets exactly."""

import torch

from agents.learners.train import Trainer


def trained_parameters(config) -> dict:
    """The policy's state dict after training `config` to its total_steps."""
    trainer = Trainer(config)
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer.policy.state_dict()


def assert_same_parameters(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
