"""Observation encoders by space: each one's widths and what it reads, flattening and encoding in
the same order, images fed to the CNN channels first and scaled to [0, 1], the Box encoder's
running statistics (saved with the weights, and what it normalises and clips by), and unsupported
spaces refused with a message naming them."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from agents.model.encoders import make_encoder
from agents.model.encoders.box import CLIP, BoxEncoder
from agents.model.encoders.composite import CompositeEncoder
from agents.model.encoders.discrete import DiscreteEncoder
from agents.model.encoders.image import ImageEncoder
from agents.model.encoders.minigrid_grid import MiniGridEncoder
from agents.model.encoders.multi_discrete import MultiDiscreteEncoder
from agents.runtime.observations import UnsupportedSpace, flat_dtype, flat_size, flatten, skipped_parts
from tests.float32 import close32

B = 5


class MissionSpace(gym.Space):
    """Stands in for MiniGrid's mission space (a plain Space of strings, matched by its name)."""

    def sample(self, mask=None, probability=None):
        return "go to the matching object"


MINIGRID = spaces.Dict({"direction": spaces.Discrete(4), "image": spaces.Box(0, 255, (7, 7, 3), np.uint8), "mission": MissionSpace()})


def encode(space, embed_dim=4, seed=0):
    """(encoder, its encoding of B sampled observations, those observations flattened)."""
    space.seed(seed)
    samples = [space.sample() for _ in range(B)]
    batch = gym.vector.utils.concatenate(space, samples, gym.vector.utils.create_empty_array(space, B))
    if space is MINIGRID:  # cells hold (object, colour, state) indices, not any byte
        batch["image"] %= np.array([11, 6, 3], dtype=np.uint8)
    flat = flatten(space, batch, B)
    encoder = make_encoder(space, embed_dim)
    return encoder, encoder(torch.as_tensor(flat)), flat


@pytest.mark.parametrize(
    "space, kind, width, columns",
    [
        (spaces.Discrete(5, start=-2), DiscreteEncoder, 4, 1),
        (spaces.MultiDiscrete([[2, 3], [4, 5]], start=[[1, 0], [-1, 2]]), MultiDiscreteEncoder, 4 * 4, 4),
        (spaces.Box(-1.0, 1.0, (3, 2)), BoxEncoder, 64, 6),
        (spaces.Box(0, 255, (12, 10, 3), np.uint8), ImageEncoder, 64, 360),
        (spaces.Box(0, 255, (40, 40), np.uint8), ImageEncoder, 64, 1600),
        (spaces.Tuple((spaces.Discrete(3), spaces.Box(0.0, 1.0, (2,)))), CompositeEncoder, 4 + 64, 3),
        (MINIGRID, CompositeEncoder, 4 + 64, 1 + 147),
    ],
)
def test_each_space_gets_its_encoder(space, kind, width, columns):
    encoder, encoded, flat = encode(space)
    assert isinstance(encoder, kind) and encoder.output_dim == width
    assert flat.shape == (B, columns) == (B, flat_size(space)) and flat.dtype == flat_dtype(space)
    assert encoded.shape == (B, width) and torch.isfinite(encoded).all()
    assert encoder(torch.as_tensor(flat)[None]).shape == (1, B, width)  # any leading dims (T, B)


@pytest.mark.parametrize(
    "space, dtype",
    [
        (spaces.Box(0, 255, (12, 10, 3), np.uint8), np.uint8),  # pixels stay bytes
        (spaces.Dict({"left": spaces.Box(0, 255, (4, 4), np.uint8), "note": spaces.Text(5)}), np.uint8),
        (spaces.MultiDiscrete([3, 4]), np.int64),
        (spaces.Box(-1.0, 1.0, (3,)), np.float32),
        (spaces.Box(0, 9, (3,), np.int64), np.float32),  # an integer Box is not bytes
        (MINIGRID, np.float32),  # pixels beside a direction: one dtype for both, exact for either
    ],
)
def test_the_flat_array_keeps_bytes_as_bytes(space, dtype):
    assert flat_dtype(space) == dtype


def test_discrete_and_multi_discrete_read_values_from_their_start():
    encoder, encoded, _ = encode(spaces.Discrete(3, start=5))
    assert torch.equal(encoder(torch.tensor([[5], [7]])), encoder.embed.weight[[0, 2]])
    multi = make_encoder(spaces.MultiDiscrete([2, 3], start=[1, -1]), 2)
    rows = multi.embedding.weight
    assert torch.equal(multi(torch.tensor([2, 1])), torch.cat([rows[1], rows[2 + 2]]))


def test_multi_discrete_table_starts_as_the_policy_table_did():
    """Our envs' 1-D MultiDiscrete: one table made first, so seeded runs start as before."""
    torch.manual_seed(0)
    table = torch.nn.Embedding(3 + 4, 4).weight
    torch.manual_seed(0)
    assert torch.equal(make_encoder(spaces.MultiDiscrete([3, 4]), 4).embedding.weight, table)


