"""The identity provider's two legs. The callback's full URL is what an administrator registers
at the provider as the redirect URI: https://<this control plane>/oidc/callback/."""

from django.urls import path

from . import views

app_name = "accounts"

urlpatterns = [
    path("start/", views.oidc_start, name="oidc_start"),
    path("callback/", views.oidc_callback, name="oidc_callback"),
]
