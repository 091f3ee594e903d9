"""Every file outside the source tree that a CMake build (Makefile generator) read or that the
programs it made load, each with where the build met it."""
import functools
import glob
import os
import re
import shlex

from setup_check.debian import CheckError, run


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


def cache_entries(build):
    """CMakeCache.txt's entries, name -> value."""
    entries = {}
    with open(os.path.join(build, "CMakeCache.txt"), errors="replace") as f:
        for line in f:
            m = re.match(r"([^#/][^:=]*):([A-Z]+)=(.*)$", line.rstrip("\n"))
            if m:
                entries[m.group(1)] = m.group(3)
    return entries


def files_in_cache(entries):
    """Absolute file paths among the cache's values (compilers, libraries, protoc, …)."""
    read = {}
    for name, value in entries.items():
        for path in value.split(";"):
            if path.startswith("/") and os.path.isfile(path):
                read.setdefault(os.path.normpath(path), f"CMakeCache.txt: {name}")
    return read


@functools.lru_cache(maxsize=None)
def library_file(name, compiler):
    """Where the linker finds -l`name`: gcc's own search, shared before static (asked once per
    name: every test's link line names the same libraries)."""
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
    """What the dynamic loader maps for each program the build made (one ldd for all: with
    several files it heads each one's list with "file:")."""
    read = {}
    programs = built_programs(build)
    if not programs:
        return read
    out = run(["ldd", *programs], check=False).stdout
    program = programs[0]
    for line in out.splitlines():
        if not line.startswith(("\t", " ")) and line.endswith(":"):
            program = line[:-1]
            continue
        for lib in re.findall(r"(?:=>\s*)?(/\S+)\s+\(0x", line):
            read.setdefault(os.path.normpath(lib), f"ldd {os.path.relpath(program, build)}")
    return read


def files_build_read(build, source):
    """path -> where the build met it, for every file outside the source and build trees."""
    entries = cache_entries(build)
    compiler = entries.get("CMAKE_CXX_COMPILER") or "c++"
    read = {}
    for found in (files_in_cache(entries), files_cmake_read(build), files_in_depfiles(build),
                  files_on_link_lines(build, compiler), libraries_loaded(build)):
        for path, where in found.items():
            read.setdefault(path, where)
    inside = tuple({os.path.realpath(d) + os.sep for d in (source, build)} | {source + os.sep})
    return {p: w for p, w in read.items()
            if os.path.isabs(p) and not p.startswith(inside)
            and not os.path.realpath(p).startswith(inside)}
