"""A build of the compiled Feedback step killed mid-way leaves torch's `lock` file in the build
folder; the next run must not wait for it for ever (agents/cores/feedback/compiled.py: held_build)."""

import multiprocessing
import sys

import pytest

from agents.cores.feedback import compiled

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock: the stale lock is only removed where there is one")


def test_a_killed_builds_lock_file_is_removed_once_no_build_of_ours_holds_the_folder(tmp_path):
    (tmp_path / "lock").write_text("")  # as a build killed mid-way leaves it
    with compiled.held_build(tmp_path):
        assert not (tmp_path / "lock").exists()


def hold_until_released(folder, held, release):
    with compiled.held_build(folder):
        held.set()
        release.wait(60)


def enter(folder):
    with compiled.held_build(folder):
        pass


def test_a_build_under_way_in_another_process_is_waited_for_not_broken(tmp_path):
    context = multiprocessing.get_context("spawn")
    held, release = context.Event(), context.Event()
    builder = context.Process(target=hold_until_released, args=(tmp_path, held, release))
    builder.start()
    try:
        assert held.wait(60)
        (tmp_path / "lock").write_text("")  # torch's baton of the build under way
        waiter = context.Process(target=enter, args=(tmp_path,))
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive() and (tmp_path / "lock").exists()  # it waits: the lock is a live build's
        release.set()
        builder.join(30)
        waiter.join(30)
        assert waiter.exitcode == 0 and not (tmp_path / "lock").exists()  # the build ended: its baton is gone
    finally:
        release.set()
        builder.join(5)


def test_each_torch_installation_builds_under_a_name_of_its_own(monkeypatch):
    """Two virtual environments sharing the extension cache do not rebuild each other's build (its
    ninja file holds the headers' paths); the same installation and source find the same build."""
    name = compiled.build_name("feedback_rl_step", b"source")
    assert name == compiled.build_name("feedback_rl_step", b"source") != compiled.build_name("feedback_rl_step", b"edited")
    assert name.startswith("feedback_rl_step_")
    monkeypatch.setattr(compiled.torch, "__file__", "/elsewhere/.venv/lib/python3.11/site-packages/torch/__init__.py")
    assert compiled.build_name("feedback_rl_step", b"source") != name


def test_each_checkout_of_the_step_builds_under_a_name_of_its_own(tmp_path):
    """Two checkouts of the same source (one per experiment) do not rebuild each other's build (its
    ninja file names the source's path); one file finds its own build again, and an edit a new one."""
    first, second = tmp_path / "a" / "feedback_step.cpp", tmp_path / "b" / "feedback_step.cpp"
    for path in (first, second):
        path.parent.mkdir()
        path.write_bytes(compiled.SOURCE.read_bytes())
    name = compiled.step_build_name(first)
    assert name == compiled.step_build_name(tmp_path / "a" / ".." / "a" / "feedback_step.cpp")
    assert compiled.step_build_name(second) != name and name.startswith("feedback_rl_step_")
    first.write_bytes(compiled.SOURCE.read_bytes() + b"\n// edited\n")
    assert compiled.step_build_name(first) != name
