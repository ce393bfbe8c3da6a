"""``pdd up``'s process: the supervisor that starts a whole plane on one machine (``plane``),
the membership its sites' reconcilers change while it serves (``members``) and the reconciler
that brings a site's agents to its desired pools (``reconcile``)."""
