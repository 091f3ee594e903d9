#!/usr/bin/python3
"""Fails, naming the package, when the build read a file from a Debian package that
tools/setup-debian.sh does not bring (with its hard dependencies, as `apt-get install
--no-install-recommends` would). A fresh machine has only what the set-up installs, so such a
package is a build that passes here and fails there.

What counts as read, after a build in BUILD (default build/):
  - every header in the compilers' dependency files (*.d);
  - every CMake file the configure step read (CMakeFiles/Makefile.cmake);
  - every file named in CMakeCache.txt (compilers, libraries, protoc, include files);
  - every library on a link line (link.txt), and every library the built programs load (ldd).
Files no Debian package owns under /usr/local/cuda* (the CUDA toolkit) are out of scope; any
other unowned file is an error too, since it was installed by hand.

With --bench, instead: every script in bench/ names its set-up on a `Set-up:` line, and the
programs it runs and the Python modules it imports come from that set-up's packages.

Usage: tools/check_setup_deps.py [--build DIR] [--setup FILE] [--bench] [-v]
Exit status: 0 all brought, 1 something is not, 2 the check itself could not run."""
import argparse
import os
import shutil
import sys

from setup_check.bench_scripts import (GPU_MACHINE, bench_scripts, declared_setups,
                                       module_file, python_imports, shell_commands)
from setup_check.build_files import files_build_read
from setup_check.debian import (OUT_OF_SCOPE, CheckError, apt_closure, essential_packages,
                                owners_of, setup_packages, unbrought)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NAME = "check_setup_deps"


def shown(path):
    """A path as the user typed it: relative inside the repository, absolute outside."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def check_build(args):
    build = os.path.abspath(args.build)
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        raise CheckError(f"{build}/CMakeCache.txt is missing: build first (tools/build.sh)")
    label = shown(args.setup)
    brought = apt_closure(setup_packages(args.setup, [])) | essential_packages()
    read = files_build_read(build, ROOT)
    owners = owners_of(read)
    if args.verbose:
        for path, pkgs in sorted(owners.items()):
            print(f"  {path}\t{','.join(pkgs) or '-'}\t{read[path]}")
    packages = {p for pkgs in owners.values() for p in pkgs}
    cuda = sum(1 for p, pkgs in owners.items() if not pkgs and p.startswith(OUT_OF_SCOPE))
    return (unbrought(read, owners, brought, label),
            f"{len(read)} files the build read or its programs load: {cuda} under /usr/local/cuda "
            f"(out of scope), the others from {len(packages)} Debian packages", label)


def setup_line_problem(rel, setups):
    """Why a script's `Set-up:` line is not one this check knows, or None."""
    if setups is None:
        return (f"{rel}: no `Set-up:` line in its header (say `Set-up: tools/setup-debian.sh "
                "[--bench]` or `Set-up: the GPU machine`)")
    known = [s for s in setups if s.startswith("tools/setup-debian.sh") or s == GPU_MACHINE]
    if not setups or known != setups:
        return (f"{rel}: `Set-up: {'; '.join(setups)}` names no set-up this check knows "
                "(tools/setup-debian.sh [--bench], the GPU machine)")
    return None


def script_needs(script, text, setup, has_gpu_half):
    """file -> what the script does with it (imports it, runs it), and the problems of what
    Debian's system cannot find. A script with a GPU half may use what only that machine has."""
    rel, needed, problems = shown(script), {}, []
    if not has_gpu_half:
        for module in python_imports(text):
            if os.path.exists(os.path.join(os.path.dirname(script), module + ".py")):
                continue  # the bench's own helper
            where = module_file(module)
            if where is None:
                problems.append(f"{rel}: imports {module}, which /usr/bin/python3 cannot find: "
                                f"`{setup}` does not install it (or was not run)")
            elif where != "builtin":
                needed[where] = f"import {module}"
    for command in sorted(shell_commands(text)) if script.endswith(".sh") else []:
        found = shutil.which(command, path=SYSTEM_PATH)
        if found:
            needed[found] = f"runs {command}"
        elif not has_gpu_half:
            problems.append(f"{rel}: runs `{command}`, which no program on the system PATH "
                            f"provides: `{setup}` does not install it")
    return needed, problems


def check_bench(args):
    problems, closures, essential = [], {}, essential_packages()
    scripts = bench_scripts(args.bench_dir)
    for script in scripts:
        with open(script, errors="replace") as f:
            text = f.read()
        setups = declared_setups(text)
        problem = setup_line_problem(shown(script), setups)
        if problem:
            problems.append(problem)
            continue
        debian = [s for s in setups if s != GPU_MACHINE]
        if not debian:
            continue  # runs only where the GPU machine's own CUDA and PyTorch are
        setup = debian[0]
        if setup not in closures:
            packages = setup_packages(args.setup, setup.split()[1:])
            closures[setup] = apt_closure(packages) | essential
        needed, missing = script_needs(script, text, setup, GPU_MACHINE in setups)
        problems += missing + unbrought(needed, owners_of(needed), closures[setup], setup,
                                        user=shown(script))
    return problems, f"{len(scripts)} bench scripts", "the set-ups they name"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\nUsage:")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"),
                        help="the CMake build directory to read (default: build/)")
    parser.add_argument("--setup", default=os.path.join(ROOT, "tools", "setup-debian.sh"),
                        help="the set-up script whose packages count as brought")
    parser.add_argument("--bench", action="store_true",
                        help="check the bench scripts' Set-up lines instead of the build")
    parser.add_argument("--bench-dir", default=os.path.join(ROOT, "bench"),
                        help="where the bench scripts are (default: bench/)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every file read, its package and where it was met")
    args = parser.parse_args()
    try:
        problems, what, label = (check_bench if args.bench else check_build)(args)
    except CheckError as e:
        print(f"{NAME}: error: {e}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"{NAME}: {problem}")
    if problems:
        print(f"{NAME}: FAILED: {len(problems)} problem(s) in {what}")
        return 1
    print(f"{NAME}: ok: {what}; all brought by {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
