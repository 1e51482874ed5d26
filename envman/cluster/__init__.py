"""Beyond one host: a registry, Slurm, and exports for Kubernetes, devcontainers and compose."""