def test_composite_parts_read_their_own_columns_and_skip_text():
    space = spaces.Dict({"a": spaces.Discrete(3), "text": spaces.Text(5), "b": spaces.MultiDiscrete([2, 2])})
    encoder, encoded, flat = encode(space)
    assert skipped_parts(space) == ["observation['text']"] and flat.shape == (B, 3)
    x = torch.as_tensor(flat)
    expected = torch.cat([encoder.parts["a"](x[:, :1]), encoder.parts["b"](x[:, 1:])], dim=-1)
    assert torch.equal(encoded, expected)


def test_minigrid_view_embeds_each_channel():
    encoder, _, flat = encode(MINIGRID)
    grid = encoder.parts["image"]
    assert isinstance(grid, MiniGridEncoder) and "mission" not in encoder.parts
    assert [e.num_embeddings for e in grid.embeds] == [11, 6, 3]
    # The same box outside MiniGrid's Dict is an image of pixels.
    assert isinstance(make_encoder(MINIGRID["image"], 4), ImageEncoder)


def test_box_running_statistics_match_numpy_and_are_saved():
    encoder = make_encoder(spaces.Box(-10.0, 10.0, (3,)), 4)
    data = torch.randn(2, 50, 3) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([2.0, -3.0, 0.5])
    encoder.observe(data[0])
    encoder.observe(data[1])
    everything = data.reshape(-1, 3).numpy()
    np.testing.assert_allclose(encoder.norm.mean.numpy(), everything.mean(0), rtol=1e-5)
    np.testing.assert_allclose(encoder.norm.var.numpy(), everything.var(0), rtol=1e-4)
    assert {"norm.mean", "norm.var", "norm.count"} <= set(encoder.state_dict())
    fresh = make_encoder(spaces.Box(-10.0, 10.0, (3,)), 4)
    fresh.load_state_dict(encoder.state_dict())
    assert torch.equal(fresh(data[0]), encoder(data[0]))


def layer_input(module: torch.nn.Module, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """What `layer` receives when `module` encodes x."""
    seen = []
    hook = layer.register_forward_pre_hook(lambda _, inputs: seen.append(inputs[0].detach().clone()))
    try:
        module(x)
    finally:
        hook.remove()
    return seen[0]


def test_image_pixels_reach_the_cnn_channels_first_and_scaled_to_one():
    """An (H, W, C) image must reach the CNN as (C, H, W) in [0, 1]. Rows, columns and channels
    all differ in size here and every pixel differs, so any other permute or reshape (rows and
    columns swapped, channels read as rows) or a missing / 255 gives another input."""
    height, width, channels = 5, 7, 3
    space = spaces.Box(0, 255, (height, width, channels), np.uint8)
    images = np.random.default_rng(0).integers(0, 256, (B, height, width, channels), dtype=np.uint8)
    encoder = make_encoder(space, 4)
    by_hand = np.empty((B, channels, height, width), dtype=np.float32)
    for c in range(channels):
        for row in range(height):
            by_hand[:, c, row, :] = images[:, row, :, c]
    seen = layer_input(encoder, encoder.net, torch.as_tensor(flatten(space, images, B)))
    torch.testing.assert_close(seen, torch.from_numpy(by_hand) / 255.0, rtol=0, atol=0)


def test_box_encoder_normalises_by_its_running_statistics_and_clips():
    """The linear layer must see (x - mean) / std of everything observed, clipped to +-CLIP:
    values at the mean, 3 deviations above it, and 1,000 deviations either side (clipped).
    Without normalisation it would see the raw values; without the clip, +-1,000."""
    encoder = make_encoder(spaces.Box(-1e6, 1e6, (2,)), 4)
    generator = torch.Generator().manual_seed(0)
    data = torch.randn(2, 50, 2, generator=generator) * torch.tensor([4.0, 0.5]) + torch.tensor([2.0, -1.0])
    encoder.observe(data[0])
    encoder.observe(data[1])
    everything = data.reshape(-1, 2).double()
    mean, std = everything.mean(0), everything.std(0, unbiased=False)
    deviations = torch.tensor([[0.0, 0.0], [3.0, 3.0], [1000.0, -1000.0]], dtype=torch.float64)
    probe = (mean + deviations * std).float()
    seen = layer_input(encoder, encoder.linear, probe)
    expected = deviations.clamp(-CLIP, CLIP).float()
    # The mean and variance each sum 100 values; the normalised values are at most 3 before the clip.
    torch.testing.assert_close(seen, expected, **close32(terms=100, scale=3.0))


@pytest.mark.parametrize(
    "space, named",
    [
        (spaces.MultiBinary(3), "observation space MultiBinary(3)"),
        (spaces.Dict({"ok": spaces.Discrete(2), "bad": spaces.Graph(spaces.Discrete(2), None)}), "observation space['bad'] Graph"),
        (spaces.Text(4), "has no part the agent can read"),
    ],
)
def test_unsupported_spaces_are_refused_naming_them(space, named):
    with pytest.raises(UnsupportedSpace, match="supported: Discrete, MultiDiscrete") as error:
        make_encoder(space, 4)
    assert named in str(error.value)
