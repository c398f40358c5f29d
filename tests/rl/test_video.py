"""Videos of a policy: readable files, frame counts and sizes, and clear errors."""

import re
import subprocess
import sys

import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
import pytest
from conftest import REPO
from PIL import Image

from es.rl.atari import make_atari_env
from es.rl.video import gif_stride, record_video


def pong(**kwargs) -> gym.Env:
    return make_atari_env("ALE/Pong-v5", render_mode="rgb_array", **kwargs)


def gif_durations_ms(path) -> list[int]:
    with Image.open(path) as image:
        durations = []
        for index in range(image.n_frames):
            image.seek(index)
            durations.append(image.info["duration"])
    return durations


def test_mp4_has_one_frame_per_step_plus_reset(tmp_path):
    path = tmp_path / "pong.mp4"
    result = record_video(pong(), lambda obs: 2, path, seed=0, max_steps=10)
    assert result == {"frames": 11, "steps": 10, "return": 0.0, "camera": None}
    frames = imageio.mimread(path, memtest=False)
    assert len(frames) == 11
    assert frames[0].shape == (210, 160, 3)


def test_gif_keeps_frame_size_and_total_duration(tmp_path):
    path = tmp_path / "nested" / "pong.gif"
    result = record_video(pong(), lambda obs: 0, path, seed=0, max_steps=10, fps=25)
    assert result["frames"] == 11
    frames = imageio.mimread(path)
    assert 1 <= len(frames) <= 11 and frames[0].shape[:2] == (210, 160)
    # Pillow merges identical consecutive frames; the playing time stays frames / fps.
    assert sum(gif_durations_ms(path)) == 11 * 40


def test_episode_end_stops_before_max_steps(tmp_path):
    env = pong(max_episode_steps=4)
    rng = np.random.default_rng(0)
    result = record_video(env, lambda obs: int(rng.integers(6)), tmp_path / "a.mp4", seed=1)
    assert result["steps"] == 4 and result["frames"] == 5
    assert len(imageio.mimread(tmp_path / "a.mp4", memtest=False)) == 5


def test_same_seed_same_video(tmp_path):
    for name in ("a.gif", "b.gif"):
        record_video(pong(), lambda obs: 3, tmp_path / name, seed=5, max_steps=20)
    np.testing.assert_array_equal(imageio.mimread(tmp_path / "a.gif"),
                                  imageio.mimread(tmp_path / "b.gif"))


def test_bad_suffix_is_refused_before_playing(tmp_path):
    with pytest.raises(ValueError, match=r"^video path 'x.avi': allowed suffixes are .mp4, .gif$"):
        record_video(pong(), lambda obs: 0, "x.avi", seed=0)


def test_env_must_render_rgb_arrays(tmp_path):
    env = make_atari_env("ALE/Pong-v5")
    with pytest.raises(ValueError, match="render_mode None: record_video needs 'rgb_array'"):
        record_video(env, lambda obs: 0, tmp_path / "a.gif", seed=0)


def test_missing_imageio_ffmpeg_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    hint = f'imageio_ffmpeg: pip install -e "{REPO}[video]"'  # the checkout's own path
    with pytest.raises(ImportError, match=re.escape(hint)):
        record_video(pong(), lambda obs: 0, tmp_path / "a.mp4", seed=0)
    assert not (tmp_path / "a.mp4").exists()


class NoGLMujocoEnv(gym.Env):
    """Stands in for a MuJoCo env whose OpenGL context cannot be created."""

    render_mode = "rgb_array"
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))
    mujoco_renderer = None

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def render(self):
        raise AttributeError("'NoneType' object has no attribute 'glGetError'")


