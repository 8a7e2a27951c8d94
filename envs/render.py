"""Draw a `Scene` (scene.py) with pygame: an RGB array ("rgb_array") or a window ("human").

Every env hands its state over as a `Scene`, so this module knows no env's rules. A frame is the
tile grid, `cell_px` pixels a cell, with a status bar under it:

    +------------------------------+
    | tiles, view highlight, agent |  rows * cell_px
    +------------------------------+
    | [swatch] target    caption   |  status_px
    +------------------------------+
              cols * cell_px

Each tile code is drawn once, at the cell size, and cached as a Surface; so are the view
highlight and the agent's sprites. Drawing a frame is only blits and the status text.
"""

from __future__ import annotations

import os

import numpy as np

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
import pygame  # noqa: E402  (after the variable that silences pygame's banner)

from envs.scene import COLOUR_NAMES, DOOR, FLOOR, GOAL, NUM_TILES, OBJECT, RENDER_MODES, WALL, Scene  # noqa: E402

RGB = tuple[int, int, int]

# The scene's colour names as RGB; COLOUR_RGB[c] is colour index c.
COLOURS: dict[str, RGB] = {
    "red": (230, 40, 40),
    "green": (40, 190, 60),
    "blue": (50, 100, 240),
    "yellow": (240, 220, 40),
    "magenta": (230, 60, 230),
    "cyan": (40, 220, 230),
    "orange": (250, 140, 20),
    "purple": (120, 50, 190),
}
assert set(COLOURS) == set(COLOUR_NAMES), f"COLOURS {sorted(COLOURS)} must name exactly {COLOUR_NAMES}"
COLOUR_RGB: list[RGB] = [COLOURS[name] for name in COLOUR_NAMES]

FLOOR_COLOUR: RGB = (40, 40, 46)
GRID_COLOUR: RGB = (60, 60, 68)  # one-pixel cell borders on the floor
WALL_COLOUR: RGB = (130, 130, 135)
MORTAR_COLOUR: RGB = (90, 90, 95)
GOAL_COLOUR: RGB = (255, 200, 0)
FRAME_COLOUR: RGB = (15, 15, 15)  # door frames, agent outline
AGENT_COLOUR: RGB = (255, 255, 255)
HIGHLIGHT = (255, 255, 200, 60)  # RGBA tint over the cells the agent observes
HIGHLIGHT_EDGE = (255, 255, 160, 170)
STATUS_COLOUR: RGB = (15, 15, 18)
TEXT_COLOUR: RGB = (225, 225, 225)


