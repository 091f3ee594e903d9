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
import collections
import glob
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_OF_SCOPE = ("/usr/local/cuda",)  # the CUDA toolkit: installed outside Debian's packages
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NAME = "check_setup_deps"


class CheckError(Exception):
    """The check itself cannot run (exit 2), as opposed to a package found missing (exit 1)."""


def run(args, check=True):
    done = subprocess.run(args, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise CheckError(f"`{' '.join(args[:3])} …` failed: {done.stderr.strip()[:300]}")
    return done


# ---- what the set-up brings ----

def setup_packages(setup, extra_args):
    """The package list of a set-up script, as its --print-packages prints it."""
    if not os.path.isfile(setup):
        raise CheckError(f"{setup}: no such set-up script")
    out = run(["bash", setup, *extra_args, "--print-packages"]).stdout.split()
    if not out:
        raise CheckError(f"{setup} --print-packages printed no package")
    return out


def apt_closure(packages):
    """The packages apt would consider for `packages` with Depends and Pre-Depends followed,
    recommends and suggests not: `apt-cache depends --recurse --no-recommends`."""
    done = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages],
               check=False)
    reached = {line.split(":")[0] for line in done.stdout.splitlines()
               if line and not line[0].isspace() and not line.startswith("<")}
    unknown = [p for p in packages if p not in reached]
    if unknown:
        raise CheckError(f"apt-cache knows no package {', '.join(unknown)}: a typo in the set-up, "
                         "or apt's lists are missing (run apt-get update)")
    return reached


def essential_packages():
    """Packages every Debian system has (Essential: yes): apt will not remove them."""
    out = run(["dpkg-query", "-W", "-f=${Package} ${Essential}\n"]).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith(" yes")}


# ---- what the build read ----

def depfile_paths(text):
    """The prerequisites of a make-syntax dependency file (what gcc -MD and nvcc -MD write)."""
    text = text.replace("\\\n", " ")
    paths = []
    for line in text.splitlines():
        _, sep, deps = line.partition(": ")
        if not sep:
            continue
        words = re.split(r"(?<!\\)\s+", deps.strip())
        paths += [w.replace("\\ ", " ") for w in words if w]
    return paths


def files_in_depfiles(build):
    read = {}
    for depfile in glob.glob(os.path.join(build, "**", "*.d"), recursive=True):
        with open(depfile, errors="replace") as f:
            for path in depfile_paths(f.read()):
                read.setdefault(os.path.normpath(path), os.path.relpath(depfile, build))
    return read


def files_cmake_read(build):
    """CMakeFiles/Makefile.cmake lists every file the configure step read (CMAKE_MAKEFILE_DEPENDS)."""
    path = os.path.join(build, "CMakeFiles", "Makefile.cmake")
    if not os.path.isfile(path):
        raise CheckError(f"{path} is missing: configure {build} with CMake's Makefile generator first")
    with open(path) as f:
        text = f.read()
    block = re.search(r"set\(CMAKE_MAKEFILE_DEPENDS(.*?)\)", text, re.S)
    return {os.path.normpath(p): "CMakeFiles/Makefile.cmake"
            for p in re.findall(r'"([^"]+)"', block.group(1) if block else "")}


def files_in_cache(build):
    """Absolute file paths among CMakeCache.txt's values (compilers, libraries, protoc, …)."""
    read = {}
    with open(os.path.join(build, "CMakeCache.txt"), errors="replace") as f:
        for line in f:
            m = re.match(r"([^#/][^:=]*):([A-Z]+)=(.*)$", line.rstrip("\n"))
            if not m:
                continue
            for value in m.group(3).split(";"):
                if value.startswith("/") and os.path.isfile(value):
                    read.setdefault(os.path.normpath(value), f"CMakeCache.txt: {m.group(1)}")
    return read


def library_file(name, compiler):
    """Where the linker finds -l`name`: gcc's own search, shared before static."""
    for suffix in (".so", ".a"):
        found = run([compiler, f"-print-file-name=lib{name}{suffix}"], check=False).stdout.strip()
        if found.startswith("/") and os.path.exists(found):
            return found
    return None


def files_on_link_lines(build, compiler):
    read = {}
    for link in glob.glob(os.path.join(build, "**", "link.txt"), recursive=True):
        where = os.path.relpath(link, build)
        with open(link) as f:
            for word in shlex.split(f.read()):
                path = None
                if word.startswith("/") and os.path.isfile(word):
                    path = word
                elif word.startswith("-l") and len(word) > 2:
                    path = library_file(word[2:], compiler)
                if path:
                    read.setdefault(os.path.normpath(path), where)
    return read


