"""What a run needs around the algorithm: launch checks, checkpoints, logs, progress display,
interrupts, the run-folder lock, memory checks, phase timers and device helpers."""
