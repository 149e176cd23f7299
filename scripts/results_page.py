#!/usr/bin/env python3
"""Keeps docs/results.md and README.md's results table true to the CSVs (python3, stdlib only).

docs/results_manifest.json names every table of docs/results.md: its parts, and for each part the
command that produced its CSV, the CSV, the commit and the date it was measured at, the source
paths it describes and what scripts/regenerate_results.sh runs to measure it again. This script
writes each table between `<!-- table:ID -->` and `<!-- /table:ID -->` in docs/results.md from the
CSVs and the manifest, with a mark per part: "current" when no commit touching its source paths
(src/ and include/, plus the part's own benchmark files) came after its commit, else "stale:
measured N source commits ago" (changes staged under those paths count as one more commit). It then
copies the headline table into README.md between `<!-- results:begin -->` and
`<!-- results:end -->`.

  python3 scripts/results_page.py              # rewrite the tables of docs/results.md and README.md
  python3 scripts/results_page.py --check      # exit 1 if either file differs from what it would write
  python3 scripts/results_page.py --check --lenient   # ... ignoring the commit counts of the marks
                                               # (a stale table must still say stale)
  python3 scripts/results_page.py list         # the parts, fields split by \x1f (regenerate_results.sh)
  python3 scripts/results_page.py sources      # every source path a run describes
  python3 scripts/results_page.py stamp PART COMMIT DATE [--full]   # after a part is re-measured
  python3 scripts/results_page.py validate PART DIR [--full]        # a re-measured part's CSVs
  python3 scripts/results_page.py md2csv [--header a,b] [--pad] [FILE]   # markdown table -> CSV
  python3 scripts/results_page.py txt2csv --header a,b [--skip N] [FILE] # whitespace table -> CSV
  python3 scripts/results_page.py fuzz2csv [FILE]   # fuzz_inputs summary lines -> CSV
  python3 scripts/results_page.py fsdp2wide [FILE]  # bench_fsdp's P = 1 rows -> wide_memory's CSV

The marks depend on the git history: a commit that touches src/ or include/ changes the count of
every table. Stage such a change (git add), run this script, and commit the change with the page
and README in one commit: staged changes count as the commit they will be (unstaged ones do not).
`--check --lenient` passes as long as every table that is stale says so, whatever its count. In a
clone that lacks a measurement commit (shallow), the mark says so and --check ignores the counts.
"""
import csv
import io
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "docs", "results_manifest.json")
PAGE = os.path.join(ROOT, "docs", "results.md")
README = os.path.join(ROOT, "README.md")


# ---- git -------------------------------------------------------------------------------------

def git(*args):
    p = subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def has_commit(commit):
    return git("cat-file", "-e", commit + "^{commit}") is not None


def source_paths(manifest, part):
    return manifest["source_paths"] + part.get("sources", [])


def staleness(manifest, part, cache={}):
    """Source commits after the part's commit (+1 for uncommitted changes), None if unknown."""
    paths = source_paths(manifest, part)
    key = (part["commit"], tuple(paths))
    if key not in cache:
        if not has_commit(part["commit"]):
            cache[key] = None
        else:
            n = int(git("rev-list", "--count", part["commit"] + "..HEAD", "--", *paths) or 0)
            staged = subprocess.run(["git", "-C", ROOT, "diff", "--cached", "--quiet", "--", *paths])
            cache[key] = n + (1 if staged.returncode == 1 else 0)
    return cache[key]


def mark(manifest, part):
    n = staleness(manifest, part)
    if n is None and part["commit"].endswith("+dirty"):
        return f"stale?: measured on uncommitted changes on top of {part['commit'][:-6]}"
    if n is None:
        return f"stale? measured at {part['commit']}, which this clone lacks"
    if n == 0:
        return "current: no source commit since"
    return f"**stale: measured {n} source commit{'s' if n != 1 else ''} ago**"


def short_mark(manifest, parts):
    counts = [staleness(manifest, p) for p in parts]
    if any(c is None for c in counts):
        return "stale?"
    worst = max(counts)
    return "current" if worst == 0 else f"**stale ({worst})**"


# ---- data ------------------------------------------------------------------------------------

def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)


def parts_by_id(manifest):
    return {p["id"]: p for t in manifest["tables"] for p in t["parts"]}


def csv_paths(part):
    c = part["csv"]
    return c if isinstance(c, list) else [c]


CSV_OVERRIDE = {}  # docs path -> a re-measured CSV not yet in place (validate)


def read_csv(path):
    with open(CSV_OVERRIDE.get(path, os.path.join(ROOT, path)), newline="") as f:
        return list(csv.DictReader(f))


def rows(part, i=0):
    return read_csv(csv_paths(part)[i])


def num(s):
    """A number from a cell as printed ('20.8x', '0.25x', '1,234', '3.1%'), None if none."""
    if s is None:
        return None
    m = re.search(r"[-+−]?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?", str(s))
    return float(m.group(0).replace(",", "").replace("−", "-")) if m else None


def rng(values, fmt="{:.2f}", unit="×"):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    a, b = fmt.format(lo), fmt.format(hi)
    return f"{a}{unit}" if a == b else f"{a}–{b}{unit}"


def g(x, digits=3):
    return "–" if x is None else f"{x:.{digits}g}"


def md_row(cells):
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def md_table(header, body):
    return [md_row(header), "|" + "---|" * len(header)] + [md_row(r) for r in body]


# ---- table renderers: (manifest, table, [(label, part)]) -> markdown lines ------------------------

def family(case):
    """The network of a reference case: acasxu_1_1_prop_3 -> acasxu_1_1."""
    return re.sub(r"(_prop_.*|_img\d+|_idx_\d+|_(4021|9907))$", "", case)


def span(cells, fmt=None):
    """'a' or 'a–b' over printed numbers (kept as printed unless fmt is given)."""
    vals = sorted((num(c), c) for c in cells if num(c) is not None)
    if not vals:
        return "–"
    lo, hi = vals[0], vals[-1]
    a, b = (fmt.format(lo[0]), fmt.format(hi[0])) if fmt else (lo[1], hi[1])
    return a if a == b else f"{a}–{b}"


def worst(cells):
    vals = [(num(c), c) for c in cells if num(c) is not None]
    return max(vals)[1] if vals else "–"


def fraction_sum(cells):
    """'0/10', '0/20' -> '0/30'."""
    a = sum(int(c.split("/")[0]) for c in cells)
    b = sum(int(c.split("/")[1]) for c in cells)
    return f"{a}/{b}"


