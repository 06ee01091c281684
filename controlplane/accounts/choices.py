from django.db import models


class Role(models.TextChoices):
    """What a person may do, everywhere or on one host group's hosts. Not a ladder: an approver
    is not an operator. Every role reads what it may act on."""

    VIEWER = "viewer", "viewer (reads)"
    OPERATOR = "operator", "operator (probes, requests changes)"
    APPROVER = "approver", "approver (approves other people's changes)"
