"""``/api/v1/`` routes."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from portal.api import fairness, views
from portal.api.jobs import JobViewSet
from portal.api.usage import UtilizationView

router = DefaultRouter()
router.register("flavors", views.FlavorViewSet, basename="flavor")
router.register("cohorts", views.CohortViewSet, basename="cohort")
router.register("teams", views.TeamViewSet, basename="team")
router.register("quota-requests", views.QuotaRequestViewSet, basename="quota-request")
router.register("jobs", JobViewSet, basename="job")

urlpatterns = [
    path("utilization/", UtilizationView.as_view(), name="utilization"),
    path("fairness/", fairness.FairnessView.as_view(), name="fairness"),
    *router.urls,
]
