from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from controlplane.accounts.decorators import role_required

from .models import AuditEvent


@role_required("viewer")
def history(request: HttpRequest) -> HttpResponse:
    events = AuditEvent.objects.all()[:100]
    return render(request, "audit/history.html", {"events": events})
