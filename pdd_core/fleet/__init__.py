"""Fleet scale: several sites, models and tenants planned together (issue #29).

``spec`` reads a fleet file, ``traffic`` generates its day, ``demand`` splits it into
(model, region) demands with their planner inputs, ``plan`` runs the phases (day, analytic
screen, inventory allocation, per-demand search and full-rate sizing: ``scale``) through a
``fanout`` mapper, and ``report`` prints the result.
"""

from pdd_core.fleet.fanout import Mapper, process_map, serial_map
from pdd_core.fleet.plan import plan_fleet
from pdd_core.fleet.spec import FleetSpec, is_fleet, load_fleet

__all__ = [
    "FleetSpec",
    "Mapper",
    "is_fleet",
    "load_fleet",
    "plan_fleet",
    "process_map",
    "serial_map",
]