def grouped(parts, key="case"):
    out = {}
    for label, p in parts:
        for r in rows(p):
            out.setdefault((family(r[key]), label), []).append(r)
    return out


def render_agreement(m, t, parts):
    body = []
    for (fam, label), rs in grouped(parts).items():
        ibp = [r for r in rs if r["method"] == "ibp"]
        crown = [r for r in rs if r["method"] == "crown"]
        failed = sum(1 for r in ibp if r["median_s"].startswith("NumericError"))
        body.append([fam, len(crown),
                     "not finite (exp overflows)" if failed else worst(r["max_rel_dev"] for r in ibp),
                     worst(r["max_rel_dev"] for r in crown), span(r["median_s"] for r in crown),
                     span(r["auto_lirpa_s"] for r in crown), span(r["speedup"] for r in crown),
                     span(r["peak_mb"] for r in crown), label])
    return md_table(["network", "cases", "IBP max rel. dev.", "CROWN max rel. dev.", "CROWN s",
                     "auto_LiRPA CROWN s (recorded)", "speed-up", "CROWN peak MB", "run"], body)


def render_alpha(m, t, parts):
    body = []
    for (fam, label), rs in grouped(parts).items():
        body.append([fam, len(rs), span(r["time_s"] for r in rs),
                     fraction_sum(r["looser"] for r in rs), worst(r["worst_rel_looser"] for r in rs),
                     fraction_sum(r["tighter"] for r in rs),
                     sum(int(r["looser_than_crown"]) for r in rs),
                     sum(int(r["unsound"]) for r in rs), label])
    return md_table(["network", "cases", "time s", "bounds looser than ref by > 1e-3·|ref|",
                     "worst rel. looser", "tighter than ref", "looser than CROWN", "unsound",
                     "run"], body)


def render_vs_auto_lirpa(m, t, parts):
    body = []
    for _, p in parts:
        by_case = {}
        for r in rows(p):
            by_case.setdefault(r["case"], {})[r["method"]] = r
        cell = lambda r: (f"{r['distcrown_s']} / {r['auto_lirpa_here_s']} = {r['ratio']}"  # noqa
                          if r else "–")
        for case, ms in by_case.items():
            body.append([case, cell(ms.get("crown")), cell(ms.get("alpha_crown"))])
    return md_table(["case", "CROWN s, ours / auto_LiRPA's", "α-CROWN s, ours / auto_LiRPA's"],
                    body)


def benchmark_groups(part):
    """benchmark -> rows of a bench_vnncomp per-instance CSV."""
    out = {}
    for r in rows(part):
        out.setdefault(r["benchmark"], []).append(r)
    return out


def verify_groups(part):
    """(benchmark, model group) -> rows of a bench_vnncomp per-instance CSV."""
    out = {}
    for r in rows(part):
        model = os.path.splitext(os.path.basename(r["model"]))[0]
        key = (r["benchmark"], "acasxu_* (45 nets)" if r["benchmark"].startswith("acasxu")
               else model)
        out.setdefault(key, []).append(r)
    return out


def verify_counts(rs, got="got"):
    c = lambda v: sum(1 for r in rs if r[got] == v)  # noqa: E731
    return dict(n=len(rs), sat=c("sat"), unsat=c("unsat"), solved=c("sat") + c("unsat"),
                timeout=c("timeout"), other=len(rs) - c("sat") - c("unsat") - c("timeout"))


def render_verify(m, t, parts):
    body = []
    for label, p in parts:
        for (bench, model), rs in verify_groups(p).items():
            c = verify_counts(rs)
            caps = sorted({num(r["timeout_used"]) for r in rs})
            cap = "/".join(f"{x:g}" for x in caps)
            body.append([bench, model, c["n"], c["solved"], c["sat"], c["unsat"], c["timeout"],
                         c["other"], sum(int(r["wrong"]) for r in rs),
                         f"{sum(float(r['seconds']) for r in rs):.1f}", cap, label])
    return md_table(["benchmark", "model", "n", "solved", "sat", "unsat", "timeout",
                     "unknown/error", "wrong", "time s, all", "timeout s", "run"], body)


def render_vs_abcrown(m, t, parts):
    body = []
    for label, p in parts:
        groups = {}
        for r in rows(p):
            model = os.path.splitext(os.path.basename(r["model"]))[0]
            model = "acasxu_*" if r["benchmark"] == "acasxu" else model
            model += p.get("model_suffix", "")
            groups.setdefault(model, []).append(r)
        for model, rs in groups.items():
            ours, theirs = verify_counts(rs, "distcrown_result"), verify_counts(rs, "abcrown_result")
            both_open = [r for r in rs if r["distcrown_result"] not in ("sat", "unsat")
                         and r["abcrown_result"] not in ("sat", "unsat")]
            worst = "–"
            if both_open and "distcrown_worst" in rs[0]:
                higher = sum(1 for r in both_open if num(r["distcrown_worst"]) is not None
                             and num(r["abcrown_worst"]) is not None
                             and num(r["distcrown_worst"]) > num(r["abcrown_worst"]))
                worst = f"{higher} of {len(both_open)}"
            med = lambda k: statistics.median(float(r[k]) for r in rs)  # noqa: E731
            own = [float(r["abcrown_own_s"]) for r in rs if r["abcrown_own_s"]]
            body.append([model, ours["n"], f"{num(rs[0]['timeout_s']):g}",
                         f"{ours['solved']} ({ours['sat']} sat)",
                         f"{theirs['solved']} ({theirs['sat']} sat)",
                         f"{sum(int(r['distcrown_wrong']) for r in rs)} / "
                         f"{sum(int(r['abcrown_wrong']) for r in rs)}",
                         f"{med('distcrown_s'):.2f}",
                         f"{med('abcrown_s'):.2f} ({statistics.median(own):.2f})" if own else "–",
                         worst, label])
    return md_table(["model", "n", "timeout s", "distcrown solved", "α,β-CROWN solved",
                     "wrong (ours / theirs)", "median s, ours", "median s, theirs: wall (own)",
                     "both open: ours the higher worst bound", "run"], body)


