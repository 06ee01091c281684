from django.urls import URLPattern, URLResolver, path

from . import views

app_name = "monitoring"

urlpatterns: list[URLPattern | URLResolver] = [
    path("metrics", views.metrics, name="metrics"),
]
