"""URL routes: pages, auth, admin console, health, REST API and its OpenAPI schema."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.views import account, clusters, fairness, jobs, staff, teams, utilization
from portal.views.dashboard import dashboard
from portal.views.health import healthz
from portal.views.metrics import metrics

urlpatterns = [
    path("", dashboard, name="dashboard"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("teams/", teams.team_list, name="teams-page"),
    path("teams/<slug:slug>/", teams.team_detail, name="team-page"),
    path("teams/<slug:slug>/requests/<int:pk>/", teams.request_detail, name="team-request"),
    path("teams/<slug:slug>/requests/<int:pk>/withdraw/", teams.request_withdraw,
         name="team-request-withdraw"),
    path("teams/<slug:slug>/members/", teams.member_add, name="team-member-add"),
    path("teams/<slug:slug>/members/<str:username>/remove/", teams.member_remove,
         name="team-member-remove"),
    path("teams/<slug:slug>/utilization/", utilization.team_utilization,
         name="team-utilization"),
    path("teams/<slug:slug>/utilization/flags/<int:pk>/snooze/", utilization.flag_snooze,
         name="idle-flag-snooze"),
    path("staff/utilization/", utilization.staff_utilization, name="staff-utilization"),
    path("staff/utilization/flags/<int:pk>/reclaim/", utilization.flag_reclaim,
         name="idle-flag-reclaim"),
    path("jobs/", jobs.job_list, name="jobs-page"),
    path("jobs/rows.json", jobs.job_rows, name="jobs-rows"),
    path("teams/<slug:slug>/jobs/", jobs.job_list, name="team-jobs"),
    path("teams/<slug:slug>/jobs/rows.json", jobs.job_rows, name="team-jobs-rows"),
    path("teams/<slug:slug>/jobs/new/", jobs.job_new, name="job-new"),
    path("teams/<slug:slug>/jobs/validate/", jobs.job_validate, name="job-validate"),
    path("teams/<slug:slug>/jobs/<int:pk>/", jobs.job_detail, name="job-page"),
    path("teams/<slug:slug>/jobs/<int:pk>/cancel/", jobs.job_cancel_view, name="job-cancel"),
    path("teams/<slug:slug>/jobs/<int:pk>/refresh/", jobs.job_refresh_view,
         name="job-refresh"),
    path("staff/requests/", staff.review_queue, name="review-queue"),
    path("staff/fairness/", fairness.staff_fairness, name="staff-fairness"),
    path("staff/requests/<int:pk>/", staff.review_detail, name="review-detail"),
    path("staff/requests/<int:pk>/approve/", staff.review_approve, name="review-approve"),
    path("staff/requests/<int:pk>/reject/", staff.review_reject, name="review-reject"),
    path("staff/clusters/", clusters.cluster_list, name="staff-clusters"),
    path("staff/clusters/<slug:name>/objects/", clusters.cluster_objects,
         name="staff-cluster-objects"),
    path("staff/clusters/<slug:name>/objects/<int:pk>/", clusters.object_detail,
         name="staff-object-detail"),
    path("account/tokens/", account.tokens, name="account-tokens"),
    path("account/tokens/<int:pk>/revoke/", account.token_revoke_view,
         name="account-token-revoke"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    # The API's URL names live in the "api" namespace ("api:job-cancel"): DRF's router
    # names its viewset actions like the pages ("job-cancel"), and unnamespaced the
    # API's won, so the job page's Cancel form posted to the API.
    path("api/v1/", include(("portal.api.urls", "api"))),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI from drf-spectacular-sidecar's local copy (no CDN) in the portal's layout,
    # reading /api/schema/; its init script is a separate request (no inline script).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(
        url_name="api-schema", template_name="portal/api_docs.html"), name="api-docs"),
]
