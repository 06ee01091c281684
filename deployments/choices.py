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
    ENGINE_REPAIR = "engine_repair", "engine repair"


# What each kind does, needs and allows is declared in deployments.kinds.


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


# The decisions that let a change run; a rejection never does (and never expires).
GRANTS = (ApprovalDecision.APPROVED, ApprovalDecision.BREAK_GLASS)


class ApprovalLapse(models.TextChoices):
    """Why an approval does not let its change run (deployments.models.Approval.lapse)."""

    REJECTED = "rejected", "it is a rejection"
    VOIDED = "voided", "it was voided"
    EXPIRED = "expired", "it expired"


class StepStatus(models.TextChoices):
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    SKIPPED = "skipped", "skipped"


class EvaluationPhase(models.TextChoices):
    BASELINE = "baseline", "baseline (before the change)"
    AFTER = "after", "after the change"
    RESTORE = "restore", "after restoring the previous revision"
    ON_DEMAND = "on_demand", "on demand"


class EvaluationKind(models.TextChoices):
    COHERENCE = "coherence", "coherence suite"
    BENCHMARK = "benchmark", "serving benchmark"


class CheckKind(models.TextChoices):
    FACTUAL = "factual", "factual"
    ARITHMETIC = "arithmetic", "arithmetic"
    CHAT = "chat", "multi-turn chat"
    LONG_CONTEXT = "long_context", "long-context recall"
    FIVE_TOKENS = "five_tokens", "five-token prompt"
    DETERMINISM = "determinism", "greedy determinism"
    PREVIOUS_REVISION = "previous_revision", "same answers as before"


class CheckOutcome(models.TextChoices):
    PASSED = "passed", "passed"
    FAILED = "failed", "failed"
    INCONCLUSIVE = "inconclusive", "inconclusive"
    # Not run, with the reason in its detail (a long-context check on a context too small for
    # it): neither passes nor fails the suite, like inconclusive.
    SKIPPED = "skipped", "skipped"


class BenchmarkEndpoint(models.TextChoices):
    COMPLETIONS = "completions", "/v1/completions"
    CHAT = "chat", "/v1/chat/completions"


class DrainHookKind(models.TextChoices):
    COMMAND = "command", "a command on the host"
    HTTP = "http", "an HTTP call, sent from the host"


class HttpMethod(models.TextChoices):
    POST = "POST", "POST"
    PUT = "PUT", "PUT"
    DELETE = "DELETE", "DELETE"
    PATCH = "PATCH", "PATCH"
    GET = "GET", "GET"


class DrainState(models.TextChoices):
    """Where a change job left its host's place in the load balancer's rotation."""

    NONE = "", "not drained"
    DRAINING = "draining", "drain hook sent"  # written before the hook is sent
    DRAINED = "drained", "out of rotation"
    UNDRAINED = "undrained", "back in rotation"
    UNDRAIN_FAILED = "undrain_failed", "putting it back failed"
