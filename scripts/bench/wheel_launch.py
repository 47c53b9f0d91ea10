#!/usr/bin/env python3
"""mxrun from the wheel against mxrun from the build: launch-to-exit (issue 36's target: the
wheel's within 5% of the build's). The wheel's programs are linked statically but for glibc, by
another compiler (zig's clang, LLVM's libc++; scripts/build-wheel.sh), the build's load Debian's
shared libraries; this measures what either costs a launch.

  scripts/bench/wheel_launch.py [WHEEL]   (default: the newest dist/mxrun-*.whl; environment:
                                          MXRUN (the build's, default <repo>/build/bin/mxrun), RUNS)

Installs WHEEL into a fresh virtual environment of its own (removed at the end), then runs
`LAUNCHER --standalone --nproc_per_node=N --no_python /bin/true` for N = 1, 2, 4, RUNS times per
launcher (default 100) after one warm-up each, the two launchers in turns whose order alternates
run by run. Medians and the wheel/build ratio, as Markdown on stdout; also the ratio of the 25th
percentiles, since on a 2-core VM both launchers' times fall in two groups (about 7.5 and 15.6 ms
here), and a median near the boundary flips between them from run to run.
"""
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = int(os.environ.get("RUNS", "100"))


def launch_ms(binary, n):
    t0 = time.perf_counter()
    r = subprocess.run([binary, "--standalone", f"--nproc_per_node={n}", "--no_python", "/bin/true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    if r.returncode != 0:
        sys.exit(f"wheel_launch: {binary} exited {r.returncode}")
    return (time.perf_counter() - t0) * 1000


def main():
    wheels = sys.argv[1:] or sorted(glob.glob(os.path.join(REPO, "dist", "mxrun-*.whl")),
                                    key=os.path.getmtime)
    if not wheels:
        sys.exit("wheel_launch: no wheel: run scripts/build-wheel.sh, or name one")
    wheel = wheels[-1]
    build = os.environ.get("MXRUN", os.path.join(REPO, "build/bin/mxrun"))
    venv = tempfile.mkdtemp(prefix="mxrun-wheel-bench.")
    try:
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin/python3"), "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", wheel], check=True)
        launchers = {"wheel": os.path.join(venv, "bin/mxrun"), "build": build}
        print("### mxrun from the wheel against mxrun from the build: launch-to-exit\n")
        print(f"- command: `RUNS={RUNS} scripts/bench/wheel_launch.py {os.path.relpath(wheel, REPO)}`")
        print(f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; nproc="
              f"{os.cpu_count()}; load average at start: {open('/proc/loadavg').read().split()[0]}")
        print(f"- {RUNS} runs per launcher and N after one warm-up, in turns, the order alternating;"
              " medians\n")
        print("| N | wheel, median (min - max) ms | build, median (min - max) ms | wheel / build,"
              " medians | 25th percentiles, wheel / build | target |")
        print("|---:|---:|---:|---:|---:|---:|")
        for n in (1, 2, 4):
            times = {name: [] for name in launchers}
            for name, binary in launchers.items():
                launch_ms(binary, n)  # warm-up
            for i in range(RUNS):
                order = list(launchers.items())
                for name, binary in (order if i % 2 == 0 else order[::-1]):
                    times[name].append(launch_ms(binary, n))
            w, b = statistics.median(times["wheel"]), statistics.median(times["build"])
            q_w = statistics.quantiles(times["wheel"], n=4)[0]
            q_b = statistics.quantiles(times["build"], n=4)[0]
            print(f"| {n} | {w:.2f} ({min(times['wheel']):.2f} - {max(times['wheel']):.2f}) | "
                  f"{b:.2f} ({min(times['build']):.2f} - {max(times['build']):.2f}) | "
                  f"{w / b:.3f} | {q_w:.2f} / {q_b:.2f} = {q_w / q_b:.3f} | <= 1.05 |")
    finally:
        shutil.rmtree(venv, ignore_errors=True)


if __name__ == "__main__":
    main()
