#!/usr/bin/env python3
"""How far domain-parallel branch and bound scales (issue 45): a model of a round's time at P
ranks (G = P domain groups of one rank), calibrated and validated on this machine, and its
predictions for 8-64 ranks.

A round at G groups, each group bounding its share of the round's n parents (2 children each):
    T_round(G) = s(G) * (t_fix + t_att * a(G) + 2 * ceil(n / G) * t_dom) + X(G)
  t_fix, t_dom  a round's fixed cost and a child domain's, fitted (least squares) to one process's
                runs at several batch sizes: bab_time - attack time = rounds * t_fix + domains *
                t_dom
  t_att         one process's attack time a round (report bab_attack_time_s / bab_rounds)
  a(G)          a group's attack at G groups over one process's, measured by build/bin/bench_attack:
                the groups share a round's PGD points out (ceil(16/G) + ceil(64/G) each), but
                each pays the 30 steps' per-operation cost (mnist 256x6: 91 ms at G = 1, 22 ms
                at 64); input splitting's rounds attack nothing, they check their boxes'
                points: a(G) = 1/G
  s(G)          the slowdown of a rank that shares the machine: kappa (two one-process runs at
                once, measured) times max(1, G / cores) (oversubscribed)
  X(G)          the round's exchanges: messages * latency + bytes gathered * per_byte, the
                messages and bytes counted by the run (report "exchange"), latency and per_byte
                from build/bin/bench_exchange at G ranks
Validated at P = 2 and 4 against the measured bab_time (ratio predicted / measured). Counts that
do not depend on time (domains per group, messages, bytes a round) are measured oversubscribed
at P = 8 and 16. The predictions at 8-64 ranks assume one core per rank (s = kappa) and the
network between namespaces (TCP over veth: bench_exchange across two hosts, --tcp JSON), its
latency growing with log2 P and its bytes with P - 1, for the two batch scopes: the global batch
fixed (--bab-batch-scope world, --bab-batch-size 64 at every P: strong scaling) and the batch per
group fixed (--bab-batch-scope group, the default without --deterministic: each group bounds 64
parents a round, as one process does; and 256). Both scopes are validated at P = 2 and 4.
Parallel efficiency = one process's time for the same rounds and global batch / (P * the time at
P): the search's own overhead of a larger batch (domains a smaller one would not have bounded)
is not in it.

  python3 benchmarks/bench_bab_scaling.py [--rounds 12] [--repeat 3] [--tcp /tmp/exchange_tcp.json]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def verify(args, ranks, batch, rounds, cpu=None, scope="world"):
    """One deterministic run at `ranks` (= groups), `batch` over the world or per group: its
    report."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [args.binary, "verify", "--model", args.model, "--vnnlib", args.spec,
               "--deterministic", "--max-rounds", str(rounds), "--bab-batch-size", str(batch),
               "--timeout", "0", "--quiet", "--domain-groups", str(ranks), "--report", report,
               "--bab-batch-scope", scope]
        if ranks > 1:
            cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
        if cpu is not None:
            cmd = ["taskset", "-c", str(cpu)] + cmd
        done = subprocess.run(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        if done.returncode != 0:
            sys.exit(f"verify failed at P={ranks}: {done.stderr.strip().splitlines()[-1:]}")
        with open(report) as f:
            return json.load(f)


def verify_interleaved(args, layouts):
    """--repeat deterministic runs of each (ranks, batch, scope) layout (the same counts each
    time), the layouts in turn, run after run, so that this VM's drift hits them alike: per layout
    the report of the median time."""
    runs = {layout: [] for layout in layouts}
    for _ in range(args.repeat):
        for ranks, batch, scope in layouts:
            runs[(ranks, batch, scope)].append(verify(args, ranks, batch, args.rounds, scope=scope))
    return {layout: sorted(rs, key=lambda r: r["bab_time_s"])[len(rs) // 2]
            for layout, rs in runs.items()}


def exchange_cost(args, ranks):
    """bench_exchange at `ranks` on this machine: (latency s, s per byte gathered)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "x.json")
        subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks), args.bench_exchange,
                        "--reps", "20", "--json", out], env=ENV, check=True,
                       stdout=subprocess.DEVNULL)
        with open(out) as f:
            j = json.load(f)
    return j["latency_s"], j["per_byte_s"]


def fit_round_costs(runs):
    """Least squares bab_time - attack time = rounds * t_fix + domains * t_dom over one
    process's runs; and the attack's time a round, t_att."""
    a11 = sum(r["bab_rounds"] ** 2 for r in runs)
    a12 = sum(r["bab_rounds"] * r["domains_bounded"] for r in runs)
    a22 = sum(r["domains_bounded"] ** 2 for r in runs)
    rest = [r["bab_time_s"] - r["bab_attack_time_s"] for r in runs]
    b1 = sum(r["bab_rounds"] * t for r, t in zip(runs, rest))
    b2 = sum(r["domains_bounded"] * t for r, t in zip(runs, rest))
    det = a11 * a22 - a12 * a12
    t_att = sum(r["bab_attack_time_s"] for r in runs) / sum(r["bab_rounds"] for r in runs)
    return (b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det, t_att


def slowest_group_domains(report):
    """Children the busiest group bounded: plan_round shares each round's parents out evenly
    (ceil(n/G) to some groups, floor to the others), so this is close to the sum over rounds of
    the largest share."""
    return max(report["domains_per_group"])


def attack_share(args):
    """bench_attack at 1-64 groups: {G: a group's attack time over one process's}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "a.json")
        subprocess.run(["taskset", "-c", "0", args.bench_attack, "--model", args.model, "--vnnlib",
                        args.spec, "--json", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            rows = {r["groups"]: r["median_s"] for r in json.load(f)}
    return {G: t / rows[1] for G, t in rows.items()}


def predict(costs, share, slow, report, latency, per_byte):
    t_fix, t_dom, t_att = costs
    x = report["exchange"]
    exchange = x["messages"] * latency + x["bytes"] * per_byte  # bytes: every rank's, gathered
    per_round = t_fix + t_att * share[report["groups"]]
    return slow * (report["bab_rounds"] * per_round + slowest_group_domains(report) * t_dom) \
        + exchange


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "bin", "distcrown"))
    ap.add_argument("--bench-exchange", default=os.path.join(ROOT, "build", "bin", "bench_exchange"))
    ap.add_argument("--bench-attack", default=os.path.join(ROOT, "build", "bin", "bench_attack"))
    ap.add_argument("--model", default=os.path.join(FIXTURES, "models", "mnist_256x6.onnx"))
    ap.add_argument("--spec", default=os.path.join(FIXTURES, "specs", "mnist_prop_2_0.05.vnnlib"))
    ap.add_argument("--rounds", type=int, default=12, help="rounds per disjunct")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of each calibration and validation layout, the median's time kept")
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--tcp", help="bench_exchange --json across two hosts (the cluster network); "
                    "default: this machine's P = 2 figures")
    args = ap.parse_args()
    B = args.batch
    print(f"model {os.path.basename(args.model)}, spec {os.path.basename(args.spec)}, "
          f"{args.rounds} rounds per disjunct, --deterministic, {args.cores} cores, "
          f"median of {args.repeat} runs a layout, the layouts in turn")

    # 1. One process: the round's fixed cost and a domain's, from three batch sizes (the queue
    #    doubles a round from the root, so enough rounds fill the largest batch several times).
    sizes = (B // 4, B // 2, B, 2 * B)
    checked = ((2, "world"), (2, "group"), (4, "world"), (4, "group"), (8, "world"), (16, "world"))
    runs = verify_interleaved(args, [(1, b, "world") for b in sizes] +
                              [(P, B, scope) for P, scope in checked])
    calib = [runs[(1, b, "world")] for b in sizes]
    costs = fit_round_costs(calib)
    t_fix, t_dom, t_att = costs
    print(f"\none process: t_fix {t_fix * 1e3:.2f} ms a round, "
          f"t_att {t_att * 1e3:.2f} ms of attacks a round, "
          f"t_dom {t_dom * 1e3:.3f} ms a child domain")
    for r, b in zip(calib, sizes):
        fitted = r["bab_rounds"] * (t_fix + t_att) + r["domains_bounded"] * t_dom
        print(f"  batch {b:>4}: {r['bab_rounds']} rounds, {r['domains_bounded']} domains, "
              f"{r['bab_time_s']:.2f} s (fit {fitted:.2f} s)")
    if calib[0]["split"] == "input":
        # Input splitting's rounds only check their boxes' corners and centres: a group's share.
        share = {G: 1.0 / G for G in (1, 2, 4, 8, 16, 32, 64)}
    else:
        share = attack_share(args)
    print("a group's attack over one process's: " +
          ", ".join(f"G={G} {a:.2f}" for G, a in sorted(share.items())))

    # 2. Two one-process runs at once: the slowdown of sharing the machine.
    alone = verify(args, 1, B, args.rounds, cpu=0)["bab_time_s"]
    procs = [subprocess.Popen([sys.executable, __file__, "--one", args.binary, args.model,
                               args.spec, str(args.rounds), str(B), str(c)],
                              stdout=subprocess.PIPE, text=True) for c in (0, 1)]
    together = [float(p.communicate()[0]) for p in procs]
    measured_kappa = sum(together) / len(together) / alone
    kappa = max(1.0, measured_kappa)  # below 1 is this VM's drift: sharing cannot speed a run up
    print(f"two one-process runs at once: {measured_kappa:.2f}x the time of one alone "
          f"(kappa = {kappa:.2f})")

    # 3. Validation at P = 2 and 4 (on `cores` cores) for both batch scopes, counts at 8 and 16
    #    (run above, interleaved with the calibration).
    print(f"\n{'P':>3} {'scope':>5} {'bab s':>7} {'pred s':>7} {'pred/meas':>9} {'att s':>6} "
          f"{'pred':>6} {'rounds':>6} {'domains':>8} {'per group min-max':>17} {'msgs':>5} "
          f"{'KB/round':>8} {'moved':>6} {'x lat us':>8}")
    measured = {}
    for P, scope in checked:
        r = runs[(P, B, scope)]
        if scope == "world":
            measured[P] = r
        per = r["domains_per_group"]
        kb = r["exchange"]["bytes"] / r["bab_rounds"] / 1e3
        row = (f"{P:>3} {scope:>5} {r['bab_time_s']:>7.2f}")
        if P <= 4:
            lat, pb = exchange_cost(args, P)
            slow = kappa * max(1.0, P / args.cores)
            pred = predict(costs, share, slow, r, lat, pb)
            att = slow * r["bab_rounds"] * t_att * share[P]
            row += (f" {pred:>7.2f} {pred / r['bab_time_s']:>9.2f} "
                    f"{r['bab_attack_time_s']:>6.2f} {att:>6.2f}")
        else:
            lat = float("nan")
            row += f" {'-':>7} {'-':>9} {r['bab_attack_time_s']:>6.2f} {'-':>6}"
        print(row + f" {r['bab_rounds']:>6} {r['domains_bounded']:>8} "
              f"{min(per):>8}-{max(per):<8} {r['exchange']['messages']:>5} {kb:>8.1f} "
              f"{r['domains_moved']:>6} {lat * 1e6:>8.1f}")

    # 4. Predictions on a cluster: one core per rank, the network of --tcp.
    if args.tcp:
        with open(args.tcp) as f:
            j = json.load(f)
        lat2, pb2 = j["latency_s"], j["per_byte_s"]
        net = "TCP between two network namespaces"
    else:
        lat2, pb2 = exchange_cost(args, 2)
        net = "this machine at P = 2"
    r16 = measured[16]
    msgs_per_round = r16["exchange"]["messages"] / r16["bab_rounds"]
    # Bytes each rank sends a round: reports plus moved domains; per domain moved, from P = 16.
    report_bytes = measured[2]["exchange"]["bytes"] / measured[2]["bab_rounds"] / 2
    moved_per_round = {P: measured[P]["domains_moved"] / measured[P]["bab_rounds"]
                       for P in (2, 4, 8, 16)}
    per_moved = max(1.0, (r16["exchange"]["bytes"] / r16["bab_rounds"] - 16 * report_bytes)
                    / max(moved_per_round[16], 1e-9))
    print(f"\npredicted on a cluster (one core per rank, {kappa:.2f}x for sharing a node's "
          f"memory; network: {net}, {lat2 * 1e6:.0f} us + {pb2 * 1e9:.2f} ns/B at P = 2)")
    print(f"{'P':>3} {'policy':>16} {'round ms':>8} {'of it x':>7} {'efficiency':>10}")
    for P in (2, 4, 8, 16, 32, 64):
        moved = moved_per_round[min(P, 16)] * (P / 16 if P > 16 else 1)
        for policy, n in ((f"global batch {B}", B), (f"{B}/group", B * P),
                          (f"{2 * B}/group", 2 * B * P), (f"{4 * B}/group", 4 * B * P)):
            moved_p = moved * n / B / P if n > B else moved
            gathered = P * report_bytes + moved_p * per_moved
            x = msgs_per_round * lat2 * math.ceil(math.log2(P)) + gathered * (P - 1) / P * pb2
            t_round = kappa * (t_fix + t_att * share[P] + 2 * math.ceil(n / P) * t_dom) + x
            one = t_fix + t_att + 2 * n * t_dom
            print(f"{P:>3} {policy:>16} {t_round * 1e3:>8.1f} {x / t_round:>6.0%} "
                  f"{one / (P * t_round):>10.0%}")


def one_run():
    """--one BINARY MODEL SPEC ROUNDS BATCH CPU: print one process's bab_time (for kappa)."""
    binary, model, spec, rounds, batch, cpu = sys.argv[2:8]
    args = argparse.Namespace(binary=binary, model=model, spec=spec)
    print(verify(args, 1, int(batch), int(rounds), cpu=int(cpu))["bab_time_s"])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        one_run()
    else:
        main()
