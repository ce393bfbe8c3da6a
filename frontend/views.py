"""Server-rendered pages. Reads go through the apps' selectors; writes through the API."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from controlplane.inventory import selectors


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The inventory at a glance: sites with their pools, links, chips and models."""
    pools = list(selectors.instance_pool_list())
    sites = [
        {"site": site, "pools": [p for p in pools if p.site_id == site.pk]}
        for site in selectors.site_list()
    ]
    context = {
        "sites": sites,
        "links": selectors.link_list(),
        "chips": selectors.chip_model_list(),
        "models": selectors.model_profile_list(),
    }
    return render(request, "frontend/home.html", context)