def test_mujoco_without_opengl_says_how_to_select_a_backend(tmp_path, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    with pytest.raises(RuntimeError) as error:
        record_video(NoGLMujocoEnv(), lambda obs: obs, tmp_path / "m.gif", seed=0)
    message = str(error.value)
    assert "MUJOCO_GL='osmesa'" in message and "MUJOCO_GL=egl" in message
    assert "\n" not in message
    assert not (tmp_path / "m.gif").exists()


def test_mujoco_renders_headless_with_egl(tmp_path, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    env = gym.make("HalfCheetah-v5", render_mode="rgb_array", width=64, height=48)
    try:
        result = record_video(env, lambda obs: np.zeros(6), tmp_path / "c.mp4", seed=0,
                              max_steps=3)
    except RuntimeError as error:
        pytest.skip(str(error))
    finally:
        env.close()
    assert result["frames"] == 4
    frames = imageio.mimread(tmp_path / "c.mp4", memtest=False)
    assert len(frames) == 4 and frames[0].shape == (48, 64, 3)


@pytest.mark.parametrize("fps", [0, -5])
def test_fps_must_be_positive(tmp_path, fps):
    with pytest.raises(ValueError, match=f"fps {fps}: must be > 0"):
        record_video(pong(), lambda obs: 0, tmp_path / "a.gif", seed=0, fps=fps)


def in_frame(model, data, camera: int, point: np.ndarray, width: int, height: int) -> bool:
    """Whether ``point`` (world coordinates) projects inside a fixed camera's image: MuJoCo
    cameras look along their -z axis, ``cam_fovy`` is the vertical field of view."""
    rotation = data.cam_xmat[camera].reshape(3, 3)
    x, y, z = rotation.T @ (point - data.cam_xpos[camera])
    if z >= 0:
        return False  # behind the camera
    focal = (height / 2) / np.tan(np.radians(model.cam_fovy[camera]) / 2)
    u, v = width / 2 + focal * x / -z, height / 2 - focal * y / -z
    return 0 <= u < width and 0 <= v < height


def test_mujoco_videos_follow_the_body_over_a_whole_episode():
    """Ant pushed along x travels ~45 m in its 1,000 steps; the camera a video films through
    keeps its torso in the frame at every step (Gymnasium's default free camera stays where
    the episode began, 4 m away)."""
    from es.rl.video import use_camera

    env = gym.make("Ant-v5", render_mode="rgb_array")
    assert use_camera(env, None) == "track"
    renderer = env.unwrapped.mujoco_renderer
    camera = renderer.camera_id
    assert camera >= 0  # a model camera, not the free one
    env.reset(seed=0)
    model, data = env.unwrapped.model, env.unwrapped.data
    torso = model.body("torso").id
    start, steps, done = data.xpos[torso].copy(), 0, False
    while not done:
        data.xfrc_applied[torso, 0] = 8.0  # newtons along x
        _, _, terminated, truncated, _ = env.step(np.zeros(model.nu))
        steps, done = steps + 1, terminated or truncated
        assert in_frame(model, data, camera, data.xpos[torso], renderer.width,
                        renderer.height), steps
    assert steps == 1000 and data.xpos[torso][0] - start[0] > 20


def test_a_camera_the_model_lacks_is_one_line_naming_those_it_has():
    from es.rl.video import check_camera

    env = gym.make("Ant-v5", render_mode="rgb_array")
    assert check_camera(env, "free") == "free"
    with pytest.raises(ValueError, match=r"^camera 'side': allowed: free, track$"):
        check_camera(env, "side")
    with pytest.raises(ValueError, match="is not a MuJoCo env"):
        check_camera(pong(), "track")
    assert check_camera(pong(), None) is None


def test_a_fast_mujoco_video_films_the_same_episode_without_shadows(tmp_path, monkeypatch):
    """Same steps, return and frame size; the pictures differ (no shadow, reflection or
    antialiasing), and the scene is left that way for every frame, the first included."""
    import mujoco

    monkeypatch.setenv("MUJOCO_GL", "egl")
    videos = {}
    for quality in ("full", "fast"):
        env = gym.make("Hopper-v5", render_mode="rgb_array", width=96, height=64)
        try:
            videos[quality] = record_video(env, lambda obs: np.full(3, 0.3), tmp_path /
                                           f"{quality}.mp4", seed=0, max_steps=5,
                                           quality=quality)
        except RuntimeError as error:
            pytest.skip(str(error))
        if quality == "fast":
            scene = env.unwrapped.mujoco_renderer.viewer.scn
            assert not scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW]
            assert not scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION]
            assert env.unwrapped.model.vis.quality.offsamples == 0
        env.close()
    assert videos["fast"] == videos["full"]  # frames, steps, return, camera
    full, fast = (imageio.mimread(tmp_path / f"{q}.mp4", memtest=False) for q in ("full", "fast"))
    assert len(full) == len(fast) == 6 and full[0].shape == fast[0].shape == (64, 96, 3)
    for full_frame, fast_frame in zip(full, fast, strict=True):
        assert np.abs(full_frame.astype(int) - fast_frame.astype(int)).mean() > 0.5


