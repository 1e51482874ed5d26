"""A CDI spec of a fake NVIDIA GPU: two devices ("0" and "all") that only set environment
variables, so a container given them shows which one it got and runs on any machine."""

FAKE_NVIDIA_CDI = """cdiVersion: "0.5.0"
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits:
      env: ["FAKE_GPU=0"]
  - name: all
    containerEdits:
      env: ["FAKE_GPU=all"]
containerEdits:
  env: ["FAKE_CDI=1"]
"""
