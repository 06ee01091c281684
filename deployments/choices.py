from django.db import models


class Engine(models.TextChoices):
    VLLM = "vllm", "vLLM"
    SGLANG = "sglang", "SGLang"


class Quantization(models.TextChoices):
    BF16 = "BF16", "BF16"
    FP8 = "FP8", "FP8"
    NVFP4 = "NVFP4", "NVFP4"
    INT4 = "INT4", "INT4"
    AWQ = "AWQ", "AWQ"
    GPTQ = "GPTQ", "GPTQ"


class ChangeKind(models.TextChoices):
    STOP = "stop", "stop"
    START = "start", "start"
    RESTART = "restart", "restart"
    REDEPLOY = "redeploy", "redeploy"
    MODEL_SWAP = "model_swap", "model swap"
    ROLLBACK = "rollback", "roll back"


# Kinds that write a new unit file (a new or earlier revision) before restarting.
REVISION_KINDS = {ChangeKind.REDEPLOY, ChangeKind.MODEL_SWAP, ChangeKind.ROLLBACK}
# Kinds that must come up healthy and coherent afterwards.
SERVING_KINDS = {ChangeKind.START, ChangeKind.RESTART} | REVISION_KINDS


class ChangeStatus(models.TextChoices):
    PENDING_APPROVAL = "pending_approval", "waiting for approval"
    REJECTED = "rejected", "rejected"
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    ROLLED_BACK = "rolled_back", "rolled back"
    DRIFTED = "drifted", "drifted"
    CANCELLED = "cancelled", "cancelled"
    INTERRUPTED = "interrupted", "interrupted"


ACTIVE_JOB_STATUSES = (ChangeStatus.QUEUED, ChangeStatus.RUNNING)
OPEN_STATUSES = (ChangeStatus.PENDING_APPROVAL, ChangeStatus.QUEUED, ChangeStatus.RUNNING)
FINAL_STATUSES = tuple(s for s in ChangeStatus if s not in OPEN_STATUSES)


class ApprovalDecision(models.TextChoices):
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    BREAK_GLASS = "break_glass", "break-glass (admin, no second person)"


class StepStatus(models.TextChoices):
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    SKIPPED = "skipped", "skipped"