def render_vnnlib2(m, t, parts):
    body = []
    for label, p in parts:
        groups = {}
        for r in rows(p):
            groups.setdefault(r["property"], []).append(r)
        for prop, rs in groups.items():
            count = lambda v: sum(1 for r in rs if r["result"] == v)  # noqa: E731
            med = lambda k: statistics.median(float(r[k]) for r in rs)  # noqa: E731
            body.append([prop, len({r["model"] for r in rs}), len(rs), count("sat"),
                         count("unsat"), len(rs) - count("sat") - count("unsat"),
                         sum(int(r["wrong"]) for r in rs), f"{med('prepare_s'):.2f}",
                         f"{med('run_s'):.2f}", label])
    return md_table(["property", "models", "runs", "sat", "unsat", "other", "wrong",
                     "median prepare s", "median run s", "run"], body)


def render_wide_memory(m, t, parts):
    body = []
    for _, p in parts:
        by_model = {}
        for r in rows(p):
            by_model.setdefault(r["model"], {})[r["chunk"]] = r
        for model, cs in by_model.items():
            d = cs.get("-")
            c = next((v for k, v in cs.items() if k != "-"), None)
            cell = lambda r: (f"{r['peak_mb']} ({r['ref_peak_mb_ratio'].split('(')[1]}"  # noqa
                              if r else "–")
            ref = d["ref_peak_mb_ratio"].split(" (")[0] if d else "–"
            body.append([model.replace("mlp 784-", "mlp "), d["baseline_mb"] if d else "–",
                         cell(d), cell(c), ref, span([x["median_s"] for x in cs.values()])])
    return md_table(["model", "weights MB", "peak MB, default (ratio)",
                     "peak MB, chunk 512 (ratio)", "reference stack MB", "time s"], body)


def render_patches_memory(m, t, parts):
    body = []
    for _, p in parts:
        by_case = {}
        for r in rows(p):
            base = r["case"].replace("_random0", "")
            kind = "random" if r["case"].endswith("_random0") else "fixture"
            by_case.setdefault(base, {})[(kind, r["method"])] = r
        cell = lambda r: (f"{r['dense_peak_mb']} → {r['patches_peak_mb']} ({r['ratio']})"  # noqa
                          if r else "–")
        for case, ms in by_case.items():
            body.append([case] + [cell(ms.get(k)) for k in (
                ("fixture", "crown"), ("fixture", "alpha_crown"), ("random", "crown"),
                ("random", "alpha_crown"))])
    return md_table(["case", "CROWN, dense → patches MB (ratio)", "α-CROWN", "CROWN, random weights",
                     "α-CROWN, random weights"], body)


def render_bab_memory(m, t, parts):
    body = []
    for _, p in parts:
        ref = p.get("reference", {})
        for r in rows(p):
            theirs = ref.get(r["batch"])
            ratio = f"{float(r['peak_mb']) / theirs:.2f}×" if theirs else "–"
            body.append([r["batch"], r["peak_mb"], theirs if theirs else "–", ratio,
                         r["alpha_mb"], r["beta_mb"], r["a_temp_mb"], r["rounds"], r["time_s"]])
    return md_table(["batch", "peak MB", "reference stack MB", "ratio", "α MB", "β MB",
                     "A+temp MB", "rounds", "time s"], body)


def render_alpha_memory(m, t, parts):
    body = []
    for label, p in parts:
        for r in rows(p):
            body.append([r["binary"], r["limit_mb"] if r["limit_mb"] != "none" else "–",
                         r["peak_mb"] or "–", r["starts_left_out"] or "–",
                         r["stopped_at_limit"] or "–", r["time_s"], r["mean_lower"] or "–",
                         r["note"] or "", label])
    return md_table(["binary", "--memory-limit MB", "peak tensors MB", "starts left out",
                     "stopped at the limit", "time s", "mean lower bound", "note", "run"], body)


def fsdp_pivot(part):
    """(model, chunk, P) -> {mode: row}."""
    out = {}
    for r in rows(part):
        out.setdefault((r["model"], r["chunk"], r["procs"]), {})[r["mode"]] = r
    return out


def render_fsdp(m, t, parts):
    body = []
    for _, p in parts:
        piv = fsdp_pivot(p)
        keys = []
        for (model, chunk, procs) in piv:
            if (model, chunk) not in keys:
                keys.append((model, chunk))
        for model, chunk in keys:
            procs = [k[2] for k in piv if k[:2] == (model, chunk) and k[2] != "1"]

            def vs(mode):
                got = [f"{num(piv[(model, chunk, q)][mode]['peak_vs_p1']):.2f}"
                       for q in procs if mode in piv[(model, chunk, q)]]
                return " / ".join(got) + "×" if got else "–"
            weights = [piv[(model, chunk, "1")]["none"]["baseline_mb"]] if (
                model, chunk, "1") in piv else []
            weights += [piv[(model, chunk, q)]["fsdp"]["baseline_mb"] for q in procs
                        if "fsdp" in piv[(model, chunk, q)]]
            body.append([model, "-" if chunk == "0" else chunk, " / ".join(procs), vs("fsdp"),
                         vs("spec"), vs("fsdp+spec"),
                         " → ".join(f"{num(w):.1f}" for w in weights)])
    return md_table(["model", "chunk", "P", "FSDP: peak / P = 1 peak", "spec-parallel",
                     "FSDP + spec", "weights MB/rank, P = 1 → FSDP"], body)


def render_tp(m, t, parts):
    out = []
    for _, p in parts:
        wide = rows(p, 0)
        out += md_table(["P", "mode", "peak MB/rank", "P = 1 peak / peak", "time s", "speed-up",
                         "sum of lower bounds"],
                        [[r["procs"], r["mode"], f"{num(r['peak_mb']):.1f}",
                          f"{num(r['peak_reduction']):.2f}×", f"{num(r['time_s']):.2f}",
                          f"{num(r['speedup']):.2f}×", r["lower_sum"]] for r in wide])
        drift = {}
        for r in rows(p, 1):
            drift.setdefault((r["model"], r["zones"], r["procs"]), {})[r["mode"]] = r
        models = []
        for k in drift:
            if k[:2] not in models:
                models.append(k[:2])

        def d(model, zones, mode):
            got = [(k[2], ms[mode]["delta_rel"]) for k, ms in drift.items()
                   if k[:2] == (model, zones) and mode in ms and k[2] != "1"]
            return " / ".join(g(num(v), 2) for _, v in got) if got else "–"
        procs = sorted({k[2] for k in drift if k[2] != "1"})
        out += [""] + md_table(
            ["model", "zones", f"`tp` drift at P = {' / '.join(procs)}, max |b_P − b_1| / max |b_1|",
             "`tp-exact` drift"],
            [[mdl, z, d(mdl, z, "tp"), d(mdl, z, "tp-exact")] for mdl, z in models])
    return out


