#!/usr/bin/python3
"""Turns a CUDA source (.cu) into C++ that the kernel emulator (emulated_cuda.hpp) compiles: each
launch `callee<<<grid, block[, shared[, stream]]>>>(args);` becomes

    ::cgdp_emulation::launch({"callee", "file:line", dim3(grid), dim3(block), shared, stream},
                             [=](const auto&... a_) { callee(a_...); }, args);

The arguments are evaluated once, on the host, as a launch does, and every emulated thread calls
the kernel with its own copies of them (which may be after the launch returned: the device
emulation runs a launch on its stream's thread, so the lambda captures nothing by reference). Launches are found by balanced-bracket parsing (comments,
string and character literals skipped), not by a regular expression. The output keeps the input's
line numbers, and a #line directive names the input, so compiler messages and __FILE__/__LINE__
point into the .cu file.

Usage: convert_launches.py INPUT.cu OUTPUT.cpp [--name NAME]   (NAME: the file name to report,
       by default INPUT as given)
Exit status: 0 converted; 1 a launch left unconverted or unparseable (file:line: what on stderr);
2 bad usage or unreadable input."""
import argparse
import os
import sys

OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {v: k for k, v in OPENERS.items()}


class LaunchError(Exception):
    """A `<<<` that could not be converted, at `offset` in `text`."""

    def __init__(self, text, offset, what):
        super().__init__(what)
        self.line = text.count("\n", 0, offset) + 1
        self.what = what


def code_mask(text):
    """For each character of `text`, whether it is code (not a comment, string or character
    literal). Raw string literals are not expected in kernels and are treated as plain strings."""
    mask = [True] * len(text)
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif text[i] in "\"'":
            quote, end = text[i], i + 1
            while end < n and text[end] != quote and text[end] != "\n":
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
            if quote == "'" and i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
                i += 1  # a digit separator (1'000), not a character literal
                continue
        else:
            i += 1
            continue
        for k in range(i, end):
            mask[k] = False
        i = end
    return mask


def is_ident(ch):
    return ch.isalnum() or ch == "_"


def skip_space_back(text, mask, i):
    """The last code character at or before i that is not white space (comments skipped)."""
    while i >= 0 and (text[i].isspace() or not mask[i]):
        i -= 1
    return i


def template_start(text, mask, close):
    """The '<' that opens the template arguments closed by the '>' at `close`; a '<' or '>'
    inside parentheses or brackets (a comparison) does not count. None if there is none."""
    angles, brackets = 0, 0
    for i in range(close, -1, -1):
        if not mask[i]:
            continue
        ch = text[i]
        if ch in ")]":
            brackets += 1
        elif ch in "([":
            brackets -= 1
            if brackets < 0:
                return None
        elif brackets == 0 and ch == ">":
            angles += 1
        elif brackets == 0 and ch == "<":
            angles -= 1
            if angles == 0:
                return i
    return None


def callee_start(text, mask, end):
    """Where the callee that ends just before `end` (the `<<<`) begins: a possibly qualified name
    with template arguments, e.g. ::ns::kernel<T, (N > 2)>."""
    i = skip_space_back(text, mask, end - 1)
    start = None
    while i >= 0:
        if text[i] == ">":  # template arguments: back to the matching '<'
            i = template_start(text, mask, i)
            if i is None:
                return None
            i = skip_space_back(text, mask, i - 1)
        if i < 0 or not is_ident(text[i]):
            return None
        while i >= 0 and is_ident(text[i]):
            i -= 1
        start = i + 1
        if text[start].isdigit():
            return None
        j = skip_space_back(text, mask, i)
        if j >= 1 and text[j] == ":" and text[j - 1] == ":":
            k = skip_space_back(text, mask, j - 2)
            if k >= 0 and (is_ident(text[k]) or text[k] == ">"):
                i = k  # another qualifier before it
                continue
            return j - 1  # a leading '::'
        return start
    return start


def matching(text, mask, i, closer_at):
    """From i (just after an opener), the index where depth returns to zero at a closer for which
    closer_at(index) is true; brackets ()[]{} must balance in between. None if never."""
    stack = []
    n = len(text)
    while i < n:
        if mask[i]:
            ch = text[i]
            if not stack and closer_at(i):
                return i
            if ch in OPENERS:
                stack.append(ch)
            elif ch in CLOSERS:
                if not stack or stack[-1] != CLOSERS[ch]:
                    return None
                stack.pop()
        i += 1
    return None


