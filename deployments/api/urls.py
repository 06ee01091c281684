"""Deployments, the model catalog and change requests, in the `api` namespace."""

from django.urls import URLPattern, path

from controlplane.api.views.base import endpoint

from . import rollouts, views

urlpatterns: list[URLPattern] = [
    # deployments and the model catalog
    path("deployments/", endpoint(views.DeploymentList), name="deployment-list"),
    path("deployments/<int:pk>/", endpoint(views.DeploymentDetail), name="deployment-detail"),
    path(
        "deployments/<int:pk>/revisions/",
        endpoint(views.RevisionList),
        name="deployment-revision-list",
    ),
    path(
        "deployments/<int:pk>/revisions/<int:number>/evaluations/",
        endpoint(views.RevisionEvaluationList),
        name="revision-evaluation-list",
    ),
    path(
        "benchmark-profiles/", endpoint(views.BenchmarkProfileList), name="benchmark-profile-list"
    ),
    path(
        "benchmark-profiles/<int:pk>/",
        endpoint(views.BenchmarkProfileDetail),
        name="benchmark-profile-detail",
    ),
    path("drain-hooks/", endpoint(views.DrainHookList), name="drain-hook-list"),
    path("models/", endpoint(views.ModelList), name="model-list"),
    path("models/<int:pk>/", endpoint(views.ModelDetail), name="model-detail"),
    # change requests
    path("changes/", endpoint(views.ChangeList), name="change-list"),
    path("changes/<int:pk>/", endpoint(views.ChangeDetail), name="change-detail"),
    path("changes/<int:pk>/approve/", endpoint(views.ChangeApprove), name="change-approve"),
    path("changes/<int:pk>/reject/", endpoint(views.ChangeReject), name="change-reject"),
    path(
        "changes/<int:pk>/break-glass/",
        endpoint(views.ChangeBreakGlass),
        name="change-break-glass",
    ),
    path("changes/<int:pk>/cancel/", endpoint(views.ChangeCancel), name="change-cancel"),
    # rollouts
    path("rollouts/", endpoint(rollouts.RolloutList), name="rollout-list"),
    path("rollouts/<int:pk>/", endpoint(rollouts.RolloutDetail), name="rollout-detail"),
    path("rollouts/<int:pk>/approve/", endpoint(rollouts.RolloutApprove), name="rollout-approve"),
    path("rollouts/<int:pk>/reject/", endpoint(rollouts.RolloutReject), name="rollout-reject"),
    path("rollouts/<int:pk>/pause/", endpoint(rollouts.RolloutPause), name="rollout-pause"),
    path("rollouts/<int:pk>/resume/", endpoint(rollouts.RolloutResume), name="rollout-resume"),
    path("rollouts/<int:pk>/abort/", endpoint(rollouts.RolloutAbort), name="rollout-abort"),
]
