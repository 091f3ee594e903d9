#!/usr/bin/python3
"""cgdp against PyTorch on the CPU: training images/s of models/fashion_cnn.prototxt, same net,
batch, threads and data in memory, measured in one run.

This machine's speed swings by up to 2x within tens of seconds, so running the two one after
the other compares moments, not frameworks. Both processes are started together and take turns:
one runs for a slice (1 s) while the other is stopped (SIGSTOP/SIGCONT), so each samples the same
moments. Each reports every iteration's duration; an iteration that spans its own pause (and the
one after, on cold caches) is dropped. The ratio is PyTorch's median iteration time over cgdp's.
With --baseline, a second cgdp binary takes turns as well, which measures a change of cgdp's
against the build before it at the same moments.
Set-up: tools/setup-debian.sh --bench (Debian's python3-torch).
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cgdp_command(args, binary, metrics):
    return [binary, "train", "--iterations",
            str(args.warmup + args.iterations), "--batch", str(args.batch), "--threads",
            str(args.threads), "--test-interval", "-1", "--test-samples", "100", "--display", "1",
            "--metrics", metrics, "--plain", "--precision", "bf16" if args.bf16 else "fp32"]


def torch_command(args, durations):
    # Debian's python3-torch is installed for the system interpreter, not for a pyenv one.
    return ["/usr/bin/python3", os.path.join(ROOT, "bench", "torch_fashion_cnn.py"),
            "--iterations", str(args.iterations), "--warmup", str(args.warmup), "--batch",
            str(args.batch), "--threads", str(args.threads), "--durations", durations] + (
                ["--bf16"] if args.bf16 else [])


def take_turns(processes, slice_s):
    """Lets one process run at a time, slice by slice, until one of them exits; stops the rest."""
    try:
        for p in processes[1:]:
            p.send_signal(signal.SIGSTOP)
        turn = 0
        while all(p.poll() is None for p in processes):
            deadline = time.monotonic() + slice_s
            while time.monotonic() < deadline and processes[turn].poll() is None:
                time.sleep(0.01)
            if processes[turn].poll() is not None:
                break
            processes[turn].send_signal(signal.SIGSTOP)
            turn = (turn + 1) % len(processes)
            processes[turn].send_signal(signal.SIGCONT)
    finally:  # also on Ctrl-C: never leave a stopped process behind
        for p in processes:
            if p.poll() is None:
                p.kill()
            p.wait()


def cgdp_durations(metrics, warmup):
    points = [json.loads(line) for line in open(metrics)]
    elapsed = [p["elapsed_s"] for p in points if p["phase"] == "train"]
    return [b - a for a, b in zip(elapsed[warmup:], elapsed[warmup + 1:])]


def clean(durations, slice_s):
    """Drops iterations that span a pause, and the one after each (its caches are cold)."""
    kept, skip = [], False
    for d in durations:
        if d > slice_s / 2:
            skip = True
            continue
        if not skip:
            kept.append(d)
        skip = False
    return kept


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("-b", "--batch", type=int, default=64)
    ap.add_argument("-i", "--iterations", type=int, default=600,
                    help="timed iterations each (the run ends when either finishes)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed iterations first")
    ap.add_argument("--slice", type=float, default=1.0,
                    help="seconds per turn; several iterations long (one over half a turn is "
                    "taken for a pause and dropped)")
    ap.add_argument("--bf16", action="store_true",
                    help="both in bfloat16: cgdp --precision bf16 against PyTorch's CPU autocast "
                    "(bf16, channels_last)")
    ap.add_argument("--baseline", metavar="CGDP",
                    help="another cgdp binary (e.g. an older commit's build) that takes turns too, "
                    "so a change is measured against it at the same moments")
    args = ap.parse_args()
    binary = os.path.join(ROOT, "build", "cgdp")
    if not os.access(binary, os.X_OK):
        subprocess.run([os.path.join(ROOT, "tools", "build.sh"), "cgdp"], check=True,
                       stdout=sys.stderr)
    cgdps = {"cgdp": binary}
    if args.baseline:
        if not os.access(args.baseline, os.X_OK):
            sys.exit(f"fashion_peer: --baseline {args.baseline}: not an executable file")
        cgdps["baseline"] = args.baseline

    with tempfile.TemporaryDirectory() as work:
        durations = os.path.join(work, "torch.txt")
        print(f"fashion_cnn training{' in bf16' if args.bf16 else ''}, batch {args.batch}, "
              f"{args.threads} threads, turns of "
              f"{args.slice:g} s; load average before: {open('/proc/loadavg').read()[:14]}")
        logs = {name: open(os.path.join(work, name + ".log"), "w") for name in [*cgdps, "pytorch"]}
        commands = {name: cgdp_command(args, path, os.path.join(work, name + ".jsonl"))
                    for name, path in cgdps.items()}
        commands["pytorch"] = torch_command(args, durations)
        processes = {name: subprocess.Popen(command, stdout=logs[name], stderr=subprocess.STDOUT)
                     for name, command in commands.items()}
        take_turns(list(processes.values()), args.slice)
        for name, p in processes.items():
            logs[name].close()
            if p.returncode not in (0, -signal.SIGKILL):
                sys.exit(f"fashion_peer: {name} failed:\n" +
                         open(os.path.join(work, name + ".log")).read())
        times = {name: clean(cgdp_durations(os.path.join(work, name + ".jsonl"), args.warmup),
                             args.slice) for name in cgdps}
        times["pytorch"] = clean([float(x) for x in open(durations)], args.slice)

    print(f"load average after: {open('/proc/loadavg').read()[:14]}")
    print("%-10s %10s %12s %12s" % ("framework", "iterations", "median ms", "images/s"))
    for name, t in times.items():
        if len(t) < 50:
            sys.exit(f"fashion_peer: {name} timed only {len(t)} clean iterations before another "
                     "finished; raise --iterations")
        print("%-10s %10d %12.2f %12.1f" % (name, len(t), 1e3 * statistics.median(t),
                                           args.batch / statistics.median(t)))
    speed = {name: 1 / statistics.median(t) for name, t in times.items()}
    print("cgdp/pytorch: %.2fx" % (speed["cgdp"] / speed["pytorch"]))
    if args.baseline:
        print("baseline/pytorch: %.2fx" % (speed["baseline"] / speed["pytorch"]))
        print("cgdp/baseline: %.2fx" % (speed["cgdp"] / speed["baseline"]))


if __name__ == "__main__":
    main()
