#!/usr/bin/env python3
"""Sums Nsight Compute's per-launch GPU times (a --csv run with gpu__time_duration.sum) by
kernel name: where a pass spends its time, largest first, with launch counts."""
import csv
import sys
from collections import defaultdict


def main(path):
    total = defaultdict(float)
    count = defaultdict(int)
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    header = next(i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r)
    cols = rows[header]
    name_i, unit_i, value_i = cols.index("Kernel Name"), cols.index("Metric Unit"), cols.index("Metric Value")
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    for r in rows[header + 1:]:
        if len(r) <= value_i:
            continue
        try:  # (lines the profiled program printed itself are not kernel rows)
            value = float(r[value_i].replace(",", ""))
        except ValueError:
            continue
        name = r[name_i].split("(")[0][:90]
        total[name] += value * scale.get(r[unit_i], 1.0)
        count[name] += 1
    grand = sum(total.values())
    print(f"{grand:.1f} us over {sum(count.values())} launches")
    for name, us in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{us:10.1f} us {100 * us / grand:5.1f}% {count[name]:5d}x  {name}")


if __name__ == "__main__":
    main(sys.argv[1])
