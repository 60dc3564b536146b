"""GPU readings: nvidia-smi and NVML parsing, the poller, history and its roll-ups, process
owners, cloud instance states; the collector's timers and lock."""
