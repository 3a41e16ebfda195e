"""dcgm-exporter text for tests: one line builder and the series the utilization tests serve."""

MODEL = "NVIDIA H100 80GB HBM3"
MIG_MODEL = "NVIDIA A100-SXM4-80GB"


def dcgm_line(metric: str, value: float | str, *, gpu: str, node: str,
              namespace: str | None = None, pod: str | None = None,
              container: str | None = None, model: str = MODEL, **extra: str) -> str:
    """One exposition line in dcgm-exporter's shape (labels gpu, UUID, device,
    modelName, Hostname, and namespace/pod/container when a pod holds the GPU)."""
    labels = {"gpu": gpu, "UUID": f"GPU-{node}-{gpu}", "device": f"nvidia{gpu}",
              "modelName": model, "Hostname": node}
    if namespace is not None:
        labels["namespace"] = namespace
    if pod is not None:
        labels["pod"] = pod
        labels["container"] = container or "worker"
    labels.update(extra)
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{metric}{{{body}}} {value}"


#: What the integration tests serve, and the figures it implies (see test_utilization.py):
#:   team-a/train (4 GPUs, 2 pods x 2): 75 %, 50 %, 25 % by GPU_UTIL and 0.5 by
#:     GR_ENGINE_ACTIVE on a GPU that also reports GPU_UTIL 90 (the ratio wins) -> busy 2.0
#:   team-a/eval (1 GPU): 150 % only (impossible, dropped) -> no data
#:   team-b/mig-ft (2 MIG instances of one A100): 0.5 and 0.25 -> busy 0.75
#:   one GPU with no pod labels at 25 % -> unattributed, busy 0.25
DCGM_TEXT = "\n".join([
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 75, gpu="0", node="node-1", namespace="team-a",
              pod="train-0-x2kq9"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 50, gpu="1", node="node-1", namespace="team-a",
              pod="train-0-x2kq9"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 25, gpu="2", node="node-1", namespace="team-a",
              pod="train-1-bz7wm"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 90, gpu="3", node="node-1", namespace="team-a",
              pod="train-1-bz7wm"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 150, gpu="4", node="node-1", namespace="team-a",
              pod="eval-0-lmnpq"),
    dcgm_line("DCGM_FI_DEV_GPU_UTIL", 25, gpu="7", node="node-2"),
    "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE Ratio of time the graphics engine is active.",
    "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge",
    dcgm_line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.5, gpu="3", node="node-1",
              namespace="team-a", pod="train-1-bz7wm"),
    dcgm_line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.5, gpu="0", node="node-3",
              namespace="team-b", pod="mig-ft-0-q8wzt", model=MIG_MODEL,
              GPU_I_ID="1", GPU_I_PROFILE="1g.10gb"),
    dcgm_line("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.25, gpu="0", node="node-3",
              namespace="team-b", pod="mig-ft-0-q8wzt", model=MIG_MODEL,
              GPU_I_ID="2", GPU_I_PROFILE="1g.10gb"),
    "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).",
    "# TYPE DCGM_FI_DEV_FB_USED gauge",
    dcgm_line("DCGM_FI_DEV_FB_USED", 40960, gpu="0", node="node-1", namespace="team-a",
              pod="train-0-x2kq9"),
    "",
])
