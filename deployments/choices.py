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
