"""Curriculum training (paper Sec. 3.4, appendix A): schedules, data, checkpoints, the loop,
torchrun data parallelism, and the train / generate stage commands."""