def built_programs(build):
    programs = []
    for path in glob.glob(os.path.join(build, "**", "*"), recursive=True):
        if os.path.isfile(path) and os.access(path, os.X_OK) and "CMakeFiles" not in path:
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    programs.append(path)
    return programs


def libraries_loaded(build):
    """What the dynamic loader maps for each program the build made (ldd)."""
    read = {}
    for program in built_programs(build):
        out = run(["ldd", program], check=False).stdout
        for lib in re.findall(r"(?:=>\s*)?(/\S+)\s+\(0x", out):
            read.setdefault(os.path.normpath(lib), f"ldd {os.path.relpath(program, build)}")
    return read


def cache_value(build, key):
    with open(os.path.join(build, "CMakeCache.txt"), errors="replace") as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split("=", 1)[1].strip()
    return ""


def files_build_read(build):
    """path -> where the build met it, for every file outside the source and build trees."""
    compiler = cache_value(build, "CMAKE_CXX_COMPILER") or "c++"
    read = {}
    for found in (files_in_cache(build), files_cmake_read(build), files_in_depfiles(build),
                  files_on_link_lines(build, compiler), libraries_loaded(build)):
        for path, where in found.items():
            read.setdefault(path, where)
    inside = (os.path.realpath(ROOT) + os.sep, os.path.realpath(build) + os.sep, ROOT + os.sep)
    return {p: w for p, w in read.items()
            if os.path.isabs(p) and not p.startswith(inside)
            and not os.path.realpath(p).startswith(inside)}


# ---- which package owns a file ----

def merged_usr_aliases(path):
    """/lib/x and /usr/lib/x are one file on a merged-/usr system; dpkg knows only the name its
    package shipped."""
    for top in ("/lib", "/lib64", "/bin", "/sbin"):
        if path.startswith(top + "/"):
            return [path, "/usr" + path]
        if path.startswith("/usr" + top + "/"):
            return [path, path[4:]]
    return [path]


def names_of(path):
    """The names dpkg may know a file by: as written, with its directories resolved, and its
    target (for links such as /etc/alternatives)."""
    names = []
    for candidate in (path, os.path.join(os.path.realpath(os.path.dirname(path)),
                                         os.path.basename(path)), os.path.realpath(path)):
        for name in merged_usr_aliases(os.path.normpath(candidate)):
            if name not in names:
                names.append(name)
    return names


def dpkg_owners(names):
    """name -> owning packages, from `dpkg -S` (exact paths; glob characters are skipped)."""
    owners = {}
    plain = sorted(n for n in set(names) if not re.search(r"[*?\[\]\\]", n))
    for i in range(0, len(plain), 400):
        out = run(["dpkg", "-S", *plain[i:i + 400]], check=False).stdout
        for line in out.splitlines():
            if line.startswith("diversion "):
                continue
            pkgs, sep, name = line.partition(": ")
            if sep:
                owners[name.strip()] = [p.strip().split(":")[0] for p in pkgs.split(",")]
    return owners


def owners_of(paths):
    """path -> (the packages that own it, or [] for none)."""
    names = {p: names_of(p) for p in paths}
    known = dpkg_owners([n for ns in names.values() for n in ns])
    return {p: next((known[n] for n in ns if n in known), []) for p, ns in names.items()}


# ---- the verdict ----

