"""The compiled Feedback step's interface (feedback/csrc/feedback_step.cpp): the weights cross as
C++ structs built by keyword, field for field step.LayerWeights and step.GroupWeights, so what
reaches a field is matched by name, whatever order Python's tuples list them in; a missing or
misspelt field is refused naming it. (That both compiled and Python paths compute the
reference's function: test_feedback_paths.py.)"""

import pytest
import torch

from agents.cores.feedback import compiled as feedback_compiled
from agents.cores.feedback.step import GroupWeights, LayerWeights


@pytest.fixture(scope="module")
def compiled():
    extension = feedback_compiled.extension()
    assert extension is not None, "the compiled Feedback step did not build"
    return extension


def named_tensors(fields: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """A distinct tensor per field (its value is its index), so a field given another's shows."""
    return {name: torch.full((2,), float(i)) for i, name in enumerate(fields)}


@pytest.mark.parametrize("python_type", [LayerWeights, GroupWeights])
def test_each_field_gets_the_tensor_of_its_name_in_any_order(compiled, python_type):
    given = named_tensors(python_type._fields)
    for order in (python_type._fields, python_type._fields[::-1]):
        built = getattr(compiled, python_type.__name__)(**{name: given[name] for name in order})
        for name in python_type._fields:
            assert getattr(built, name) is not None and torch.equal(getattr(built, name), given[name]), name


def test_an_absent_weight_is_none(compiled):
    given = {**named_tensors(LayerWeights._fields), "persistent_k": None, "persistent_v": None}
    built = compiled.LayerWeights(**given)
    assert built.persistent_k is None and torch.equal(built.query_w, given["query_w"])


@pytest.mark.parametrize("python_type", [LayerWeights, GroupWeights])
def test_a_missing_or_misspelt_field_is_refused_naming_it(compiled, python_type):
    given = named_tensors(python_type._fields)
    struct = getattr(compiled, python_type.__name__)
    first, last = python_type._fields[0], python_type._fields[-1]
    with pytest.raises(TypeError, match=rf"{python_type.__name__}\(\) is missing the field '{last}'"):
        struct(**{name: value for name, value in given.items() if name != last})
    misspelt = {**{name: value for name, value in given.items() if name != first}, first + "x": given[first]}
    with pytest.raises(TypeError, match=rf"{python_type.__name__}\(\) got an unknown field '{first}x'; its fields are {first}, "):
        struct(**misspelt)
    with pytest.raises(TypeError):  # keyword-only: no positional construction
        struct(*given.values())


def test_the_steps_take_keywords_only(compiled):
    """forward_steps and backward_steps name every argument (pybind11 arg names, keyword-only):
    a positional call is refused before it runs."""
    for steps in (compiled.forward_steps, compiled.backward_steps):
        with pytest.raises(TypeError, match="incompatible function arguments"):
            steps(torch.zeros(1))
        assert "*, " in steps.__doc__.splitlines()[0], steps.__doc__
