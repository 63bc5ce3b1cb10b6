#!/usr/bin/env python3
"""Library code stays small: no file over 600 lines, no function over 80.

    tools/check_code_size.py FILE...            # C++ sources and headers
    tools/check_code_size.py --max_file=600 --max_function=80 FILE...

Prints one line per file or function over its limit ("core/ops.cc:120:
function 'Gemm' has 95 lines (limit 80)") and exits 1 if there is any.

A function is a brace-delimited body at namespace or class scope whose
header has a parameter list; its length runs from the first line of its
header to its closing brace. Lambdas and nested blocks count towards the
function that holds them. Comments and string literals are ignored when
matching braces.
"""
import argparse
import re
import sys

CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|return)\b")
TYPE_HEADER = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def strip_code(text):
    """Blanks comments, string and character literals, keeping newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """Yields (name, first_line, last_line) of every function body."""
    code = strip_code(text)
    # Preprocessor lines carry no braces we care about.
    code = re.sub(r"^[ \t]*#.*$", lambda m: " " * len(m.group(0)), code, flags=re.M)
    stack = []  # kinds of the open braces: scope, function, block
    header_start = 0  # offset where the current statement began
    for i, c in enumerate(code):
        if c in ";":
            header_start = i + 1
        elif c == "{":
            header = code[header_start:i]
            inside_function = any(k == "function" for k, _, _ in stack)
            if inside_function:
                kind = "block"
            elif TYPE_HEADER.search(header) and "(" not in header.split("=")[0]:
                kind = "scope"
            elif "(" in header and not CONTROL.match(header) and "=" not in header.split("(")[0]:
                kind = "function"
            elif header.strip().startswith("extern"):
                kind = "scope"
            else:
                kind = "block"
            start = header_start + len(header) - len(header.lstrip())
            stack.append((kind, start, header))
            header_start = i + 1
        elif c == "}":
            if not stack:
                continue
            kind, start, header = stack.pop()
            if kind == "function":
                name = re.findall(r"([~\w:]+)\s*\(", header)
                first = text.count("\n", 0, start) + 1
                last = text.count("\n", 0, i) + 1
                yield (name[0] if name else "?"), first, last
            header_start = i + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max_file", type=int, default=600)
    parser.add_argument("--max_function", type=int, default=80)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    problems = []
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.count("\n")
        if lines > args.max_file:
            problems.append(f"{path}: {lines} lines (limit {args.max_file})")
        for name, first, last in functions(text):
            length = last - first + 1
            if length > args.max_function:
                problems.append(f"{path}:{first}: function '{name}' has {length} lines "
                                f"(limit {args.max_function})")
    for p in problems:
        print(p)
    print(f"check_code_size: {len(args.files)} files, {len(problems)} over the limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
