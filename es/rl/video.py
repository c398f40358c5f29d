"""Headless videos of a policy playing one episode, for ``es-eval --video PATH``.

Gymnasium's ``RecordVideo`` needs moviepy and names its own files in a folder; we want one file
at the path the user gave, so frames from ``env.render()`` go straight to imageio: ``.mp4`` as
H.264 through the ffmpeg binary that imageio-ffmpeg bundles, ``.gif`` through Pillow. A video
has one frame after ``reset`` and one after each step, so ``steps + 1`` frames. Pillow merges
identical consecutive GIF frames into one longer frame, so a GIF read back may hold fewer
frames, but plays for the same time.

Atari renders in software. MuJoCo needs an OpenGL backend without a display: select it with
``MUJOCO_GL=egl`` (Mesa's EGL works on CPU-only machines) or ``MUJOCO_GL=osmesa``, set before
the first render. MuJoCo videos film through the model's tracking camera (``track``, which
follows the body's centre of mass) where the model has one: Gymnasium's default free camera
stays where the episode began, and a walking Ant leaves its frame within ~40 steps.

Rendered in software (Mesa's llvmpipe: a machine without a GPU), a 480x480 MuJoCo frame takes
~90 ms with Gymnasium's scene (shadows, reflections, 4x antialiasing): a 1,000-step episode
is 90 s of filming. ``quality="fast"`` turns the three off (~8 ms a frame on Hopper, same
bodies and camera, flatter look).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from es.core.install import install_hint

VIDEO_SUFFIXES = (".mp4", ".gif")
VIDEO_QUALITIES = ("full", "fast")
DEFAULT_FPS = 30
INSTALL_HINT = install_hint("video")


def check_video_path(path: Path | str) -> Path:
    """Raise a one-line ``ValueError`` unless ``path`` ends in a suffix we can write, and an
    ``ImportError`` naming the extra unless the libraries that write it are installed (found
    before the episodes, not after them)."""
    path = Path(path)
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise ValueError(f"video path '{path}': allowed suffixes are {', '.join(VIDEO_SUFFIXES)}")
    _imageio_v2(path.suffix.lower())  # its ImportError names the extra
    return path


def _imageio_v2(suffix: str) -> Any:
    """Import imageio (and its ffmpeg binary for mp4) only when a video is written."""
    try:
        import imageio.v2 as imageio

        if suffix == ".mp4":
            import imageio_ffmpeg  # noqa: F401
    except ImportError as error:
        raise ImportError(f"writing videos needs {error.name}: {INSTALL_HINT}") from None
    return imageio


#: The camera Gymnasium's MuJoCo locomotion models carry that follows the body ("trackcom").
TRACKING_CAMERA = "track"
#: The ``--camera`` name of Gymnasium's default free camera.
FREE_CAMERA = "free"


def camera_names(env: gym.Env) -> list[str] | None:
    """The named cameras of a MuJoCo env's model; None for an env that is not MuJoCo."""
    model = getattr(env.unwrapped, "model", None)
    if model is None or not hasattr(env.unwrapped, "mujoco_renderer"):
        return None
    import mujoco

    names = (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam))
    return [name for name in names if name]


def check_camera(env: gym.Env, name: str | None) -> str | None:
    """The camera a video of ``env`` films through: ``name``, or by default the model's
    tracking camera where it has one (else Gymnasium's own choice, None). A name the env
    lacks is a one-line ``ValueError`` listing those it has."""
    names = camera_names(env)
    if name is None:
        return TRACKING_CAMERA if names and TRACKING_CAMERA in names else None
    if names is None:
        raise ValueError(f"camera {name!r}: {env.spec.id if env.spec else 'this env'} is not a "
                         "MuJoCo env and has no cameras to choose")
    if name != FREE_CAMERA and name not in names:
        raise ValueError(f"camera {name!r}: allowed: {', '.join([FREE_CAMERA, *names])}")
    return name


def use_camera(env: gym.Env, name: str | None) -> str | None:
    """Point a MuJoCo env's renderer at ``check_camera(env, name)``'s camera (before its first
    frame); returns that camera's name."""
    chosen = check_camera(env, name)
    if chosen is not None:
        import mujoco

        env.unwrapped.mujoco_renderer.camera_id = -1 if chosen == FREE_CAMERA else \
            mujoco.mj_name2id(env.unwrapped.model, mujoco.mjtObj.mjOBJ_CAMERA, chosen)
    return chosen


def check_quality(quality: str) -> str:
    """Raise a one-line ``ValueError`` unless ``quality`` is one of ``VIDEO_QUALITIES``."""
    if quality not in VIDEO_QUALITIES:
        raise ValueError(f"video quality {quality!r}: allowed: {', '.join(VIDEO_QUALITIES)}")
    return quality


def _without_antialiasing(env: gym.Env) -> None:
    """Read when the renderer's OpenGL context is made: before a MuJoCo env's first frame."""
    env.unwrapped.model.vis.quality.offsamples = 0


def _without_shadows_and_reflections(env: gym.Env) -> None:
    """Flags of the scene a MuJoCo env's first frame made."""
    import mujoco

    scene = env.unwrapped.mujoco_renderer.viewer.scn
    for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
        scene.flags[flag] = 0