def render_bab_parallel(m, t, parts):
    body = []
    for _, p in parts:
        rs = rows(p)
        runs = []  # (batch, rounds) in the CSV's order
        for r in rs:
            if (r["batch"], r["rounds"]) not in runs:
                runs.append((r["batch"], r["rounds"]))
        one = {}
        for r in rs:
            if r["ranks"] == "1" and r["groups"] == "1" and r["shard"] == "none":
                one.setdefault((r["batch"], r["rounds"]), r)
        layouts = {}
        for r in rs:
            layouts.setdefault((r["ranks"], r["groups"], r["shard"]), {})[(r["batch"], r["rounds"])] = r

        def cell(r, run):
            if r is None:
                return "–"
            base = one.get(run)
            tens = (f", {num(r['tensor_mb']) / num(base['tensor_mb']):.2f}×" if base else "")
            return (f"{num(r['domains_per_s']):,.0f} ({num(r['vs_1_1']):.2f}×); "
                    f"{r['tensor_mb']} MB{tens}")
        for (ranks, groups, shard), by_run in layouts.items():
            body.append([f"({ranks}, {groups}, {shard})"] + [cell(by_run.get(k), k) for k in runs])
        header = ["(P, G, shard)"] + [f"batch {b}, {n} rounds: domains/s (vs 1 process); tensors"
                                      f" per rank" for b, n in runs]
        domains = sorted({(r["batch"], r["domains"]) for r in rs})
        body.append(["domains bounded (every layout)"] + [
            ", ".join(d for b, d in domains if b == run[0]) for run in runs])
    return md_table(header, body)


def render_verify_sharded(m, t, parts):
    body = [[r["p"], r["g"], r["shard"], r["result"], r["time_s"], r["weights_mb_rank"],
             r["rss_mb"], r["tensor_mb"], r["how"]] for _, p in parts for r in rows(p)]
    return md_table(["P", "G", "shard", "result", "time s", "weights MB/rank", "RSS MB",
                     "tensor MB", "how"], body)


def render_gpu(m, t, parts):
    body = []
    for label, p in parts:
        if p["id"] == "gpu_acasxu":
            c = verify_counts(rows(p))
            wrong = sum(int(r["wrong"]) for r in rows(p))
            body.append(["`verify` ACAS Xu, `--bab-batch-size 4096`",
                         f"{c['solved']}/{c['n']} solved, {wrong} wrong",
                         "see the `verify` table", "", label])
        elif p["id"] == "gpu_tp":
            rs = [r for r in rows(p) if r["procs"] != "1"]
            one = next(r for r in rows(p) if r["procs"] == "1")
            body.append([f"`tp`, wide MLP 4096 → 131,072 → 10, batch 256, P = "
                         f"{' / '.join(r['procs'] for r in rs)} on the one GPU",
                         "peak per rank ÷ " + " / ".join(f"{num(r['peak_reduction']):.2f}" for r in rs)
                         + f" (P = 1: {num(one['peak_mb']):,.0f} MB), time "
                         + " / ".join(f"{num(r['time_s']):.2f}" for r in rs) + f" s (P = 1: "
                         f"{num(one['time_s']):.2f} s)", "", "ranks share the GPU; host-staged MPI",
                         label])
        else:
            for r in rows(p):
                body.append([r["item"], r["h200"], r["cpu"], r["note"], label])
    return md_table(["what", "one H200", "this VM's CPU, 1 thread", "note", "run"], body)


def render_robustness(m, t, parts):
    body = []
    for label, p in parts:
        rs = rows(p)
        if p["id"] == "fuzz":
            body.append(["`fuzz_inputs`: " + fuzz_summary(rs), label])
        else:
            d = deadline_summary(rs)
            per_t = "; ".join(f"T = {r[0]} s: {r[2]:+.3f} / {r[3]:+.3f}" for r in d if r[0] != "all")
            total = next(r for r in d if r[0] == "all")
            body.append([f"`verify --timeout T`, {total[1]} runs: overshoot median / max {per_t}; "
                         f"at most {total[3]:+.3f} s in all", label])
    return md_table(["check", "run"], body)


def fuzz_summary(rs):
    if "total_cases" in rs[0]:  # the summary row carried over from the old page
        r = rs[0]
        return (f"seeds {r['seeds']}, {r['regression_cases']} corpus cases + {r['cases_per_seed']}"
                f" mutations each: {int(r['total_cases']):,} cases, {r['failures']} failures; "
                f"{r['bounded_min']}–{r['bounded_max']} bounded per seed, the rest refused in one line")
    total = sum(int(r["regression"]) + int(r["mutations"]) for r in rs)
    b = [int(r["bounded"]) for r in rs]
    seeds = [int(r["seed"]) for r in rs]
    return (f"seeds {min(seeds)}–{max(seeds)}, {rs[0]['regression']} corpus cases + "
            f"{rs[0]['mutations']} mutations each: {total:,} cases, "
            f"{sum(int(r['failures']) for r in rs)} failures; {min(b)}–{max(b)} bounded per seed, "
            f"the rest refused in one line")


def deadline_summary(rs):
    """[(T, runs, median, max)] from per-run rows (bench_deadline --csv) or summary rows."""
    if "overshoot_s" not in rs[0]:
        return [(r["timeout_s"], int(r["runs"]), float(r["median_overshoot_s"]),
                 float(r["max_overshoot_s"])) for r in rs]
    out = []
    ts = sorted({float(r["timeout_s"]) for r in rs})
    for t in ts + [None]:
        o = [float(r["overshoot_s"]) for r in rs if t is None or float(r["timeout_s"]) == t]
        out.append(("all" if t is None else f"{t:g}", len(o), statistics.median(o), max(o)))
    return out


