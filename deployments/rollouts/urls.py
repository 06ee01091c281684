from django.urls import path

from . import views

app_name = "rollouts"

urlpatterns = [
    path("rollouts/", views.rollout_list, name="list"),
    path("rollouts/new/", views.rollout_create, name="create"),
    path("rollouts/<int:pk>/", views.rollout_detail, name="detail"),
    path("rollouts/<int:pk>/approve/", views.rollout_approve, name="approve"),
    path("rollouts/<int:pk>/reject/", views.rollout_reject, name="reject"),
    path("rollouts/<int:pk>/pause/", views.rollout_pause, name="pause"),
    path("rollouts/<int:pk>/resume/", views.rollout_resume, name="resume"),
    path("rollouts/<int:pk>/abort/", views.rollout_abort, name="abort"),
]
