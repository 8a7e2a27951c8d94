"""Helpers for tests that train: the weights a config trains to, comparing two sets exactly, and a
run stopped and resumed against one that never stopped."""

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


def assert_resume_makes_the_unstopped_updates(trainer_class, config, steps_per_update: int) -> None:
    """`config(folder, updates)` trained 4 updates straight and 2 then resumed to 4 (its
    checkpoint, envs and memory carried on) end at the same weights, exactly."""
    runs = {}
    for folder, updates in (("straight", 4), ("split", 2)):  # one after the other: each seeds the global generators
        trainer = trainer_class(config(folder, updates))
        try:
            trainer.train()
        finally:
            trainer.close()
        runs[folder] = trainer
    straight, split = runs["straight"], runs["split"]
    resumed = trainer_class.from_checkpoint(split.config.run_dir, {"total_steps": 4 * steps_per_update})
    try:
        assert resumed.resumed_how.startswith("envs and memory continue")
        resumed.train()
    finally:
        resumed.close()
    assert_same_parameters(resumed.policy.state_dict(), straight.policy.state_dict())
