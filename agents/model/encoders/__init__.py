"""Observation encoders chosen by the env's observation space, one small module each.

    encoder = make_encoder(space, embed_dim)   # encoder(x (..., N)) -> (..., encoder.output_dim)

x is an observation flattened by agents/runtime/observations.py. By space:
- Discrete: an embedding (discrete.py);
- MultiDiscrete of any shape: one embedding per feature, concatenated (multi_discrete.py);
- Box of uint8 pixels (H, W, C <= 4) or (H, W): a small CNN (image.py);
- any other Box: running normalisation and a linear layer (box.py);
- MiniGrid's symbolic view (its Dict's 'image'): per-channel embeddings (minigrid_grid.py);
- Dict and Tuple: the parts' encodings concatenated, text parts skipped (composite.py).
Anything else raises agents.runtime.observations.UnsupportedSpace naming the space and what is supported.
"""

from __future__ import annotations

import gymnasium as gym

from agents.model.encoders.base import Encoder
from agents.model.encoders.box import BoxEncoder
from agents.model.encoders.composite import CompositeEncoder
from agents.model.encoders.discrete import DiscreteEncoder
from agents.model.encoders.image import ImageEncoder, is_image
from agents.model.encoders.minigrid_grid import MiniGridEncoder, is_minigrid_view
from agents.model.encoders.multi_discrete import MultiDiscreteEncoder
from agents.runtime.observations import SUPPORTED, UnsupportedSpace, check_space, flat_size, is_text, parts


def make_encoder(space: gym.Space, embed_dim: int) -> Encoder:
    check_space(space)
    encoder = _build(space, embed_dim)
    if encoder is None or encoder.output_dim == 0:
        raise UnsupportedSpace(f"observation space {space} has no part the agent can read (text is skipped); supported: {SUPPORTED}")
    return encoder


def _build(space: gym.Space, embed_dim: int) -> Encoder | None:
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        grid = is_minigrid_view(space)
        children = [
            (str(key), MiniGridEncoder(part) if grid and key == "image" else _build(part, embed_dim), flat_size(part))
            for key, part in parts(space)
        ]
        return CompositeEncoder(children)
    if is_text(space):
        return None
    if isinstance(space, gym.spaces.Discrete):
        return DiscreteEncoder(space, embed_dim)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return MultiDiscreteEncoder(space, embed_dim)
    return ImageEncoder(space) if is_image(space) else BoxEncoder(space)