def _render(env: gym.Env) -> np.ndarray:
    """One RGB frame; a MuJoCo env without a usable OpenGL backend gets a one-line error."""
    try:
        return env.render()
    except Exception as error:
        if not hasattr(env.unwrapped, "mujoco_renderer"):
            raise
        backend = os.environ.get("MUJOCO_GL")
        raise RuntimeError(
            f"MuJoCo cannot render with MUJOCO_GL={backend!r} ({type(error).__name__}): "
            "it needs a headless OpenGL backend; set MUJOCO_GL=egl (or osmesa) before starting"
        ) from error


def _even(frame: np.ndarray) -> np.ndarray:
    """Pad height and width to even sizes (repeating the edge), as H.264 in yuv420p needs."""
    pad = [(0, frame.shape[0] % 2), (0, frame.shape[1] % 2), (0, 0)]
    return np.pad(frame, pad, mode="edge") if any(p[1] for p in pad) else frame


def gif_stride(fps: float) -> tuple[int, int]:
    """(every how many frames a GIF keeps one, its delay in hundredths of a second): a GIF's
    delays are whole hundredths, and viewers play 0 or 1 as 10. Hopper's 125 frames a second
    had become delays of 0, a film 12 times slower than the episode. The stride is the least
    that gives 2 or more, lengthened (up to 4 more) while the rounding is off by over ~10%."""
    least = max(1, math.ceil(2 * fps / 100))

    def error(stride: int) -> float:
        exact = 100 * stride / fps
        return abs(round(exact) - exact) / exact
    stride = next((k for k in range(least, least + 5) if error(k) <= 0.11),
                  min(range(least, least + 5), key=error))
    return stride, round(100 * stride / fps)


@contextmanager
def _frame_writer(path: Path, fps: float,
                  gif_delay_cs: int) -> Iterator[Callable[[np.ndarray], None]]:
    """Yield a function that appends one RGB frame to the video at ``path`` (a GIF's frames
    ``gif_delay_cs`` hundredths of a second apart)."""
    imageio = _imageio_v2(path.suffix.lower())
    if path.suffix.lower() == ".mp4":
        # macro_block_size=1: imageio would otherwise rescale frames to multiples of 16.
        with imageio.get_writer(path, format="FFMPEG", fps=fps, codec="libx264",
                                pixelformat="yuv420p", macro_block_size=1) as writer:
            yield lambda frame: writer.append_data(_even(frame))
    else:
        with imageio.get_writer(path, mode="I", duration=10 * gif_delay_cs, loop=0) as writer:
            yield writer.append_data


def record_video(
    env: gym.Env,
    act: Callable[[Any], Any],
    path: Path | str,
    seed: int,
    max_steps: int | None = None,
    fps: float | None = None,
    camera: str | None = None,
    quality: str = "full",
) -> dict[str, Any]:
    """Play one episode of ``act`` from ``env.reset(seed=seed)`` and write it to ``path``.

    ``env`` must have ``render_mode="rgb_array"``. The episode ends when it terminates, is
    truncated, or after ``max_steps`` steps. ``fps`` defaults to the env's ``render_fps``.
    ``camera``: a MuJoCo model's camera name, or "free" (default: ``check_camera``'s).
    ``quality``: "full" (Gymnasium's scene) or "fast" (a MuJoCo scene without shadows,
    reflections and antialiasing; other envs render one way).
    Returns ``{"frames", "steps", "return", "camera"}``; frames: those written, steps + 1
    (a GIF's: the first and every ``gif_stride(fps)[0]``-th step's).
    """
    path = check_video_path(path)
    if env.render_mode != "rgb_array":
        raise ValueError(f"env render_mode {env.render_mode!r}: record_video needs 'rgb_array'")
    if max_steps is not None and max_steps < 0:
        raise ValueError(f"max_steps {max_steps}: must be >= 0 or None")
    if fps is None:
        fps = env.metadata.get("render_fps") or DEFAULT_FPS
    if fps <= 0:
        raise ValueError(f"fps {fps}: must be > 0")
    fast = check_quality(quality) == "fast" and hasattr(env.unwrapped, "mujoco_renderer")
    chosen = use_camera(env, camera)
    if fast:
        _without_antialiasing(env)
    obs, _ = env.reset(seed=seed)
    frame = _render(env)  # before opening the file: a failing backend leaves no file behind
    if fast:
        _without_shadows_and_reflections(env)
        frame = _render(env)  # the same state, now without them
    path.parent.mkdir(parents=True, exist_ok=True)
    steps, total, done, written = 0, 0.0, False, 1
    stride, delay_cs = gif_stride(fps) if path.suffix.lower() == ".gif" else (1, 0)
    with _frame_writer(path, fps, delay_cs) as write:
        write(frame)
        while not done and (max_steps is None or steps < max_steps):
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            steps, total, done = steps + 1, total + float(reward), terminated or truncated
            if steps % stride == 0:
                write(_render(env))
                written += 1
    return {"frames": written, "steps": steps, "return": total, "camera": chosen}
