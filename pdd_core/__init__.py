"""pdd_core: the physics, decisions and data-plane agents of a PDD token factory.

A plain, typed Python library: it imports no Django, Celery or Channels, and does no I/O at
import time. The control plane imports it; it never imports the control plane.
"""

__version__ = "0.1.0"