def split_top_level(text):
    """`text` split at its commas outside brackets ()[]{}."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in OPENERS:
            depth += 1
        elif ch in CLOSERS:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts]


def c_string(text):
    return '"' + " ".join(text.split()).replace("\\", "\\\\").replace('"', '\\"') + '"'


def convert_one(text, mask, at, name, line):
    """The launch whose `<<<` is at `at`: (start, end, replacement) of the text to replace."""
    start = callee_start(text, mask, at)
    if start is None:
        raise LaunchError(text, at, "no kernel name before '<<<'")
    before = skip_space_back(text, mask, start - 1)
    if before >= 0 and (text[before] == "." or text.startswith("->", before - 1)):
        raise LaunchError(text, at, "a kernel reached through an object ('.' or '->'): "
                                    "not supported")
    callee = " ".join(text[start:at].split())
    config_end = matching(text, mask, at + 3, lambda i: text.startswith(">>>", i))
    if config_end is None:
        raise LaunchError(text, at, f"{callee}: no '>>>' closing the launch configuration")
    config = split_top_level(text[at + 3:config_end])
    if not 2 <= len(config) <= 4 or not all(config):
        raise LaunchError(text, at, f"{callee}: the configuration "
                                    f"<<<{text[at + 3:config_end]}>>> has not 2 to 4 parts")
    paren = config_end + 3
    while paren < len(text) and text[paren].isspace():
        paren += 1
    if paren >= len(text) or text[paren] != "(":
        raise LaunchError(text, at, f"{callee}: no '(' with the arguments after '>>>'")
    args_end = matching(text, mask, paren + 1, lambda i: text[i] == ")")
    if args_end is None:
        raise LaunchError(text, at, f"{callee}: the arguments' parentheses do not balance")
    semicolon = args_end + 1
    while semicolon < len(text) and text[semicolon].isspace():
        semicolon += 1
    if semicolon >= len(text) or text[semicolon] != ";":
        raise LaunchError(text, at, f"{callee}: no ';' after the launch (a launch must be a "
                                    "statement)")
    args = text[paren + 1:args_end]
    shared = config[2] if len(config) > 2 else "0"
    stream = config[3] if len(config) > 3 else "nullptr"
    site = c_string(f"{name}:{line}")
    # The arguments keep their own line breaks, so the lines after the launch keep their numbers.
    replacement = (f"::cgdp_emulation::launch({{{c_string(callee)}, {site}, dim3({config[0]}), "
                   f"dim3({config[1]}), static_cast<size_t>({shared}), "
                   f"static_cast<cudaStream_t>({stream})}}, "
                   f"[=](const auto&... a_) {{ {callee}(a_...); }}"
                   + (f", {args});" if args.strip() else ");"))
    lost = text.count("\n", start, semicolon + 1) - replacement.count("\n")
    return start, semicolon + 1, replacement + "\n" * max(lost, 0)


def convert(text, name):
    """`text` with every launch converted; raises LaunchError on the first one that fails."""
    mask = code_mask(text)
    out, done, i = [], 0, 0
    while True:
        at = text.find("<<<", i)
        if at < 0:
            break
        if not mask[at]:
            i = at + 3
            continue
        line = text.count("\n", 0, at) + 1
        start, end, replacement = convert_one(text, mask, at, name, line)
        if start < done:
            raise LaunchError(text, at, "a launch inside another launch's statement")
        out.append(text[done:start])
        out.append(replacement)
        done = i = end
    out.append(text[done:])
    result = "".join(out)
    result_mask = code_mask(result)
    left = [k for k in range(len(result)) if result.startswith("<<<", k) and result_mask[k]]
    if left:  # the output keeps the input's lines: its line is the input's
        raise LaunchError(result, left[0], "a '<<<' is left unconverted")
    header = (f"// Generated by tests/kernel_emulation/convert_launches.py from {name}: "
              "do not edit.\n#include \"emulated_cuda.hpp\"\n"
              f"#line 1 {c_string(name)}\n")
    return header + result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--name", help="the input's name in messages and #line (default: INPUT)")
    args = parser.parse_args()
    name = args.name or args.input
    try:
        with open(args.input, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        print(f"{args.input}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        converted = convert(text, name)
    except LaunchError as e:
        print(f"{name}:{e.line}: {e.what}", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    partial = args.output + ".partial"  # renamed when whole: make never sees half a file
    with open(partial, "w", encoding="utf-8") as f:
        f.write(converted)
    os.replace(partial, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
