"""What a bench script needs: the set-up it names on its `Set-up:` line, the programs it runs
(bash) and the Python modules it imports."""
import glob
import os
import re

from setup_check.debian import run

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
