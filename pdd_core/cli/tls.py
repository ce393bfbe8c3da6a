"""``pdd tls``: the TLS material of a deployed data plane (its CA, a certificate per agent).

``pdd up`` makes a fresh CA per plane by itself. A plane deployed otherwise (Kubernetes:
``deploy/kubernetes/site-agents``) gets its material from this verb: it makes the CA in
``--out`` unless one is there, and issues a certificate and key for every agent of the
configuration (named by its id, for its role and host), for the WAN line and for an
``operator`` client of the line's control endpoint; with ``--site`` it writes, per site, the
files that site's agents need (the CA's certificate, never its key) into ``--out/<site>``, ready
for ``kubectl create secret generic pdd-tls-<site> --from-file=--out/<site>``. Running it
again issues new certificates under the same CA (rotation: restart the agents).
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tls",
        help="make a data plane's CA and a certificate per agent (for a deployment)",
        description="Make the CA of the data plane CONFIG in --out (unless it exists) and "
        "issue a certificate and key for every agent, the WAN line and the operator; with "
        "--by-site, also one folder per site holding only what that site's agents need.",
    )
    parser.add_argument("config", metavar="CONFIG", help="data-plane configuration (JSON)")
    parser.add_argument("--out", required=True, help="directory of the CA and certificates")
    parser.add_argument("--by-site", action="store_true", help="one folder per site too")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    from pdd_core.agent.config import load_config
    from pdd_core.agent.tls import CA_CERT, OPERATOR, issue_plane

    config = load_config(args.config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    issue_plane(out, [(a.id, a.role, a.host) for a in config.agents], config.wan.host)
    print(f"pdd tls: CA and certificates in {out} (keep ca.key there: it issues every "
          "certificate of the plane)")  # fmt: skip
    if args.by_site:
        line_site = config.of_role("gateway")[0].site
        for site in sorted({a.site for a in config.agents}):
            folder = out / site
            folder.mkdir(exist_ok=True)
            folder.chmod(0o700)
            shutil.copy(out / CA_CERT, folder / CA_CERT)
            names = [a.id for a in config.agents if a.site == site]
            names += ["wan"] if site == line_site else []
            for name in names:
                for suffix in (".crt", ".key"):
                    shutil.copy(out / f"{name}{suffix}", folder / f"{name}{suffix}")
            print(f"pdd tls: {folder}: {', '.join(names)} (kubectl -n pdd create secret "
                  f"generic pdd-tls-{site} --from-file={folder})")  # fmt: skip
        print(f"pdd tls: the operator's client certificate is {out / OPERATOR}.crt")
    return 0
