"""The four memory environments of the Feedback Transformer paper, registered with gymnasium
on import. Each id has a single env (`entry_point`) and a native batched one
(`vector_entry_point`, used by `gymnasium.make_vec`)."""

from gymnasium.envs.registration import register, registry

# Short names (as the command lines take them) -> registered ids.
ENV_IDS = {
    "corridor": "FeedbackRL/Corridor-v0",
    "maze": "FeedbackRL/Maze-v0",
    "maze_easy": "FeedbackRL/MazeEasy-v0",
    "water_maze": "FeedbackRL/WaterMaze-v0",
}

_ENTRY_POINTS = {
    "corridor": ("envs.corridor:CorridorEnv", "envs.corridor:CorridorVectorEnv", 64),
    "maze": ("envs.maze:MazeEnv", "envs.maze:MazeVectorEnv", 200),
    "maze_easy": ("envs.maze:MazeEasyEnv", "envs.maze:MazeEasyVectorEnv", 200),
    "water_maze": ("envs.water_maze:WaterMazeEnv", "envs.water_maze:WaterMazeVectorEnv", 200),
}

for _name, (_single, _vector, _limit) in _ENTRY_POINTS.items():
    if ENV_IDS[_name] not in registry:
        register(ENV_IDS[_name], entry_point=_single, vector_entry_point=_vector, max_episode_steps=_limit)


def env_id(name: str) -> str:
    """The registered id for a short name or a full id; a clear error for anything else."""
    if name in ENV_IDS:
        return ENV_IDS[name]
    if name in ENV_IDS.values():
        return name
    raise ValueError(f"unknown env {name!r}; choose from {sorted(ENV_IDS)} or {sorted(ENV_IDS.values())}")
