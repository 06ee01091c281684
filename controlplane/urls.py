from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from controlplane.accounts.views import SignInView

urlpatterns = [
    # Browsers ask for /favicon.ico whatever the page says: answer instead of logging a 404.
    path(
        "favicon.ico",
        login_not_required(RedirectView.as_view(url=static("controlplane/favicon.svg"))),
    ),
    path("login/", SignInView.as_view(), name="login"),
    path("oidc/", include("controlplane.accounts.urls")),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("audit/", include("controlplane.audit.urls")),
    path("api/v1/", include("controlplane.api.urls")),
    path("", include("controlplane.notifications.urls")),
    path("", include("controlplane.monitoring.urls")),
    path("", include("deployments.urls")),
    path("", include("deployments.rollouts.urls")),
    path("", include("hosts.urls")),
]

handler403 = "controlplane.views.permission_denied"
handler500 = "controlplane.views.server_error"
