#!/usr/bin/env python3
"""ablation-table.py: print the ablation's Markdown table (docs/results.md,
"DynaINA's ablation") from the compare.json files that scripts/ablation.sh
writes.

    scripts/ablation-table.py [DIR]    default DIR: docs/results/ablation

One block of rows per regime directory DIR/REGIME/compare.json (of any
number of seeds), in the order below (regimes not run are left out): JCT mean and p95 in seconds
(mean ± 95 % half-width where the seeds differ, the best in bold), and
the mean share of the switch reserved, the share of that in use, and the
PS-path fraction.
"""
import json
import os
import sys

REGIMES = ["tight-locked", "tight-staggered", "ample", "duty", "late-heavy", "long",
           "cluster-tight", "esa-stragglers"]
POLICIES = ["freeina", "atp", "esa", "switchml", "dynaina-pools", "dynaina-sched",
            "dynaina", "dynaina-lend"]
ROWS = [("jct_mean_s", "JCT mean (s)", "s"), ("jct_p95_s", "JCT p95 (s)", "s"),
        ("mem_util_mean", "reserved, mean", "%"), ("mem_in_use_share", "reserved in use", "%"),
        ("ps_path_fraction", "PS path", "%")]


def cell(v, kind, spread):
    if kind == "%":
        return "%.1f %%" % (100 * v["mean"])
    if spread:
        return "%.3f ± %.3f" % (v["mean"], v["ci95"])
    return "%.3f" % v["mean"]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "docs/results/ablation"
    print("| regime | metric | " + " | ".join(POLICIES) + " |")
    print("|---|---|" + "---|" * len(POLICIES))
    for regime in REGIMES:
        path = os.path.join(root, regime, "compare.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            d = json.load(f)
        rows = {r["metric"]: r["values"] for r in d["rows"]}
        for vals in rows.values():  # one seed: plain values
            for p, v in vals.items():
                if not isinstance(v, dict):
                    vals[p] = {"mean": v, "ci95": 0}
        for i, (metric, label, kind) in enumerate(ROWS):
            vals = rows[metric]
            spread = any(v.get("ci95", 0) > 0 for v in vals.values())  # none without jitter
            cells = [cell(vals[p], kind, spread) if p in vals else "—" for p in POLICIES]
            if kind == "s":  # the best of the row, as printed, in bold
                shown = [float(c.split()[0]) for c in cells if c != "—"]
                best = min(shown)
                cells = ["**%s**" % c if c != "—" and float(c.split()[0]) == best else c for c in cells]
            name = "`%s`" % regime if i == 0 else ""
            print("| %s | %s | %s |" % (name, label, " | ".join(cells)))


if __name__ == "__main__":
    main()