def render_families(m, t, parts):
    """bench_vnncomp CSVs of fetched VNN-COMP families, `expected` α,β-CROWN's verdict in that
    year's results ('unknown' where it did not decide)."""
    body = []
    for label, p in parts:
        for bench, rs in benchmark_groups(p).items():
            models = len({r["model"] for r in rs})
            c = verify_counts(rs)
            theirs = sum(1 for r in rs if r["expected"] in ("sat", "unsat"))
            solved = [float(r["seconds"]) for r in rs if r["got"] in ("sat", "unsat")]
            caps = sorted({num(r["timeout_used"]) for r in rs})
            body.append([bench, models, c["n"], f"{c['solved']} ({c['sat']} sat)", c["timeout"],
                         c["other"], sum(int(r["wrong"]) for r in rs), theirs,
                         f"{statistics.median(solved):.2f}" if solved else "–",
                         f"{caps[0]:g}" if len(caps) == 1 else f"{caps[0]:g}–{caps[-1]:g}", label])
    return md_table(["benchmark", "models", "n", "decided", "timeout", "unknown/error", "wrong",
                     "α,β-CROWN decided (VNN-COMP)", "median s, decided", "timeout s", "run"],
                    body)


def throughput_rows(parts, unit, middle):
    """bench_bab_throughput CSV rows: build, passes, count, BaB seconds, count/s and its ratio to
    the first row, `middle(r)`'s cells, GFLOP/s and the fractions of the GEMM peak, the run."""
    body = []
    pct = lambda f: f"{100 * float(f):.0f} %" if f else "–"  # noqa: E731
    for label, p in parts:
        rs = rows(p)
        base = float(rs[0][f"{unit}_per_s"])
        for r in rs:
            body.append([r["build"], r["passes"], r[unit],
                         f"{r['bab_s_median']} ({r['bab_s_min']}–{r['bab_s_max']})",
                         r[f"{unit}_per_s"], f"{float(r[f'{unit}_per_s']) / base:.2f}×"]
                        + middle(r) + [r["gflop_per_s"] or "–",
                                       f"{pct(r['of_gemm_peak'])} / {pct(r['of_shape_peak'])}",
                                       label])
    return body


def render_input_throughput(m, t, parts):
    """bench_bab_throughput --case input CSVs: boxes/s per build and passes, the first row the
    baseline."""
    body = throughput_rows(parts, "boxes", lambda r: [r["mflop_per_box"] or "–"])
    return md_table(["build", "passes", "boxes", "BaB s, median (min–max)", "boxes/s",
                     "× first row", "MFLOP/box", "GFLOP/s", "of GEMM peak (1024³ / pass shape)",
                     "run"], body)


def render_relu_throughput(m, t, parts):
    """bench_bab_throughput --case relu CSVs: domains/s per build and passes (the first row the
    baseline), a round's time, one α/β pass's and the fixed rest's."""
    body = throughput_rows(parts, "domains", lambda r: [
        r["ms_per_round"] or "–", r["ms_per_pass"] or "–", r["fixed_ms_per_round"] or "–"])
    return md_table(["build", "passes", "domains", "BaB s, median (min–max)", "domains/s",
                     "× first row", "ms a round", "ms an α/β pass", "fixed ms a round",
                     "GFLOP/s", "of GEMM peak (1024³ / pass shape)", "run"], body)


RENDER = {
    "agreement": render_agreement, "alpha": render_alpha, "vs_auto_lirpa": render_vs_auto_lirpa,
    "verify": render_verify, "vs_abcrown": render_vs_abcrown,
    "vnnlib2": render_vnnlib2, "families": render_families,
    "wide_memory": render_wide_memory,
    "patches_memory": render_patches_memory, "bab_memory": render_bab_memory,
    "alpha_memory": render_alpha_memory,
    "fsdp": render_fsdp, "tp": render_tp, "bab_parallel": render_bab_parallel,
    "verify_sharded": render_verify_sharded, "gpu": render_gpu, "robustness": render_robustness,
    "input_throughput": render_input_throughput, "relu_throughput": render_relu_throughput,
}


# ---- summaries for the headline and the targets: (manifest, {part id: part}, arg) -> text -------

def s_agreement(P, arg):
    rs = rows(P["agreement_fixtures"]) + rows(P["agreement_ops"])
    devs = [num(r["max_rel_dev"]) for r in rs if r["method"] in ("ibp", "crown")]
    ups = [num(r["speedup"]) for r in rs if r["method"] == "crown"]
    cases = {r["case"] for r in rs}
    failed = sum(1 for r in rs if r["method"] == "ibp" and num(r["max_rel_dev"]) is None)
    note = f" (IBP not finite on {failed}, as auto_LiRPA's)" if failed else ""
    return (f"{len(cases)} cases: IBP and CROWN within "
            f"{max(d for d in devs if d is not None):.1e} relative of auto_LiRPA's bounds{note}; "
            f"CROWN {rng(ups, '{:.1f}')} the speed of auto_LiRPA's recorded times")


def s_alpha(P, arg):
    rs = rows(P["alpha_fixtures"]) + rows(P["alpha_ops"])
    ok = sum(1 for r in rs if r["looser"].startswith("0/"))
    worst = max(num(r["worst_rel_looser"]) for r in rs)
    return (f"{ok}/{len(rs)} cases with no bound looser than auto_LiRPA's α-CROWN by more than "
            f"1e-3·|ref| (worst {worst:.1e}); {sum(int(r['looser_than_crown']) for r in rs)} "
            f"bounds looser than CROWN, {sum(int(r['unsound']) for r in rs)} unsound")


def ratio_ranges(part):
    """The ranges of a part's `ratio` column over its CROWN and its α-CROWN rows."""
    rs = rows(part)
    return tuple(rng([num(r["ratio"]) for r in rs if r["method"] == m])
                 for m in ("crown", "alpha_crown"))


def s_vs_auto_lirpa(P, arg):
    c, a = ratio_ranges(P["vs_auto_lirpa"])
    return (f"our time over auto_LiRPA's on this CPU: CROWN {c}, α-CROWN {a} "
            f"(oval21 CNN, cifar10 ResNet-2B)")


def model_rows(P, part_id, model):
    """The rows of a verify part for one model (or benchmark name)."""
    groups = verify_groups(P[part_id])
    return next(v for (b, mdl), v in groups.items() if mdl.startswith(model) or b == model)


def s_verify(P, arg):
    """arg: 'part_id:model[,model]' -> 'model: solved/n (sat, unsat), wrong, time'."""
    part_id, models = arg.split(":")
    out = []
    for model in models.split(","):
        rs = model_rows(P, part_id, model)
        c = verify_counts(rs)
        wrong = sum(int(r["wrong"]) for r in rs)
        cap = max(num(r["timeout_used"]) for r in rs)
        out.append(f"{c['solved']}/{c['n']} ({c['sat']} sat, {c['unsat']} unsat), {wrong} wrong, "
                   f"{sum(float(r['seconds']) for r in rs):.1f} s in all, timeouts ≤ {cap:g} s")
    return "; ".join(out)


