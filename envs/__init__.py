"""The four memory environments of the Feedback Transformer paper, Ni et al.'s passive T-maze and
bsuite's memory length, registered with gymnasium on import. Each id has a single env
(`entry_point`) and a native batched one (`vector_entry_point`, used by `gymnasium.make_vec`).

`env_id` also takes any other registered Gymnasium id, and Gymnasium's own `module:EnvId` form
(`minigrid:MiniGrid-MemoryS7-v0`), whose module is imported first so that it registers its ids.
"""

import importlib
import sys
from collections.abc import Collection

import gymnasium
from gymnasium.envs.registration import register, registry

# Short names (as the command lines take them) -> registered ids.
ENV_IDS = {
    "corridor": "FeedbackRL/Corridor-v0",
    "maze": "FeedbackRL/Maze-v0",
    "maze_easy": "FeedbackRL/MazeEasy-v0",
    "memory_length": "FeedbackRL/MemoryLength-v0",
    "tmaze": "FeedbackRL/PassiveTMaze-v0",
    "water_maze": "FeedbackRL/WaterMaze-v0",
}

# Env packages whose `module:EnvId` ids a checkpoint may name (check_env_import): the extras we test.
KNOWN_ENV_PACKAGES = ("minigrid", "popgym")

_ENTRY_POINTS = {
    "corridor": ("envs.corridor:CorridorEnv", "envs.corridor:CorridorVectorEnv", 64),
    "maze": ("envs.maze:MazeEnv", "envs.maze:MazeVectorEnv", 200),
    "maze_easy": ("envs.maze:MazeEasyEnv", "envs.maze:MazeEasyVectorEnv", 200),
    # no registered limit: the rules of these two end every episode after length + 1 steps
    "memory_length": ("envs.memory_length:MemoryLengthEnv", "envs.memory_length:MemoryLengthVectorEnv", None),
    "tmaze": ("envs.tmaze:PassiveTMazeEnv", "envs.tmaze:PassiveTMazeVectorEnv", None),
    "water_maze": ("envs.water_maze:WaterMazeEnv", "envs.water_maze:WaterMazeVectorEnv", 200),
}

for _name, (_single, _vector, _limit) in _ENTRY_POINTS.items():
    if ENV_IDS[_name] not in registry:
        register(ENV_IDS[_name], entry_point=_single, vector_entry_point=_vector, max_episode_steps=_limit)


def env_id(name: str) -> str:
    """The id to make for a short name, a registered id or `module:EnvId` (kept whole, so that
    `gymnasium.make` imports the module wherever it runs, worker processes included); a clear
    error for anything else."""
    if name in ENV_IDS:
        return ENV_IDS[name]
    module, colon, bare = name.rpartition(":")
    if colon:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(f"env {name!r}: cannot import module {module!r} ({error}); is its package installed?") from None
    if bare in registry:
        return name
    raise ValueError(
        f"unknown env {name!r}; choose from {sorted(ENV_IDS)}, {sorted(ENV_IDS.values())} or any registered Gymnasium id "
        f"(module:EnvId imports the module that registers it first, e.g. minigrid:MiniGrid-MemoryS7-v0). "
        f"Gymnasium says: {_gymnasium_hint(bare)}"
    )


def _gymnasium_hint(bare: str) -> str:
    """Gymnasium's own message for an id it does not have, which names a renamed version
    ("Please use `Taxi-v4` instead.") or a near name ("Did you mean: `CartPole`?")."""
    try:
        gymnasium.spec(bare)
    except gymnasium.error.Error as error:
        return str(error)
    raise AssertionError(f"{bare!r} is not in the registry, yet gymnasium.spec found it")


def check_env_import(name: str, allowed: Collection[str] = ()) -> None:
    """Refuse an env id of the form `module:EnvId` read from a file (a checkpoint's config)
    whose module is not one the user vouched for: importing a module runs its code, so only
    known env packages (KNOWN_ENV_PACKAGES), modules already imported, and the modules in
    `allowed` (the user's --env-module) may be imported from a file. A ValueError saying how to
    allow it."""
    module, colon, _ = name.rpartition(":")
    if not colon or module.split(".")[0] in KNOWN_ENV_PACKAGES or module in sys.modules or module in allowed:
        return
    raise ValueError(f"the env {name!r} would import module {module!r}, which runs its code; only {list(KNOWN_ENV_PACKAGES)} "
                     f"and modules named with --env-module are imported from a checkpoint. If you trust it: --env-module {module}")


def is_native(name: str) -> bool:
    """Whether `name` (short name or id) is one of ours, with a native vector env and an oracle."""
    return name in ENV_IDS or name in ENV_IDS.values()


def short_name(name: str) -> str:
    """A name for folders: ours by their short name, others by their id made path-safe."""
    native = next((short for short, full in ENV_IDS.items() if name in (short, full)), None)
    return native or name.replace(":", "-").replace("/", "-")
