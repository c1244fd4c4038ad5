#!/usr/bin/env python3
"""Every v1.36.2 conformance test, with its result on kcm up and, for a failure, its reason.

usage: bench-scripts/conformance/inventory.py [--targets FILE] JUNIT [JUNIT ...] > out.md

Reads the junit reports of conformance runs (bench-scripts/conformance.sh writes one per run;
a later report's result replaces an earlier one's for the tests it ran), the list of all 446
conformance tests (v1.36.2-conformance-tests.txt beside this script, from
`ginkgo --dry-run --focus='\\[Conformance\\]'`) and reasons.tsv (why a test fails: the first rule
whose substring is in its name). Prints markdown: counts per SIG and per reason, then one row per
failing test with the first failing assertion quoted from the report, and the tests not run.
A failure no rule explains is listed under `unclassified`: read its assertion and add a rule.
"""
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


def sig_of(name):
    m = re.match(r"\[([^\]]+)\]", name)
    return m.group(1) if m else "?"


def short(name):
    """The name less its trailing label list (`[sig-apps, Conformance]`)."""
    return re.sub(r" \[[^\[\]]*\]$", "", name)


def first_failure(text):
    """The first `[FAILED]`/`[PANICKED]` line (with what follows a bare `Expected`) and its
    `file.go:line`."""
    lines = (text or "").splitlines()
    idx = next(
        (i for i, l in enumerate(lines) if l.startswith(("[FAILED]", "[PANICKED]"))), None
    )
    if idx is None:
        return (lines[0] if lines else "").strip(), ""
    msg = lines[idx]
    if msg.startswith("[PANICKED]"):
        panic = next((l.strip() for l in lines if "runtime error" in l), "")
        msg = f"{msg}: {panic}" if panic else msg
    elif msg.strip() == "[FAILED]" or re.search(
        r"(Expected|Got:|Timed out after [\d.]+s\.|Failed after [\d.]+s\.)$", msg
    ):
        extra = []
        for l in lines[idx + 1 :]:
            if l.startswith("In ["):
                break
            if l.strip():
                extra.append(l.strip())
            if len(" ".join(extra)) > 200:
                break
        msg = msg + " " + " ".join(extra)
    loc = next((l for l in lines if l.startswith("In [")), "")
    m = re.search(r"at: (\S+?):(\d+)", loc)
    return msg.strip(), (f"{m.group(1).split('/')[-1]}:{m.group(2)}" if m else "")


def load_junit(path):
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = tc.get("name", "")
        if not name.startswith("[It] ") or tc.find("skipped") is not None:
            continue
        fail = tc.find("failure")
        if fail is None:
            fail = tc.find("error")
        if fail is None:
            out[name[5:]] = ("passed", "", "")
        else:
            msg, loc = first_failure(fail.text or fail.get("message", ""))
            out[name[5:]] = ("failed", msg, loc)
    return out


def load_reasons(path):
    rules = []
    for line in open(path):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.rstrip("\n").split("\t")
        parts += [""] * (3 - len(parts))
        rules.append((parts[0], parts[1], parts[2]))
    return rules


def md(s, n=170):
    s = s.replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= n else s[:n].rstrip() + " …"


def main(argv):
    targets_path = os.path.join(HERE, "..", "..", "..", "shared", "conformance", "targets.txt")
    if len(argv) > 2 and argv[1] == "--targets":
        targets_path, argv = argv[2], [argv[0]] + argv[3:]
    if len(argv) < 2:
        sys.exit(__doc__)
    tests = [l.rstrip("\n") for l in open(os.path.join(HERE, "v1.36.2-conformance-tests.txt"))]
    targets = set()
    if os.path.exists(targets_path):
        targets = {l.strip() for l in open(targets_path) if l.strip() and not l.startswith("#")}
    rules = load_reasons(os.path.join(HERE, "reasons.tsv"))
    results = {}
    for path in argv[1:]:
        results.update(load_junit(path))

    def reason(name):
        for sub, cat, note in rules:
            if sub in name:
                return cat, note
        return "unclassified", ""

    per_sig = collections.defaultdict(collections.Counter)
    per_reason = collections.Counter()
    failing = collections.defaultdict(list)
    not_run = []
    for name in sorted(tests, key=lambda n: (sig_of(n), n)):
        sig = sig_of(name)
        per_sig[sig]["tests"] += 1
        status, msg, loc = results.get(name, ("not run", "", ""))
        per_sig[sig][status] += 1
        if status == "failed":
            cat, note = reason(name)
            per_reason[cat] += 1
            if name in targets:
                note = f"(a target) {note}"
            failing[sig].append((name, msg, loc, cat, note))
        elif status == "not run":
            not_run.append(name)

    w = print
    w("| SIG | tests | passed | failed | not run |")
    w("|---|---|---|---|---|")
    total = collections.Counter()
    for sig in sorted(per_sig):
        c = per_sig[sig]
        total.update(c)
        w(f"| {sig} | {c['tests']} | {c['passed']} | {c['failed']} | {c['not run']} |")
    w(f"| **total** | **{total['tests']}** | **{total['passed']}** | **{total['failed']}** | "
      f"**{total['not run']}** |")
    w()
    w("| reason | failing tests |")
    w("|---|---|")
    for cat, n in per_reason.most_common():
        w(f"| {cat} | {n} |")
    for sig in sorted(failing):
        w()
        w(f"### {sig}: {len(failing[sig])} failing")
        w()
        w("| test | first failing assertion | at | reason |")
        w("|---|---|---|---|")
        for name, msg, loc, cat, note in failing[sig]:
            why = f"{cat}: {note}" if note else cat
            w(f"| {md(short(name)[len(sig) + 3:], 200)} | {md(msg)} | {loc} | {md(why, 220)} |")
    if not_run:
        w()
        w(f"### Not run ({len(not_run)})")
        w()
        for name in not_run:
            w(f"- {md(short(name), 240)}")


if __name__ == "__main__":
    main(sys.argv)
