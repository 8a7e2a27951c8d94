"""The launcher flags every experiment takes: bad values refused naming them, Slurm's time
formats read as minutes, and `--launcher slurm` where no Slurm is refused saying what is missing;
and --quick's frame budget."""

import argparse

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from experiments import corridor_span, mazes

from experiments.frame import launch
from experiments.frame.flags import QUICK_FRAMES, run_frames


def parse(*flags: str) -> argparse.Namespace:
    return mazes.make_parser().parse_args(list(flags))


@pytest.mark.parametrize("text, minutes", [("90", 90), ("1:30:00", 90), ("0:00:01", 1), ("2-0", 2880), ("1-2:03", 1563), ("1-0:00:30", 1441)])
def test_slurm_times_are_read_as_slurm_reads_them(text, minutes):
    assert parse("--slurm-time", text).slurm_time == minutes


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_every_days_hours_minutes_seconds_time_is_its_minutes_rounded_up(days, hours, minutes, seconds):
    total_seconds = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    assume(total_seconds >= 60)  # under a minute is refused, below
    assert launch.slurm_minutes(f"{days}-{hours}:{minutes:02d}:{seconds:02d}") == -(-total_seconds // 60)


@pytest.mark.parametrize("flags, named", [
    (["--slurm-time", "soon"], "'soon' is not a Slurm time"),
    (["--slurm-time", "0"], "'0' is under a minute"),
    (["--slurm-time", "1:30"], "'1:30' is not a Slurm time"),  # Slurm reads MM:SS there: ambiguous, refused
    (["--slurm-option", "account"], "'account' is not KEY=VALUE"),
    (["--slurm-gpus-per-job", "-1"], "invalid choice: -1"),
    (["--launcher", "pbs"], "invalid choice: 'pbs'"),
])
def test_bad_launcher_values_are_refused_naming_them(flags, named, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(*flags)
    assert exit_info.value.code == 2 and named in capsys.readouterr().err


@pytest.mark.parametrize("flag, value, bad", [
    ("--slurm-option", "account=lab\n#SBATCH --time=99999", "\n"),  # would end the #SBATCH line: sbatch ignores the lines after
    ("--slurm-option", "mem=8G\r", "\r"),
    ("--slurm-option", "qos=high\tlow", "\t"),
    ("--slurm-partition", "gpu\n", "\n"),
    ("--slurm-partition", "gpu\x00cpu", "\x00"),
])
def test_sbatch_values_with_control_characters_are_refused_naming_them(flag, value, bad, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(flag, value)
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in error
    assert f"argument {flag}: {value!r} has {bad!r} in it; a value for sbatch is one line of printable characters" in error


def test_other_sbatch_options_pass_through_as_submitit_parameters():
    from experiments.frame.slurm import SlurmSettings

    args = parse("--slurm-option", "account=lab", "--slurm-option", "mem-per-cpu=4G")
    settings = SlurmSettings(options=dict(args.slurm_option))
    assert settings.executor_parameters()["additional_parameters"] == {"account": "lab", "mem_per_cpu": "4G"}


def test_slurm_where_there_is_none_says_what_is_missing(monkeypatch, capsys):
    monkeypatch.setenv("PATH", "")  # no scontrol, sbatch or sacct
    with pytest.raises(SystemExit) as exit_info:
        launch.run_stages({"training": []}, parse("--launcher", "slurm"))
    assert "needs Slurm's commands" in str(exit_info.value.code)


@pytest.mark.parametrize("experiment, default", [(mazes, 2_000_000), (corridor_span, 3_000_000)])
def test_quick_alone_trains_a_few_thousand_frames_not_the_full_budget(experiment, default):
    quick = experiment.make_parser().parse_args(["--quick"])
    assert run_frames(quick, default) == QUICK_FRAMES == 4_096
    assert run_frames(experiment.make_parser().parse_args([]), default) == default
    assert run_frames(experiment.make_parser().parse_args(["--quick", "--frames", "777"]), default) == 777
