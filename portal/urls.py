"""URL routes: pages, auth, admin console, health, REST API and its OpenAPI schema."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from portal.views.dashboard import dashboard
from portal.views.health import healthz

urlpatterns = [
    path("", dashboard, name="dashboard"),
    path("healthz", healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("portal.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
