#!/usr/bin/env python3
"""Score retrysafe on the labelled development set and list every item behind the figures.

usage: eval/devset.py BIN SRC_ROOT [--labels DIR] [--jobs N] [--items FILE] [--markdown]
                      [--arg ARG ...] [--only REPO ...]

Matching follows the development set's own scorer (shared/devset/score.py, which stays the
reference for the headline figures): one run of `BIN check . --format json` per repository
folder, findings and labels deduplicated on (file, rule, line), a finding matches a label of
the same rule in the same file within 3 lines (closest first, one each), an unmatched
finding near a debatable item of its rule is excused, every other finding in a scored file
is a false positive. What this script adds: the runs in parallel, `--items` writes each true
positive, false positive and miss with the label's note (the triage list), `--markdown`
prints the per-rule table the README carries, and `--arg` passes flags (e.g. `--preview`).
Standard library only; the sources live outside the repository (see shared/devset/README.md).
"""
import argparse, collections, concurrent.futures, datetime, json, os, subprocess, sys

TOLERANCE = 3
ALIASES = {"processed-events-no-unique": "dedupe-key-not-unique"}


def load_uncovered(labels_dir):
    """The scorer's table of uncovered:* names and the rule each excuses, read from its source."""
    import ast
    text = open(os.path.join(labels_dir, "score.py")).read()
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "UNCOVERED" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def real(path):
    return os.path.normcase(os.path.realpath(path))


def run_folder(binary, folder, extra, timeout):
    try:
        proc = subprocess.run([binary, "check", ".", "--format", "json", *extra], cwd=folder,
                              capture_output=True, text=True, timeout=timeout)
        found = json.loads(proc.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        return None
    return sorted({(d["rule"], real(os.path.join(folder, d["file"])), int(d["line"]), d.get("message", ""))
                   for d in found})


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("root")
    ap.add_argument("--labels", default=os.path.join(here, "..", "..", "shared", "devset"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--items")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--arg", action="append", default=[])
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args()
    binary = os.path.abspath(a.binary) if os.sep in a.binary else a.binary
    uncovered = load_uncovered(a.labels)

    repos = collections.OrderedDict()
    for name in ("payments.json", "events-queues.json"):
        for entry in json.load(open(os.path.join(a.labels, name))):
            if a.only and entry["repo"] not in a.only:
                continue
            folder = os.path.join(os.path.abspath(a.root), entry["repo"].replace("/", "-"))
            repo = repos.setdefault(folder, {"files": set(), "labels": {}, "debatable": set()})
            repo["files"] |= {real(os.path.join(folder, p)) for p in [entry["path"], *entry.get("related_paths", [])]}
            for label in entry.get("labels", []):
                file = real(os.path.join(folder, label.get("path") or entry["path"]))
                repo["files"].add(file)
                key = (file, ALIASES.get(label["rule"], label["rule"]), int(label["line"]))
                if key not in repo["labels"] or label.get("confidence") == "high":
                    repo["labels"][key] = (label.get("confidence", "medium"), label.get("note", ""))
            for item in entry.get("debatable", []):
                if "line" in item:
                    file = real(os.path.join(folder, item.get("path") or entry["path"]))
                    for rule in {ALIASES.get(item["rule"], item["rule"]), uncovered.get(item["rule"])} - {None}:
                        repo["debatable"].add((file, rule, int(item["line"])))

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        runs = dict(zip(repos, pool.map(lambda f: run_folder(binary, f, a.arg, a.timeout), repos)))

    per_rule = collections.defaultdict(lambda: [0, 0, 0])
    items = []
    crashed = []
    for folder, repo in repos.items():
        found = runs[folder]
        if found is None:
            crashed.append(folder)
            found = []
        mine = [f for f in found if f[1] in repo["files"]]
        labels = sorted(repo["labels"])
        pairs = sorted((abs(f[2] - l[2]), i, j) for i, l in enumerate(labels) for j, f in enumerate(mine)
                       if f[0] == l[1] and f[1] == l[0] and abs(f[2] - l[2]) <= TOLERANCE)
        hit, used = {}, set()
        for _, i, j in pairs:
            if i not in hit and j not in used:
                hit[i] = j
                used.add(j)
        rel = lambda p: os.path.relpath(p, folder)
        name = os.path.basename(folder)
        for i, label in enumerate(labels):
            confidence, note = repo["labels"][label]
            kind = "tp" if i in hit else "fn"
            per_rule[label[1]][0 if kind == "tp" else 2] += 1
            items.append({"kind": kind, "repo": name, "file": rel(label[0]), "line": label[2], "rule": label[1],
                          "confidence": confidence, "note": note,
                          "message": mine[hit[i]][3] if i in hit else ""})
        for j, f in enumerate(mine):
            if j in used:
                continue
            excused = any(d[0] == f[1] and d[1] == f[0] and abs(d[2] - f[2]) <= TOLERANCE for d in repo["debatable"])
            if not excused:
                per_rule[f[0]][1] += 1
            items.append({"kind": "excused" if excused else "fp", "repo": name, "file": rel(f[1]), "line": f[2],
                          "rule": f[0], "message": f[3]})

    tp, fp, fn = (sum(v[k] for v in per_rule.values()) for k in range(3))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    if a.markdown:
        print(f"Measured {datetime.date.today()} with `eval/devset.py target/release/retrysafe /tmp/devset-src"
              f"{''.join(' --arg ' + x for x in a.arg)} --markdown` ({len(repos)} repositories, whole-repo runs).\n")
        print("| rule | tp | fp | fn | precision | recall |\n|---|---|---|---|---|---|")
        for rule, (x, y, z) in sorted(per_rule.items()):
            p = f"{x / (x + y):.2f}" if x + y else "–"
            r = f"{x / (x + z):.2f}" if x + z else "–"
            print(f"| `{rule}` | {x} | {y} | {z} | {p} | {r} |")
        print(f"| **all** | {tp} | {fp} | {fn} | **{precision:.3f}** | **{recall:.3f}** |")
    else:
        for rule, (x, y, z) in sorted(per_rule.items()):
            print(f"{rule:34s} tp={x:3d} fp={y:3d} fn={z:3d}")
    if crashed:
        print(f"crashed or timed out: {', '.join(os.path.basename(c) for c in crashed)}", file=sys.stderr)
    print(f"precision={precision:.3f} recall={recall:.3f} tp={tp} fp={fp} fn={fn}")
    if a.items:
        items.sort(key=lambda x: (x["rule"], x["kind"], x["repo"], x["file"], x["line"]))
        json.dump(items, open(a.items, "w"), indent=1)
    return 1 if crashed else 0


sys.exit(main())