def s_verify_solved(P, arg):
    part_id, model = arg.split(":")
    rs = model_rows(P, part_id, model)
    c = verify_counts(rs)
    openi = [f"{os.path.basename(r['model'])[:-5]} {os.path.basename(r['spec'])[:-7]}"
             for r in rs if r["got"] not in ("sat", "unsat")]
    tail = f" (open: {', '.join(openi)})" if len(openi) <= 3 else ""
    cap = max(num(r["timeout_used"]) for r in rs)
    return f"{c['solved']}/{c['n']} at {cap:g} s, {sum(int(r['wrong']) for r in rs)} wrong{tail}"


def s_vs_abcrown(P, arg):
    out = []
    wrong = 0
    for pid in ("vs_abcrown_60s", "vs_abcrown_mnist_deep"):
        groups = {}
        for r in rows(P[pid]):
            mdl = "ACAS Xu" if r["benchmark"] == "acasxu" else \
                os.path.basename(r["model"])[:-5].replace("mnist_", "")
            groups.setdefault(mdl, []).append(r)
            wrong += int(r["distcrown_wrong"]) + int(r["abcrown_wrong"])
        for mdl, rs in groups.items():
            a = verify_counts(rs, "distcrown_result")["solved"]
            b = verify_counts(rs, "abcrown_result")["solved"]
            out.append(f"{mdl} {a} vs {b}")
    return ("solved at 60 s, distcrown vs α,β-CROWN (no Gurobi): " + ", ".join(out) +
            f"; {wrong} wrong")


def s_wide_memory(P, arg):
    rs = rows(P["wide_memory"])
    ratio = lambda r: num(r["ref_peak_mb_ratio"].split("(")[1])  # noqa: E731
    d = " / ".join(f"{ratio(r):.2f}" for r in rs if r["chunk"] == "-")
    c = " / ".join(f"{ratio(r):.2f}" for r in rs if r["chunk"] != "-")
    models = ", ".join(r["model"].replace("mlp 784-", "") for r in rs if r["chunk"] == "-")
    return (f"CROWN's peak over the reference stack's ({models}): {d}× at the default, "
            f"{c}× with `--crown-batch-size 512`")


def s_patches_memory(P, arg):
    c, a = ratio_ranges(P["patches_memory"])
    return (f"patches A over dense A, peak tensors: CROWN {c}, α-CROWN {a} "
            f"(oval21 CNN and cifar10 ResNet-2B, fixture and random weights)")


def s_bab_memory(P, arg):
    p = P["bab_memory"]
    rs = rows(p)
    ref = p.get("reference", {})
    return (f"peak at batch {' / '.join(r['batch'] for r in rs)}: "
            f"{' / '.join(r['peak_mb'] for r in rs)} MB (reference stack "
            f"{' / '.join(str(ref.get(r['batch'], '–')) for r in rs)})")


def s_fsdp(P, arg):
    rs = rows(P["fsdp"])
    pick = lambda mode, procs, mlp: [num(r["peak_vs_p1"]) for r in rs  # noqa: E731
                                     if r["mode"] == mode and r["procs"] == procs
                                     and r["model"].startswith("mlp") == mlp]
    mlps = sorted({r["model"] for r in rs if r["model"].startswith("mlp")})
    both = pick("fsdp+spec", "2", True) + pick("fsdp+spec", "4", True)
    return (f"FSDP per-rank peak over one process's, MLPs ({', '.join(mlps)}) only: "
            f"{rng(pick('fsdp', '2', True))} at P = 2, {rng(pick('fsdp', '4', True))} at P = 4; "
            f"the conv net {rng(pick('fsdp', '2', False) + pick('fsdp', '4', False))}; "
            + (f"FSDP + spec-parallel on the MLPs down to {min(both):.2f}×" if both else ""))


def s_tp(P, arg):
    p = P["tp"]
    wide = rows(p, 0)
    red = ", ".join(f"{num(r['peak_reduction']):.2f}× lower at P = {r['procs']}"
                    for r in wide if r["procs"] != "1")
    drift = rows(p, 1)
    exact = max(num(r["delta_rel"]) for r in drift if r["mode"] == "tp-exact")
    tp = max(num(r["delta_rel"]) for r in drift if r["mode"] == "tp")
    return (f"per-rank peak {red} (4096 → 65,536 → 10); `tp-exact` within {exact:.1e} of one "
            f"process, `tp` drifts up to {tp:.3g} (relative)")


def s_bab_parallel(P, arg):
    rs = rows(P["bab_parallel"])
    out = []
    for r in rs:
        if r["batch"] == "512" and r["ranks"] == "2" and r["groups"] == "2":
            out.append(f"(2, 2) {num(r['vs_1_1']):.2f}× one process's domains/s at batch 512")
    one = {r["batch"]: r for r in rs if r["ranks"] == "1"}
    for r in rs:
        if r["batch"] == "512" and r["shard"] == "fsdp+spec" and "512" in one:
            out.append(f"(2, 1 fsdp + spec) {num(r['tensor_mb']) / num(one['512']['tensor_mb']):.2f}×"
                       f" its tensors per rank")
    return "the same domains at every layout; " + "; ".join(out)


def s_bab_parallel_target(P, arg):
    rs = rows(P["bab_parallel"])
    hit = [r for r in rs if r["batch"] == arg and r["ranks"] == "2" and r["groups"] == "2"]
    return f"{num(hit[0]['vs_1_1']):.2f}× at batch {arg}" if hit else \
        f"not in the current CSV (batch {arg} not re-run)"


def s_verify_sharded(P, arg):
    rs = rows(P["verify_sharded"])
    return (f"ResNet-large-shaped net (3.9 M parameters): {', '.join(r['result'] for r in rs)} at "
            f"P = {', '.join(r['p'] for r in rs)} (FSDP), weights "
            f"{' / '.join(r['weights_mb_rank'] for r in rs)} MB per rank, "
            f"≤ {max(num(r['rss_mb']) for r in rs):.0f} MB resident per rank")


def s_gpu(P, arg):
    c = verify_counts(rows(P["gpu_acasxu"]))
    items = [f"{r['item']}: {r['h200']}" for r in rows(P["gpu_summary"]) if r["headline"] == "1"]
    return f"ACAS Xu {c['solved']}/{c['n']}; " + "; ".join(items)