def test_an_unknown_video_quality_is_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^video quality 'best': allowed: full, fast$"):
        record_video(pong(), lambda obs: 0, tmp_path / "a.gif", seed=0, quality="best")


def test_es_eval_films_fast_on_request_and_refuses_the_flag_without_a_video(tmp_path):
    from conftest import run_cli

    run_dir = tmp_path / "hopper"
    trained = run_cli(["es-train", "configs/hopper_ars.toml", "--set", "run.generations=1",
                       "--set", "es.population=4", "--set", "ars.top=2", "--set",
                       "run.best_episodes=0", "--run-dir", str(run_dir), "--quiet"])
    assert trained.returncode == 0, trained.stderr
    filmed = run_cli(["es-eval", str(run_dir), "--episodes", "1", "--video",
                      str(tmp_path / "h.mp4"), "--video-steps", "20", "--video-quality", "fast"])
    if "cannot render" in filmed.stderr:
        pytest.skip(filmed.stderr.strip())
    assert filmed.returncode == 0, filmed.stderr
    assert re.search(r"wrote \S+h\.mp4: 21 frames in [\d.]+ s, return", filmed.stdout)
    assert "--video-quality fast" not in filmed.stderr  # the hint is for full-quality videos
    refused = run_cli(["es-eval", str(run_dir), "--video-quality", "fast"])
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("--video-quality fast: only with --video")
    # Flags that would be ignored are refused in one line instead.
    refused = run_cli(["es-eval", str(run_dir), "--video-steps", "20"])
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("--video-steps 20: only with --video")
    refused = run_cli(["es-eval", str(run_dir), "--policy", "best", "--random"])
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--policy best and --random" in refused.stderr


def test_es_eval_refuses_output_paths_it_cannot_write_before_playing_an_episode(tmp_path):
    """A file where a folder must be, or a folder given as the file, was found only after
    the episodes (a traceback for --video); a missing --json folder is made, as --video's."""
    from conftest import run_cli

    run_dir = tmp_path / "run"
    trained = run_cli(["es-train", "configs/cartpole.toml", "--set", "run.generations=1",
                       "--set", "es.population=4", "--run-dir", str(run_dir), "--quiet"])
    assert trained.returncode == 0, trained.stderr
    (tmp_path / "afile").touch()
    for flags, message in [
        (["--video", f"{tmp_path}/afile/x.mp4"], f"--video '{tmp_path}/afile/x.mp4': "
         f"'{tmp_path}/afile' is a file, not a folder"),
        (["--json", f"{tmp_path}/afile/x.json"], "is a file, not a folder"),
        (["--json", str(tmp_path)], f"--json '{tmp_path}': is a folder; give a file name, "
         f"e.g. {tmp_path / 'out.json'}"),  # it said {tmp_path}/out, no suffix it takes
        (["--video", str(tmp_path)], f"e.g. {tmp_path / 'out.mp4'}"),
        (["--video", f"{tmp_path}/v.gif", "--video-steps", "-3"],
         "argument --video-steps: '-3': expected an integer >= 1"),
        # A folder that, to root, says it is writable but takes no file: a traceback after
        # the episodes, and imageio's retries of it (to another user: not writable).
        (["--video", "/proc/x.gif"], "--video '/proc/x.gif': "),
        (["--json", "/proc/x.json"], "--json '/proc/x.json': "),
    ]:
        # 10,000 episodes would take minutes: the refusal comes before the first.
        refused = run_cli(["es-eval", str(run_dir), "--episodes", "10000", *flags], timeout=60)
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    made = run_cli(["es-eval", str(run_dir), "--episodes", "1", "--json",
                    str(tmp_path / "new" / "sub" / "r.json")])
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "new" / "sub" / "r.json").is_file()