def shown(path):
    """A path as the user typed it: relative inside the repository, absolute outside."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def unbrought(read, owners, brought, label, user="the build"):
    """One line per package that owns a file in `read` but is not in `brought`, and one per file
    that no package owns outside the CUDA toolkit."""
    by_package = collections.defaultdict(list)
    unowned = []
    for path, pkgs in owners.items():
        if not pkgs:
            if not path.startswith(OUT_OF_SCOPE):
                unowned.append(path)
        elif not any(p in brought for p in pkgs):
            by_package[" or ".join(sorted(pkgs))].append(path)
    problems = []
    for pkg, paths in sorted(by_package.items()):
        paths.sort()
        more = f" and {len(paths) - 1} more of its files" if len(paths) > 1 else ""
        problems.append(f"{pkg} is not brought by {label} nor by its packages' dependencies, "
                        f"yet {user} uses {paths[0]} ({read[paths[0]]}){more}: add {pkg} to {label}")
    for path in sorted(unowned):
        problems.append(f"{path} ({read[path]}) belongs to no Debian package, so no set-up "
                        "brings it (installed by hand?)")
    return problems


def check_build(args):
    build = os.path.abspath(args.build)
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        raise CheckError(f"{build}/CMakeCache.txt is missing: build first (tools/build.sh)")
    label = shown(args.setup)
    brought = apt_closure(setup_packages(args.setup, [])) | essential_packages()
    read = files_build_read(build)
    owners = owners_of(read)
    if args.verbose:
        for path, pkgs in sorted(owners.items()):
            print(f"  {path}\t{','.join(pkgs) or '-'}\t{read[path]}")
    packages = {p for pkgs in owners.values() for p in pkgs}
    cuda = sum(1 for p, pkgs in owners.items() if not pkgs and p.startswith(OUT_OF_SCOPE))
    return (unbrought(read, owners, brought, label),
            f"{len(read)} files the build read or its programs load: {cuda} under /usr/local/cuda "
            f"(out of scope), the others from {len(packages)} Debian packages", label)


# ---- bench scripts ----

SHELL_WORDS = set("""if then else elif fi for while until do done case esac in function select
time return exit local export declare readonly set shift unset cd echo printf read trap wait eval
exec source true false test break continue let shopt pushd popd command builtin type alias
getopts ulimit umask kill mapfile hash""".split())
PREFIXES = {"exec", "time", "command", "nice", "nohup", "env", "timeout", "sudo", "xargs"}


def _skip_balanced(text, i, opening, closing):
    """The index just past the `closing` that balances the `opening` at text[i]."""
    depth = 0
    while i < len(text):
        if text.startswith(opening, i):
            depth, i = depth + 1, i + len(opening)
        elif text.startswith(closing, i):
            depth, i = depth - 1, i + len(closing)
            if depth == 0:
                return i
        else:
            i += 1
    return i


def shell_code(text):
    """The code of a bash script, one piece per command substitution: comments, quoted text,
    parameter expansions, arithmetic and array values are blanked to `@`, and each `$(…)`, in
    quotes or not, becomes `@` where it stands and a piece of its own."""
    pieces, i = [], 0
    frames = [["code", 0, []]]  # mode ("code" or "dq"), open parens, output
    while i < len(text):
        c, (mode, _, out) = text[i], frames[-1]
        if text.startswith("$((", i) or mode == "code" and text.startswith("((", i):
            i = _skip_balanced(text, i + (c == "$"), "((", "))")
            out.append(" @ ")
        elif text.startswith("${", i):
            i = _skip_balanced(text, i + 1, "{", "}")
            out.append("@")
        elif mode == "code" and re.match(r"\+?=\(", text[i:i + 3]):
            i = _skip_balanced(text, text.index("(", i), "(", ")")
            out.append("=@")
        elif text.startswith("$(", i):
            out.append("@")
            frames.append(["code", 0, []])
            i += 2
        elif c == "\\":
            i += 2
        elif mode == "dq":
            if c == '"':
                frames.pop()
            i += 1
        elif c == '"':
            out.append("@")
            frames.append(["dq", 0, out])
            i += 1
        elif c == "'":
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
            out.append("@")
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif c == ")" and frames[-1][1] == 0 and len(frames) > 1:
            pieces.append("".join(frames.pop()[2]))
            i += 1
        else:
            frames[-1][1] += (c == "(") - (c == ")")
            out.append(c)
            i += 1
    return "\n".join(["".join(frames[0][2])] + pieces)


def shell_commands(text):
    """The programs a bash script runs: the first word of each simple command, leaving out shell
    words, functions it defines, variables and paths (a heuristic that errs toward listing)."""
    text = re.sub(r"<<-?\s*'?(\w+)'?(.*?)\n.*?\n\s*\1\s*\n", r"\2\n", text, flags=re.S)  # heredocs
    code = shell_code(text.replace("\\\n", " "))
    functions = set(re.findall(r"(?m)^\s*(?:function\s+)?([\w-]+)\s*\(\)", code))
    commands = set()
    for piece in re.split(r"\$\(|`|\|\||&&|[|;&(){}\n]|\bthen\b|\bdo\b|\belse\b|!", code):
        words = piece.split()
        if words[:2] in (["command", "-v"], ["command", "-V"]):
            continue  # asks whether a program is there; runs nothing
        while words and (re.match(r"\w+=", words[0]) or words[0] in PREFIXES
                         or words[0].startswith("-") or words[0].isdigit()):
            words.pop(0)
        if words and re.fullmatch(r"[A-Za-z][\w.+-]*", words[0]):
            word = words[0]
            if word not in SHELL_WORDS and word not in functions:
                commands.add(word)
    return commands


def python_imports(text):
    """Top-level modules named by import statements, in a .py file or inline in a shell script."""
    modules = set()
    for m in re.finditer(r"(?m)(?:^|[;'\"]\s*)(?:import\s+([\w., ]+)|from\s+([\w.]+)\s+import)", text):
        names = m.group(1) or m.group(2)
        for name in names.split(","):
            name = name.strip().split(" ")[0]
            if name and not name.startswith("."):
                modules.add(name.split(".")[0])
    return modules


def module_file(module, python="/usr/bin/python3"):
    """Where Debian's python3 finds `module`: a path, 'builtin', or None."""
    code = ("import importlib.util, sys\n"
            f"s = importlib.util.find_spec({module!r})\n"
            "print('none' if s is None else s.origin if s.origin and s.origin.startswith('/') "
            "else 'builtin')")
    out = run([python, "-c", code], check=False).stdout.strip()
    return None if out in ("", "none") else out