def make_tile(code: int, px: int) -> pygame.Surface:
    """The picture of one tile code in a px x px cell (drawn once per renderer, then cached)."""
    tile = pygame.Surface((px, px))
    tile.fill(FLOOR_COLOUR)
    pygame.draw.rect(tile, GRID_COLOUR, tile.get_rect(), 1)
    centre = (px // 2, px // 2)
    if code == WALL:
        tile.fill(WALL_COLOUR)
        pygame.draw.rect(tile, MORTAR_COLOUR, tile.get_rect(), max(1, px // 16))
    elif code == GOAL:  # a ring with a dot: a target on the floor
        pygame.draw.circle(tile, GOAL_COLOUR, centre, px * 0.38, width=max(2, px // 10))
        pygame.draw.circle(tile, GOAL_COLOUR, centre, px * 0.12)
    elif OBJECT <= code < DOOR:  # a ball lying on the floor
        pygame.draw.circle(tile, COLOUR_RGB[code - OBJECT], centre, px * 0.4)
    elif DOOR <= code < NUM_TILES:  # a door fills its cell, inside a dark frame
        tile.fill(COLOUR_RGB[code - DOOR])
        pygame.draw.rect(tile, FRAME_COLOUR, tile.get_rect(), max(2, px // 8))
    elif code != FLOOR:
        raise ValueError(f"unknown tile code {code}; scene.py defines codes 0 .. {NUM_TILES - 1}")
    return tile


def make_agent(heading: int | None, px: int) -> pygame.Surface:
    """The agent in a transparent px x px cell: a triangle pointing along `heading`, else a disc."""
    sprite = pygame.Surface((px, px), pygame.SRCALPHA)
    outline = max(1, px // 16)
    if heading is None:
        centre = (px // 2, px // 2)
        pygame.draw.circle(sprite, AGENT_COLOUR, centre, px * 0.25)
        pygame.draw.circle(sprite, FRAME_COLOUR, centre, px * 0.25, width=outline)
        return sprite
    m = px * 0.15  # margin to the cell's edge
    points = [(px / 2, m), (px - m, px - m), (m, px - m)]  # pointing up (heading 0)
    pygame.draw.polygon(sprite, AGENT_COLOUR, points)
    pygame.draw.polygon(sprite, FRAME_COLOUR, points, width=outline)
    return pygame.transform.rotate(sprite, -90 * heading)  # headings turn clockwise; exact at 90°


def make_highlight(px: int) -> pygame.Surface:
    """A translucent tint with a brighter edge, laid over each cell the agent observes."""
    overlay = pygame.Surface((px, px), pygame.SRCALPHA)
    overlay.fill(HIGHLIGHT)
    pygame.draw.rect(overlay, HIGHLIGHT_EDGE, overlay.get_rect(), max(1, px // 16))
    return overlay


def load_font(size: int) -> pygame.font.Font | None:
    """pygame's bundled default font, or None where fonts are unavailable (then no text is drawn)."""
    try:
        pygame.font.init()
        return pygame.font.Font(None, size)
    except (pygame.error, OSError, ImportError, NotImplementedError):
        return None


class Renderer:
    """Draws scenes of any shape; "rgb_array" returns each frame, "human" shows it in a window.

    `tiles` caches one Surface per tile code, filled on first use: a frame never redraws a tile.
    """

    def __init__(self, render_mode: str, fps: int, cell_px: int = 32):
        if render_mode not in RENDER_MODES:
            raise ValueError(f"unknown render_mode {render_mode!r}; choose from {RENDER_MODES}")
        if cell_px < 4:
            raise ValueError(f"cell_px must be at least 4, got {cell_px}")
        self.render_mode = render_mode
        self.fps = fps
        self.cell_px = cell_px
        self.status_px = cell_px * 3 // 2  # room for two lines of text
        self.tiles: dict[int, pygame.Surface] = {}
        self._agents: dict[int | None, pygame.Surface] = {}
        self._highlight = make_highlight(cell_px)
        self._font = load_font(max(10, cell_px * 5 // 8))
        self._canvas: pygame.Surface | None = None  # the frame, sized for the last scene's grid
        self._window: pygame.Surface | None = None
        self._clock: pygame.time.Clock | None = None

    def frame_size(self, grid_shape: tuple[int, int]) -> tuple[int, int]:
        """(height, width) in pixels of the frame for a (rows, cols) tile grid."""
        rows, cols = grid_shape
        return rows * self.cell_px + self.status_px, cols * self.cell_px

    def draw(self, scene: Scene) -> np.ndarray | None:
        """Draw one scene. rgb_array: returns the (H, W, 3) uint8 frame; human: shows it, None."""
        height, width = self.frame_size(scene.tiles.shape)
        if self._canvas is None or self._canvas.get_size() != (width, height):
            self._canvas = pygame.Surface((width, height))
        self._draw_grid(scene)
        self._draw_status(scene)
        if self.render_mode == "rgb_array":
            frame = pygame.surfarray.array3d(self._canvas)  # (W, H, 3): pygame indexes x first
            return np.ascontiguousarray(frame.transpose(1, 0, 2))  # (H, W, 3)
        self._show()
        return None

    def _draw_grid(self, scene: Scene) -> None:
        px = self.cell_px
        canvas = self._canvas
        rows, cols = scene.tiles.shape
        blits = []
        for r in range(rows):
            for c in range(cols):
                blits.append((self._tile(int(scene.tiles[r, c])), (c * px, r * px)))
        blits.extend((self._highlight, (c * px, r * px)) for r, c in scene.view)
        if scene.heading not in self._agents:
            self._agents[scene.heading] = make_agent(scene.heading, px)
        row, col = scene.agent
        blits.append((self._agents[scene.heading], (col * px, row * px)))
        canvas.blits(blits, doreturn=False)

    def _tile(self, code: int) -> pygame.Surface:
        if code not in self.tiles:
            self.tiles[code] = make_tile(code, self.cell_px)
        return self.tiles[code]

    def _draw_status(self, scene: Scene) -> None:
        """The bar under the grid: the target colour (swatch and name), then the caption.

        Both go on one line when they fit, else on two.
        """
        width, height = self._canvas.get_size()
        top = height - self.status_px
        self._canvas.fill(STATUS_COLOUR, (0, top, width, self.status_px))
        if self._font is None:
            return
        pad = self.cell_px // 4
        line_px = self._font.get_linesize()
        caption = self._font.render(scene.caption, True, TEXT_COLOUR)
        if scene.target is None:
            self._canvas.blit(caption, (pad, top + (self.status_px - line_px) // 2))
            return
        name = self._font.render(f"target {COLOUR_NAMES[scene.target]}", True, TEXT_COLOUR)
        swatch = pygame.Rect(0, 0, line_px, line_px)
        target_px = swatch.width + pad // 2 + name.get_width()
        if pad + target_px + 2 * pad + caption.get_width() <= width:
            y = top + (self.status_px - line_px) // 2
            caption_at = (pad + target_px + 2 * pad, y)
        else:
            y = top + (self.status_px - 2 * line_px) // 2
            caption_at = (pad, y + line_px)
        swatch.topleft = (pad, y)
        self._canvas.fill(COLOUR_RGB[scene.target], swatch)
        pygame.draw.rect(self._canvas, TEXT_COLOUR, swatch, 1)
        self._canvas.blit(name, (swatch.right + pad // 2, y))
        self._canvas.blit(caption, caption_at)

    def _show(self) -> None:
        """Blit the frame into the window (opened on first use, resized with the grid), then wait
        for the next tick at `fps`."""
        size = self._canvas.get_size()
        # (re)open when there is no window yet, another renderer closed it, or the grid changed shape
        window_lost = self._window is None or pygame.display.get_surface() is not self._window
        if window_lost or self._window.get_size() != size:
            try:
                pygame.display.init()
                self._window = pygame.display.set_mode(size)
            except pygame.error as error:
                raise RuntimeError(
                    f"cannot open a window ({error}); without a display, set SDL_VIDEODRIVER=dummy "
                    'or use render_mode="rgb_array"'
                ) from error
            pygame.display.set_caption("feedback-rl")
            self._clock = pygame.time.Clock()
        self._window.blit(self._canvas, (0, 0))
        pygame.event.pump()
        pygame.display.flip()
        self._clock.tick(self.fps)

    def close(self) -> None:
        """Close the window, if this renderer opened one. Fonts and other renderers are left alone."""
        if self._window is not None:
            pygame.display.quit()
            self._window = None
            self._clock = None