def test_es_eval_random_films_the_episode_it_evaluated(tmp_path):
    """The random policy's video played other random actions than its first episode."""
    from conftest import run_cli

    run_dir = tmp_path / "run"
    trained = run_cli(["es-train", "configs/cartpole.toml", "--set", "run.generations=1",
                       "--set", "es.population=4", "--run-dir", str(run_dir), "--quiet"])
    assert trained.returncode == 0, trained.stderr
    for seed in ("3", "4"):
        played = run_cli(["es-eval", str(run_dir), "--random", "--episodes", "1", "--seed",
                          seed, "--video", str(tmp_path / "r.gif")])
        assert played.returncode == 0, played.stderr
        evaluated = re.search(r"random policy: return ([\d.]+)", played.stdout)[1]
        filmed = re.search(r"wrote \S+: \d+ frames in [\d.]+ s, return ([\d.]+)",
                           played.stdout)[1]
        assert filmed == evaluated, played.stdout


def test_a_gif_of_a_fast_env_plays_in_real_time(tmp_path):
    """Hopper's 125 frames a second became GIF delays of 0 hundredths, which viewers play as
    10: a film 12 times slower than the episode. Every 4th frame, 3 hundredths each."""
    assert gif_stride(125) == (4, 3) and gif_stride(200 / 3) == (2, 3)
    assert gif_stride(25) == (1, 4) and gif_stride(30) == (1, 3)
    path = tmp_path / "fast.gif"
    rng = np.random.default_rng(0)
    result = record_video(pong(), lambda obs: int(rng.integers(6)), path, seed=0,
                          max_steps=40, fps=125)
    assert result["frames"] == 11 and result["steps"] == 40  # the reset's and 10 more
    durations = gif_durations_ms(path)  # Pillow merges identical frames, adding their delays
    assert sum(durations) == 11 * 30 and all(d % 30 == 0 for d in durations), durations


@pytest.mark.parametrize(("missing", "said"), [
    ("pygame", "--video: Pendulum-v1 cannot render frames: pygame is not installed"),
    ("imageio_ffmpeg", f'writing videos needs imageio_ffmpeg: pip install -e "{REPO}[video]"'),
])
def test_a_missing_video_library_is_named_before_the_episodes(tmp_path, missing, said):
    """Without the [video] extra, es-eval --video played every episode, printed their
    returns, then failed on pygame (gymnasium's words), and once that was installed, on
    imageio_ffmpeg: two rounds, each after the evaluation."""
    import es

    run_dir = tmp_path / "run"
    es.train(REPO / "configs/pendulum.toml", {"run.generations": 1, "es.population": 4,
                                              "run.eval_every": 1000}, run_dir=run_dir)
    script = ("import sys\n"
              "class Missing:\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              f"        if name.split('.')[0] == {missing!r}:\n"
              "            raise ImportError(f'No module named {name!r}', name=name)\n"
              "sys.meta_path.insert(0, Missing())\n"
              "from es.cli.start import evaluate\n"
              f"sys.argv = ['es-eval', {str(run_dir)!r}, '--episodes', '1', '--video', "
              f"{str(tmp_path / 'x.mp4')!r}]\n"
              "sys.exit(evaluate())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert said in done.stderr and done.stderr.count("\n") == 1, done.stderr