SETUP_LINE = re.compile(r"Set-up:\s*(.+)")
GPU_MACHINE = "the GPU machine"


def bench_scripts(bench_dir):
    """The files under `bench_dir` that start with #!."""
    scripts = []
    for path in sorted(glob.glob(os.path.join(bench_dir, "**", "*"), recursive=True)):
        if os.path.isfile(path):
            with open(path, errors="replace") as f:
                if f.read(2) == "#!":
                    scripts.append(path)
    return scripts


def declared_setups(text):
    """The set-ups a script names: `tools/setup-debian.sh [--bench]` and/or `the GPU machine`."""
    m = SETUP_LINE.search("\n".join(text.splitlines()[:40]))
    if not m:
        return None
    setups = []
    for part in m.group(1).split(";"):
        part = re.sub(r"\(.*?\)", "", part).strip().rstrip('."\'')
        setups.append(" ".join(part.split()))
    return setups


def check_bench(args):
    problems, closures, essential = [], {}, essential_packages()
    scripts = bench_scripts(args.bench_dir)
    for script in scripts:
        rel = shown(script)
        with open(script, errors="replace") as f:
            text = f.read()
        setups = declared_setups(text)
        if not setups:
            problems.append(f"{rel}: no `Set-up:` line in its header (say `Set-up: "
                            "tools/setup-debian.sh [--bench]` or `Set-up: the GPU machine`)")
            continue
        debian = [s for s in setups if s.startswith("tools/setup-debian.sh")]
        wrong = [s for s in setups if s not in debian and s != GPU_MACHINE]
        if wrong or not debian and GPU_MACHINE not in setups:
            problems.append(f"{rel}: `Set-up: {'; '.join(setups)}` names no set-up this check "
                            "knows (tools/setup-debian.sh [--bench], the GPU machine)")
            continue
        if not debian:
            continue  # runs only where the GPU machine's own CUDA and PyTorch are
        setup_args = debian[0].split()[1:]
        key = " ".join(debian[0].split())
        if key not in closures:
            closures[key] = apt_closure(setup_packages(args.setup, setup_args)) | essential
        brought = closures[key]
        needed = {}
        if GPU_MACHINE not in setups:  # a script with a GPU half imports what only that has
            for module in python_imports(text):
                if os.path.exists(os.path.join(os.path.dirname(script), module + ".py")):
                    continue  # the bench's own helper
                where = module_file(module)
                if where is None:
                    problems.append(f"{rel}: imports {module}, which /usr/bin/python3 cannot find: "
                                    f"`{key}` does not install it (or was not run)")
                elif where != "builtin":
                    needed[where] = f"import {module}"
        if script.endswith(".sh"):
            for command in sorted(shell_commands(text)):
                found = run(["bash", "-c", f"PATH={SYSTEM_PATH} command -v {command}"],
                            check=False).stdout.strip()
                if not found.startswith("/"):
                    if GPU_MACHINE in setups:
                        continue  # its GPU half runs what only that machine has
                    problems.append(f"{rel}: runs `{command}`, which no program on the system "
                                    f"PATH provides: `{key}` does not install it")
                else:
                    needed[found] = f"runs {command}"
        problems += unbrought(needed, owners_of(needed), brought, key, user=rel)
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
