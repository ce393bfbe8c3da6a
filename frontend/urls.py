from django.urls import path

from frontend import inventory_pages, views

urlpatterns = [
    path("", views.home, name="home"),
    path("inventory/<str:kind>/", inventory_pages.inventory_list, name="inventory-list"),
    path("inventory/<str:kind>/new/", inventory_pages.inventory_edit, name="inventory-create"),
    path(
        "inventory/<str:kind>/<str:slug>/edit/",
        inventory_pages.inventory_edit,
        name="inventory-edit",
    ),
    path(
        "inventory/<str:kind>/<str:slug>/delete/",
        inventory_pages.inventory_delete,
        name="inventory-delete",
    ),
]
