"""Reinforcement-learning baselines to compare ES against: DQN, policy gradient (single
process and MPI gradient all-reduce) and Gorila-style distributed DQN."""
