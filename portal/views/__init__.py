"""Views of the portal's pages. Views hold no logic: they call selectors and services."""
