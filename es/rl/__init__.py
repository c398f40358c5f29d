"""Reinforcement learning with the strategies: policies, environments (Atari and MuJoCo
included), rollouts, the SPMD trainer, checkpoints, the progress log and TensorBoard, video,
run folders and ``es.train``."""
