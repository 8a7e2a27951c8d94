"""A study's lock follows no link: a study folder someone handed over cannot make the tuner write
(or truncate) a file outside it."""

import os

import pytest

from experiments.frame.study import StudyBusy, held


@pytest.mark.parametrize("kind", ["symbolic link", "dangling link", "pipe"])
def test_a_study_lock_that_is_not_a_file_of_ours_is_refused_and_left_alone(tmp_path, kind):
    victim = tmp_path / "victim.txt"
    if kind == "symbolic link":
        victim.write_text("the victim's own words\n")
    study = tmp_path / "study"
    study.mkdir()
    if kind == "pipe":
        os.mkfifo(study / "study.lock")
    else:
        (study / "study.lock").symlink_to(victim)
    with pytest.raises(StudyBusy, match="study.lock is a (symbolic link|pipe)"):
        with held(study):
            pass
    assert victim.read_text() == "the victim's own words\n" if kind == "symbolic link" else not victim.exists()

