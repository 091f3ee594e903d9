"""Debian's side of the set-up check: which packages a set-up script brings (with apt's hard
dependencies) and which package owns a file (dpkg -S), and the verdict that joins the two."""
import collections
import os
import re
import subprocess

OUT_OF_SCOPE = ("/usr/local/cuda",)  # the CUDA toolkit: installed outside Debian's packages


class CheckError(Exception):
    """The check itself cannot run (exit 2), as opposed to a package found missing (exit 1)."""


def run(args, check=True):
    done = subprocess.run(args, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise CheckError(f"`{' '.join(args[:3])} …` failed: {done.stderr.strip()[:300]}")
    return done


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