def s_robustness(P, arg):
    d = deadline_summary(rows(P["deadline"]))
    worst = max(x[3] for x in d)
    return f"fuzzing: {fuzz_summary(rows(P['fuzz']))}; `verify --timeout T` answered by T {worst:+.2f} s"


SUMMARY = {k[2:]: v for k, v in globals().items() if k.startswith("s_")}


def measured_cell(m, parts):
    seen = []
    for p in parts:
        s = f"{p['commit']}, {p['date']}"
        if s not in seen:
            seen.append(s)
    return "; ".join(seen) + " — " + short_mark(m, parts)


def render_summary_table(m, entries, header, link_prefix=""):
    P = parts_by_id(m)
    body = []
    for e in entries:
        parts = [P[i] for i in e["parts"]]
        body.append([e["what"], SUMMARY[e["summary"]](P, e.get("arg")),
                     measured_cell(m, parts), f"[{e['section']}]({link_prefix}#{e['anchor']})"])
    return md_table(header, body)


# ---- the page --------------------------------------------------------------------------------

def part_line(m, p):
    outs = {os.path.basename(x): x for x in csv_paths(p) + p.get("also", [])}
    shown = []
    for c in p["command"]:  # a re-measured run's command writes to $OUT/NAME: show docs/NAME
        for name, path in outs.items():
            c = c.replace("$OUT/" + name, path)
        shown.append(c)
    cmd = "; ".join(f"`{c}`" for c in shown)
    outs = ", ".join(f"`{c}`" for c in csv_paths(p))
    line = f"{cmd} → {outs} · commit `{p['commit']}` · {p['date']} · {mark(m, p)}"
    if p.get("origin"):
        line += f" · {p['origin']}"
    if p.get("skip"):
        line += f" · not re-run by regenerate_results.sh: {p['skip']}"
    return line


def render_table(m, t):
    labelled = [(chr(ord("a") + i), p) for i, p in enumerate(t["parts"])]
    lines = RENDER[t["id"]](m, t, labelled)
    for label, p in labelled:
        lines.append(("- Run " + label if len(labelled) > 1 else "- Run") + ": " + part_line(m, p))
    return lines


def blocks(m):
    """{block id: lines} for docs/results.md."""
    out = {t["id"]: render_table(m, t) for t in m["tables"]}
    out["headline"] = render_summary_table(m, m["headline"],
                                           ["question", "current figure", "measured", "table"])
    out["targets"] = render_summary_table(m, m["targets"],
                                          ["target", "where it stands", "measured", "table"])
    return out


def replace_block(text, begin, end, lines, what):
    pat = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pat.search(text):
        raise SystemExit(f"results_page: {what}: markers {begin} ... {end} not found")
    return pat.sub(lambda _: begin + "\n" + "\n".join(lines) + "\n" + end, text, count=1)


def render_files(m):
    with open(PAGE) as f:
        page = f.read()
    with open(README) as f:
        readme = f.read()
    new_page = page
    for bid, lines in blocks(m).items():
        new_page = replace_block(new_page, f"<!-- table:{bid} -->", f"<!-- /table:{bid} -->",
                                 lines, "docs/results.md")
    readme_lines = render_summary_table(m, m["headline"],
                                        ["question", "current figure", "measured", "table"],
                                        link_prefix="docs/results.md")
    new_readme = replace_block(readme, "<!-- results:begin -->", "<!-- results:end -->",
                               readme_lines, "README.md")
    return (page, new_page), (readme, new_readme)


COUNT = re.compile(r"stale: measured \d+ source commits? ago|stale \(\d+\)")


def lenient(text):
    return COUNT.sub("stale", text)


def main_render(check, loose):
    m = load_manifest()
    missing = [p["commit"] for t in m["tables"] for p in t["parts"] if not has_commit(p["commit"])]
    if check and missing and not loose:
        print(f"results_page: this clone lacks {', '.join(sorted(set(missing)))}: comparing "
              "without the commit counts", file=sys.stderr)
        loose = True
    (page, new_page), (readme, new_readme) = render_files(m)
    if not check:
        for path, old, new in ((PAGE, page, new_page), (README, readme, new_readme)):
            if old != new:
                with open(path, "w") as f:
                    f.write(new)
                print(f"results_page: wrote {os.path.relpath(path, ROOT)}")
        lines = new_page.count("\n")
        if lines > 320:
            print(f"results_page: warning: docs/results.md has {lines} lines (limit 320)",
                  file=sys.stderr)
        return 0
    bad = []
    for path, old, new in ((PAGE, page, new_page), (README, readme, new_readme)):
        if (lenient(old) != lenient(new)) if loose else (old != new):
            bad.append(os.path.relpath(path, ROOT))
    if bad:
        print(f"results_page: {' and '.join(bad)} out of date with docs/results_manifest.json, "
              "the CSVs or the git history: run python3 scripts/results_page.py", file=sys.stderr)
        return 1
    return 0


# ---- helpers for scripts/regenerate_results.sh --------------------------------------------------

def cmd_list(full):
    m = load_manifest()
    for t in m["tables"]:
        for p in t["parts"]:
            run = p.get("run_full" if full and "run_full" in p else "run", [])
            minutes = p.get("minutes_full" if full and "minutes_full" in p else "minutes", 0)
            print("\x1f".join([p["id"], str(minutes), p.get("skip") or "",
                             ",".join(csv_paths(p) + p.get("also", [])),
                             json.dumps(run)]))
    return 0


