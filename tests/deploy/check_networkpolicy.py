#!/usr/bin/env python3
"""deploy/kubernetes/networkpolicy: only Prometheus reaches the metrics port.

Renders the policy and the example overlay offline and asserts that:
  - the policy is a Kustomization, not a Component, as the docs say: an
    overlay lists it under `resources:` (which renders the app and the
    policy together) and not under `components:` (which kustomize refuses);
  - the policy selects exactly the pods that run the sidecar (the pod
    template's labels match its podSelector);
  - the sidecar's metrics containerPort is reachable only from the
    Prometheus peer (namespace and pod selectors, both required);
  - every other TCP port, and all of UDP and SCTP, stays open to every
    source, so selecting the app's pods closes nothing but the metrics port.

Usage: check_networkpolicy.py [--kustomize CMD] [--repo DIR]
Exit: 0 passed, 1 a check failed, 77 skipped (no renderer or no PyYAML).
"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_util import FAILURES, SKIP, check, find_renderer, render  # noqa: E402

MAX_PORT = 65535


def covered(rules, protocol, port, from_all):
    """Whether `port` is allowed by a rule open to every source (from_all)
    or by a rule with peers (not from_all)."""
    for rule in rules:
        if bool(rule.get("from")) == from_all:
            continue
        for p in rule.get("ports", []):
            if p.get("protocol", "TCP") != protocol:
                continue
            low = p["port"]
            high = p.get("endPort", low)
            if low <= port <= high:
                return True
    return False


def metrics_port(docs):
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        spec = d["spec"]["template"]["spec"]
        for c in spec.get("initContainers", []) + spec.get("containers", []):
            if c["name"] != "breakerd":
                continue
            for p in c.get("ports", []):
                if p.get("name") == "metrics":
                    return p["containerPort"], d["spec"]["template"]["metadata"]
    return None, None


def render_overlay(kustomize, k8s, field):
    """Renders an overlay that lists the example app under `resources:` and
    the policy under `field`; (objects, error) as render()."""
    with tempfile.TemporaryDirectory() as overlay:
        app = os.path.relpath(os.path.join(k8s, "overlays", "example-app"),
                              overlay)
        policy = os.path.relpath(os.path.join(k8s, "networkpolicy"), overlay)
        lines = ["apiVersion: kustomize.config.k8s.io/v1beta1",
                 "kind: Kustomization", "resources:", f"  - {app}"]
        if field == "resources":
            lines.append(f"  - {policy}")
        else:
            lines += [f"{field}:", f"  - {policy}"]
        with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return render(kustomize, overlay)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kustomize", default="")
    ap.add_argument("--repo", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = ap.parse_args()
    kustomize = find_renderer(args.kustomize)
    if kustomize is None:
        print("SKIPPED: no kustomize renderer")
        return SKIP
    k8s = os.path.join(args.repo, "deploy", "kubernetes")
    policies, error = render(kustomize, os.path.join(k8s, "networkpolicy"))
    check(error is None, f"networkpolicy renders ({error})")
    app, error = render(kustomize, os.path.join(k8s, "overlays", "example-app"))
    check(error is None, f"overlays/example-app renders ({error})")
    both, error = render_overlay(kustomize, k8s, "resources")
    check(error is None and
          [d["kind"] for d in both].count("NetworkPolicy") == 1 and
          [d["kind"] for d in both].count("Deployment") == 1,
          f"an overlay lists networkpolicy under resources: ({error})")
    _, error = render_overlay(kustomize, k8s, "components")
    check(error is not None,
          "networkpolicy is not a Component: under components: it fails "
          "(README.md, SECURITY.md and deploy/kubernetes say resources:)")
    nps = [d for d in policies if d["kind"] == "NetworkPolicy"]
    if not check(len(nps) == 1, "one NetworkPolicy"):
        return 1
    spec = nps[0]["spec"]
    port, template = metrics_port(app)
    if not check(port is not None, "the sidecar declares its metrics port"):
        return 1

    labels = template.get("labels", {})
    selector = spec["podSelector"].get("matchLabels", {})
    check(selector and all(labels.get(k) == v for k, v in selector.items()),
          f"podSelector {selector} selects the sidecar's pods ({labels})")
    check(spec.get("policyTypes") == ["Ingress"], "ingress only")

    rules = spec.get("ingress", [])
    check(not covered(rules, "TCP", port, from_all=True),
          f"TCP {port} (metrics) is not open to every source")
    peers = [r for r in rules if r.get("from")
             and covered([r], "TCP", port, from_all=False)]
    check(len(peers) == 1, f"one rule lets a peer reach TCP {port}")
    for rule in peers:
        for peer in rule["from"]:
            check("ipBlock" not in peer, "no ipBlock peer for the metrics port")
            check(peer.get("namespaceSelector", {}).get("matchLabels") and
                  peer.get("podSelector", {}).get("matchLabels"),
                  "the peer needs both a namespace and a pod selector "
                  "(Prometheus, not its whole namespace)")

    closed = [p for p in range(1, MAX_PORT + 1)
              if p != port and not covered(rules, "TCP", p, from_all=True)]
    check(not closed, f"every other TCP port stays open ({len(closed)} closed, "
          f"first {closed[:3]})")
    for protocol in ("UDP", "SCTP"):
        check(covered(rules, protocol, 1, True) and
              covered(rules, protocol, MAX_PORT, True) and
              covered(rules, protocol, port, True),
              f"{protocol} stays open")

    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) failed")
        return 1
    print("\nall NetworkPolicy checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
