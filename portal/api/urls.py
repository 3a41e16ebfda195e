"""``/api/v1/`` routes."""

from rest_framework.routers import DefaultRouter

from portal.api import views
from portal.api.jobs import JobViewSet

router = DefaultRouter()
router.register("flavors", views.FlavorViewSet, basename="flavor")
router.register("cohorts", views.CohortViewSet, basename="cohort")
router.register("teams", views.TeamViewSet, basename="team")
router.register("quota-requests", views.QuotaRequestViewSet, basename="quota-request")
router.register("jobs", JobViewSet, basename="job")

urlpatterns = router.urls