def cmd_stamp(part_id, commit, date, full):
    with open(MANIFEST) as f:
        m = json.load(f)
    p = parts_by_id(m).get(part_id)
    if p is None:
        raise SystemExit(f"results_page: no part {part_id}")
    p["command"] = list(p["run_full"] if full and "run_full" in p else p["run"])
    p["commit"], p["date"] = commit, date
    p.pop("origin", None)
    with open(MANIFEST, "w") as f:
        json.dump(m, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return 0


def cmd_validate(part_id, folder, full):
    """The re-measured CSVs in `folder` have the columns the page reads and the rows expected."""
    m = load_manifest()
    p = parts_by_id(m)[part_id]
    want = p.get("rows_full" if full and "rows_full" in p else "rows")
    for i, path in enumerate(csv_paths(p)):
        new = os.path.join(folder, os.path.basename(path))
        if not os.path.exists(new):
            raise SystemExit(f"results_page: {part_id}: the run wrote no {os.path.basename(path)}")
        with open(new, newline="") as f:
            got = list(csv.DictReader(f))
        if not got:
            raise SystemExit(f"results_page: {part_id}: {os.path.basename(path)} has no rows")
        if "check_columns" in p:  # the run writes another schema than the CSV carried over
            need = set(p["check_columns"][i])
        else:
            need = set(read_csv(path)[0].keys()) if os.path.exists(os.path.join(ROOT, path)) else set()
        lacking = sorted(need - set(got[0].keys()))
        if lacking:
            raise SystemExit(f"results_page: {part_id}: {os.path.basename(path)} lacks "
                             f"{', '.join(lacking)}")
        n = want[i] if isinstance(want, list) else want if i == 0 else None
        if n is not None and len(got) != n:
            raise SystemExit(f"results_page: {part_id}: {os.path.basename(path)} has {len(got)} "
                             f"rows, {n} expected (a run failed or printed no row)")
        CSV_OVERRIDE[path] = new
    try:  # the page must render from the new CSVs before they replace the old ones
        blocks(m)
    except Exception as e:  # noqa: BLE001 (any failure to read them is the run's)
        raise SystemExit(f"results_page: {part_id}: the page cannot be rendered from the new "
                         f"CSVs: {type(e).__name__}: {e}")
    return 0


def normalise(h):
    return re.sub(r"[^0-9a-z]+", "_", h.strip().lower()).strip("_")


def cmd_md2csv(args):
    header = None
    pad = "--pad" in args
    if "--header" in args:
        header = args[args.index("--header") + 1].split(",")
    files = [a for i, a in enumerate(args) if not a.startswith("--")
             and (i == 0 or args[i - 1] != "--header")]
    text = open(files[0]).read() if files else sys.stdin.read()
    first = None
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("|"):
            continue
        cells = [c.strip() for c in s.strip("|").split("|")]
        if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
            continue  # separator
        if first is None:
            first = s
            if header is None:
                header = [normalise(c) for c in cells]
            continue
        if s == first:
            continue  # the header again (several runs' output concatenated)
        if len(cells) != len(header):
            if pad and len(cells) < len(header):
                cells += [""] * (len(header) - len(cells))
            else:
                raise SystemExit(f"md2csv: {len(cells)} cells where the header has "
                                 f"{len(header)}: {s}")
        out.append(cells)
    if header is None or not out:
        raise SystemExit("md2csv: no markdown table with rows in the input")
    return write_csv(header, out)


def write_csv(header, table):
    """Writes a converted table to stdout (the converters' output)."""
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(header)
    w.writerows(table)
    return 0


def cmd_txt2csv(args):
    header = args[args.index("--header") + 1].split(",")
    skip = int(args[args.index("--skip") + 1]) if "--skip" in args else 1
    files = [a for i, a in enumerate(args) if not a.startswith("--")
             and args[i - 1] not in ("--header", "--skip")]
    text = open(files[0]).read() if files else sys.stdin.read()
    out = []
    for line in text.splitlines()[skip:]:
        if not line.strip():
            continue
        cells = line.split(None, len(header) - 1)
        if len(cells) != len(header):
            raise SystemExit(f"txt2csv: {len(cells)} fields where the header has {len(header)}: "
                             f"{line}")
        out.append([c.strip() for c in cells])
    if not out:
        raise SystemExit("txt2csv: no rows in the input")
    return write_csv(header, out)


def cmd_fuzz2csv(args):
    text = open(args[0]).read() if args else sys.stdin.read()
    pat = re.compile(r"fuzz_inputs: (\d+) regression cases and (\d+) mutations \(seed (\d+)\): "
                     r"(\d+) bounded, (\d+) refused with one-line errors, (\d+) failures")
    found = pat.findall(text)
    if not found:
        raise SystemExit("fuzz2csv: no fuzz_inputs summary line in the input")
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["seed", "regression", "mutations", "bounded", "refused", "failures"])
    for reg, mut, seed, bounded, refused, failures in found:
        w.writerow([seed, reg, mut, bounded, refused, failures])
    return 0


def cmd_fsdp2wide(args):
    """bench_fsdp's P = 1 rows -> the wide-MLP table's columns, with the reference stack's peaks
    of the manifest's wide_memory part (bench_bounds --only wide prints the same figures)."""
    ref = parts_by_id(load_manifest())["wide_memory"]["reference"]
    text = open(args[0]).read() if args else sys.stdin.read()
    got = [r for r in csv.DictReader(io.StringIO(text)) if r["procs"] == "1"]
    if not got:
        raise SystemExit("fsdp2wide: no P = 1 row in the input")
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["model", "method", "chunk", "median_s", "baseline_mb", "peak_mb",
                "ref_peak_mb_ratio"])
    for r in got:
        name = r["model"].replace("mlp", "mlp 784-")
        theirs = ref[r["model"]]
        w.writerow([name, "crown", "-" if r["chunk"] == "0" else r["chunk"],
                    f"{float(r['time_s']):.3f}", f"{float(r['baseline_mb']):.1f}",
                    f"{float(r['peak_mb']):.1f}", f"{theirs} ({float(r['peak_mb']) / theirs:.2f}x)"])
    return 0


def cmd_sources():
    """Every path some run describes (src/, include/ and the runs' own files), one a line."""
    m = load_manifest()
    seen = []
    for t in m["tables"]:
        for p in t["parts"]:
            for path in source_paths(m, p):
                if path not in seen:
                    seen.append(path)
    print("\n".join(seen))
    return 0


def main(argv):
    if argv and argv[0] == "sources":
        return cmd_sources()
    if argv and argv[0] == "fsdp2wide":
        return cmd_fsdp2wide(argv[1:])
    if argv and argv[0] == "list":
        return cmd_list("--full" in argv)
    if argv and argv[0] == "stamp":
        return cmd_stamp(argv[1], argv[2], argv[3], "--full" in argv)
    if argv and argv[0] == "validate":
        return cmd_validate(argv[1], argv[2], "--full" in argv)
    if argv and argv[0] == "md2csv":
        return cmd_md2csv(argv[1:])
    if argv and argv[0] == "txt2csv":
        return cmd_txt2csv(argv[1:])
    if argv and argv[0] == "fuzz2csv":
        return cmd_fuzz2csv(argv[1:])
    unknown = [a for a in argv if a not in ("--check", "--lenient")]
    if unknown:
        print(__doc__, file=sys.stderr)
        return 2
    return main_render("--check" in argv, "--lenient" in argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
