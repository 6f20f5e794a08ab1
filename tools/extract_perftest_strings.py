#!/usr/bin/env python3
"""Regenerate rdmadoctor/knowledge/messages/perftest_strings.tsv from perftest's own source.

    python3 tools/extract_perftest_strings.py PERFTEST_DIR [--commit SHA]
    python3 tools/extract_perftest_strings.py --git-dir DIR --commit SHA
    options: -o OUT (default: the package's table; "-" for stdout), --check (compare, write nothing)

PERFTEST_DIR is a checkout of linux-rdma/perftest (its commit is read with git unless --commit names
it); --git-dir reads the same files from a bare repository at COMMIT. The table holds one row per
message text perftest can print: file, enclosing function, stream, and the C string literal as
written in src/*.c and src/*.h. rdmadoctor/logparse/catalog.py compiles each literal into a pattern,
so a message no curated catalogue entry covers is still recognised, with its file and function.

What counts as a message:
  * printf(FMT, ...), puts(S)                   stream "stdout"
  * fprintf(stdout|stderr, FMT, ...), fputs(S, stdout|stderr)
                                                stream "stdout" or "stderr"
  * perror(S)                                   stream "stderr(perror)" (the C library appends ": "
                                                and strerror(errno))
  * error_handler(S), and in a function that calls error_handler(VAR): VAR = S, sprintf(VAR, S, ...),
    snprintf(VAR, N, S, ...)                   stream "stderr(error_handler)" (perftest_resources.c
                                                error_handler prints the text, then "ERRNO: ...")
  FMT is the string the argument starts with: adjacent literals and macros defined as a string
  (VALIDATION_LOG_PREFIX) are joined into one literal, an inttypes.h macro between them stays as
  `" PRIu64 "` (catalog.py reads it as a number), and the literal ends at any other token (a macro
  parameter, a variable). Calls inside a #define are attributed to the macro. Arguments that do not
  start with a string (printf(cond ? RESULT_FMT : RESULT_FMT_G)) print result-table headers, not
  messages, and are left out, as are empty literals.
  Every stderr text is kept. A stdout text is kept only when it is a diagnostic: it is not printed by
  the help, banner or report functions (names containing usage, print or report) and its words say
  that something failed or is unsupported, or that perftest overrides what the user asked for
  (STDOUT_DIAGNOSTIC below). The rest of stdout is help text, the test banner, result tables, progress
  and debug traces.

One row per text: where several files print the same literal, the row names the first site in file
name order. The rows of the shared modules every test links (FILE_ORDER) come first, then the other
files in name order, each file's rows in source order.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "rdmadoctor" / "knowledge" / "messages" / "perftest_strings.tsv"

# The shared modules every test links open the table, in this order.
FILE_ORDER = ("perftest_communication.c", "perftest_resources.c", "perftest_resources.h",
              "perftest_parameters.c", "perftest_parameters.h")

STDOUT_DIAGNOSTIC = re.compile(
    r"(?i)error|\b(?:fail(?:s|ed|ure)?|unable|cannot|can't|could ?not|couldn't|invalid|unsupported"
    r"|not supported|doesn't supports?|does not support|not available|missing|mismatch|warning"
    r"|assertion|only|should|must|requires?|changing|forced|disabling|increasing|not set"
    r"|requested)\b")
NOT_MESSAGE_FUNCTION = re.compile(r"usage|print|report")

_COMMENT_OR_QUOTED = re.compile(r'(/\*.*?\*/|//[^\n]*)|("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')',
                                re.S)
_TOKEN = re.compile(r'\s*(?:("(?:\\.|[^"\\\n])*")|(\'(?:\\.|[^\'\\\n])*\')|([A-Za-z_]\w*)|(\.?\d[\w.]*)'
                    r'|(->|\+\+|--|<<=|>>=|<<|>>|&&|\|\||##|[-+*/%&|^!=<>]=|\.\.\.|\S))')
_KINDS = ("str", "chr", "id", "num", "op")
_INTTYPES = re.compile(r"PRI[diouxX](?:8|16|32|64|PTR|MAX|LEAST\d+|FAST\d+)")
_NOT_FUNCTIONS = frozenset({"if", "while", "for", "switch", "return", "sizeof"})

Token = Tuple[str, str]


class Row(NamedTuple):
    file: str
    function: str
    stream: str
    literal: str


def tokenize(code: str) -> List[Token]:
    tokens = []
    for m in _TOKEN.finditer(code):
        kind = m.lastindex or 0
        tokens.append((_KINDS[kind - 1], m.group(kind)))
    return tokens


def logical_lines(text: str) -> List[str]:
    """Comments blanked (line count kept), backslash-newline spliced, as the C preprocessor does."""
    def blank(m: "re.Match[str]") -> str:
        return " " + "\n" * m.group(1).count("\n") if m.group(1) else m.group(2)
    return _COMMENT_OR_QUOTED.sub(blank, text).replace("\\\n", "").split("\n")


def call_arguments(tokens: Sequence[Token], name_at: int) -> List[List[Token]]:
    """The top-level arguments of the call whose name is tokens[name_at] (followed by '(')."""
    depth = 0
    args: List[List[Token]] = []
    current: List[Token] = []
    for tok in tokens[name_at + 2:]:
        if tok[0] == "op" and tok[1] in "([{":
            depth += 1
        elif tok[0] == "op" and tok[1] in ")]}":
            if depth == 0:
                break
            depth -= 1
        if tok == ("op", ",") and depth == 0:
            args.append(current)
            current = []
        else:
            current.append(tok)
    args.append(current)
    return args


def leading_literal(arg: Sequence[Token], strings: Dict[str, str]) -> Optional[str]:
    """The string an argument starts with, adjacent literals joined; None if it starts otherwise.

    strings: the object-like macros defined as a string (VALIDATION_LOG_PREFIX), by name -> body."""
    body, started = "", False
    for kind, text in arg:
        if kind == "str":
            body += text[1:-1]
        elif kind == "id" and text in strings:
            body += strings[text]
        elif kind == "id" and started and _INTTYPES.fullmatch(text):
            body += f'" {text} "'
        else:
            break
        started = True
    return f'"{body}"' if body else None


def string_macros(sources: Dict[str, str]) -> Dict[str, str]:
    """#define NAME "text" ["more"] in any of the files (the headers every file includes)."""
    macros = {}
    for text in sources.values():
        for line in logical_lines(text):
            m = re.match(r"\s*#\s*define\s+(\w+)\s+(\".*)$", line)
            if not m:
                continue
            tokens = tokenize(m.group(2))
            if all(kind == "str" or (kind == "id" and _INTTYPES.fullmatch(t)) for kind, t in tokens):
                body = leading_literal(tokens, {})
                if body:
                    macros[m.group(1)] = body[1:-1]
    return macros


Printed = Optional[Tuple[str, Sequence[Token]]]   # (stream, the argument the text starts), None: no message


def _to_stdout(name: str, args: List[List[Token]], handler_vars: Set[str]) -> Printed:
    return "stdout", args[0]                                         # printf(FMT, ...), puts(S)


def _to_file(name: str, args: List[List[Token]], handler_vars: Set[str]) -> Printed:
    # fprintf(STREAM, FMT, ...), fputs(S, STREAM): a message only when STREAM is stdout or stderr
    target = args[0] if name == "fprintf" else args[-1]
    if len(args) >= 2 and len(target) == 1 and target[0][1] in ("stdout", "stderr"):
        return target[0][1], args[1] if name == "fprintf" else args[0]
    return None


def _to_perror(name: str, args: List[List[Token]], handler_vars: Set[str]) -> Printed:
    return "stderr(perror)", args[0]


def _to_error_handler(name: str, args: List[List[Token]], handler_vars: Set[str]) -> Printed:
    return "stderr(error_handler)", args[0]


def _into_error_handler_var(name: str, args: List[List[Token]], handler_vars: Set[str]) -> Printed:
    # sprintf(VAR, FMT, ...), snprintf(VAR, N, FMT, ...): a message only when VAR goes to error_handler
    fmt_at = 1 if name == "sprintf" else 2
    if len(args) > fmt_at and len(args[0]) == 1 and args[0][0][1] in handler_vars:
        return "stderr(error_handler)", args[fmt_at]
    return None


# the calls that print a message, each with where its text goes
_PRINTING_CALLS: Dict[str, Callable[[str, List[List[Token]], Set[str]], Printed]] = {
    "printf": _to_stdout, "puts": _to_stdout, "fprintf": _to_file, "fputs": _to_file, "perror": _to_perror,
    "error_handler": _to_error_handler, "sprintf": _into_error_handler_var, "snprintf": _into_error_handler_var,
}


def _error_handler_vars(tokens: Sequence[Token]) -> Set[str]:
    """The variables passed to error_handler(VAR): the text assigned or formatted into one is printed."""
    handler_vars = set()
    for i in range(len(tokens) - 1):
        if tokens[i] == ("id", "error_handler") and tokens[i + 1] == ("op", "("):
            first = call_arguments(tokens, i)[0]
            if len(first) == 1 and first[0][0] == "id":
                handler_vars.add(first[0][1])
    return handler_vars


def messages(tokens: Sequence[Token], strings: Dict[str, str]) -> Iterator[Tuple[int, str, str]]:
    """(token index, stream, literal) of every message printed in tokens."""
    handler_vars = _error_handler_vars(tokens)
    for i in range(len(tokens) - 1):
        kind, name = tokens[i]
        if kind != "id":
            continue
        printed: Printed = None
        if tokens[i + 1] == ("op", "=") and name in handler_vars:
            printed = "stderr(error_handler)", tokens[i + 2:]          # VAR = S
        elif tokens[i + 1] == ("op", "(") and name in _PRINTING_CALLS:
            printed = _PRINTING_CALLS[name](name, call_arguments(tokens, i), handler_vars)
        literal = leading_literal(printed[1], strings) if printed else None
        if printed and literal:
            yield i, printed[0], literal


def function_opened_at(tokens: Sequence[Token], brace: int) -> Optional[str]:
    """The function whose body opens with tokens[brace] at file scope, or None (struct, initialiser)."""
    j = brace - 1
    if j < 0 or tokens[j] != ("op", ")"):
        return None
    depth = 0
    while j >= 0:
        if tokens[j] == ("op", ")"):
            depth += 1
        elif tokens[j] == ("op", "("):
            depth -= 1
            if depth == 0:
                break
        j -= 1
    if j > 0 and tokens[j - 1][0] == "id" and tokens[j - 1][1] not in _NOT_FUNCTIONS:
        return tokens[j - 1][1]
    return None


class _FileScan:
    """One source file read line by line: its tokens outside preprocessor directives, the function each of
    them is in, and the messages of its macros."""

    def __init__(self, strings: Dict[str, str]) -> None:
        self.strings = strings
        self.found: List[Tuple[Tuple[int, int, int], str, str, str]] = []   # (place, function, stream, literal)
        self.code: List[Token] = []
        self.functions: List[Optional[str]] = []
        self.conditionals: List[List[Optional[int]]] = []   # per open #if: [depth at #if, depth after 1st branch]
        self.depth = 0
        self.function: Optional[str] = None

    def directive(self, stripped: str) -> None:
        directive = re.match(r"#\s*(\w+)\s*(.*)", stripped)
        keyword, rest = (directive.group(1), directive.group(2)) if directive else ("", "")
        # Branches of a conditional may each open a brace (`if (a) {` / `if (b) {`): every branch
        # starts from the depth at #if, and the first branch's depth carries on after #endif.
        if keyword in ("if", "ifdef", "ifndef"):
            self.conditionals.append([self.depth, None])
        elif keyword in ("elif", "else") and self.conditionals:
            if self.conditionals[-1][1] is None:
                self.conditionals[-1][1] = self.depth
            self.depth = self.conditionals[-1][0] or 0
        elif keyword == "endif" and self.conditionals:
            after_first = self.conditionals.pop()[1]
            if after_first is not None:
                self.depth = after_first
        elif keyword == "define":
            self._define(rest)

    def _define(self, rest: str) -> None:
        """The messages a macro's body prints, attributed to the macro."""
        macro = re.match(r"(\w+)(\([^)]*\))?(.*)", rest)
        if macro:
            for _i, stream, literal in messages(tokenize(macro.group(3)), self.strings):
                self.found.append(((len(self.code), 0, len(self.found)), macro.group(1), stream, literal))

    def code_line(self, line: str) -> None:
        for tok in tokenize(line):
            self.code.append(tok)
            if tok == ("op", "{"):
                if self.depth == 0:
                    self.function = function_opened_at(self.code, len(self.code) - 1)
                self.depth += 1
            elif tok == ("op", "}"):
                self.depth -= 1
                if self.depth == 0:
                    self.function = None
            self.functions.append(self.function)


def extract_file(name: str, text: str, strings: Dict[str, str]) -> List[Row]:
    """Every message of one source file, in source order."""
    scan = _FileScan(strings)
    for line in logical_lines(text):
        stripped = line.strip()
        if stripped.startswith("#"):
            scan.directive(stripped)
        else:
            scan.code_line(line)
    found = list(scan.found)
    for i, stream, literal in messages(scan.code, strings):
        found.append(((i, 1, 0), scan.functions[i] or "-", stream, literal))
    return [Row(name, function, stream, literal) for _key, function, stream, literal in sorted(found)]


def is_message(row: Row) -> bool:
    if row.stream != "stdout":
        return True
    if NOT_MESSAGE_FUNCTION.search(row.function):
        return False
    return bool(STDOUT_DIAGNOSTIC.search(row.literal.replace("\\n", " ")))


def table(sources: Dict[str, str]) -> List[Row]:
    """sources: file name -> text, for src/*.c and src/*.h."""
    strings = string_macros(sources)
    rows, seen = [], set()
    for name in sorted(sources):
        for row in extract_file(name, sources[name], strings):
            if is_message(row) and row.literal not in seen:
                seen.add(row.literal)
                rows.append(row)
    # A stable sort: each file's rows keep their source order.
    return sorted(rows, key=lambda r: (FILE_ORDER.index(r.file), "") if r.file in FILE_ORDER
                  else (len(FILE_ORDER), r.file))


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True,
                          text=True, encoding="utf-8", errors="replace").stdout


def read_git(git_dir: str, commit: str) -> Tuple[Dict[str, str], str]:
    sha = _git(git_dir, "rev-parse", "--verify", f"{commit}^{{commit}}").strip()
    names = _git(git_dir, "ls-tree", "--name-only", sha, "src/").split()
    sources = {Path(n).name: _git(git_dir, "show", f"{sha}:{n}")
               for n in names if n.endswith((".c", ".h"))}
    return sources, sha


def read_dir(directory: str, commit: Optional[str]) -> Tuple[Dict[str, str], str]:
    src = Path(directory) / "src"
    if not src.is_dir():
        sys.exit(f"{directory}: no src/ directory (expected a linux-rdma/perftest tree)")
    sources = {p.name: p.read_text(encoding="utf-8", errors="replace")
               for p in sorted(src.iterdir()) if p.suffix in (".c", ".h") and p.is_file()}
    if commit is None:
        head = subprocess.run(["git", "-C", directory, "rev-parse", "HEAD"], check=False,
                              capture_output=True, text=True)
        if head.returncode != 0:
            sys.exit(f"{directory} is not a git checkout: name its perftest commit with --commit")
        commit = head.stdout.strip()
    return sources, commit


def render(rows: Sequence[Row], commit: str) -> str:
    generated = "# Generated by tools/extract_perftest_strings.py from linux-rdma/perftest commit"
    lines = [f"{generated} {commit}.", "# Columns: file, function, stream, C literal."]
    lines += ["\t".join(row) for row in rows]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("perftest_dir", nargs="?", help="a linux-rdma/perftest checkout")
    parser.add_argument("--git-dir", help="a linux-rdma/perftest git directory (bare is fine)")
    parser.add_argument("--commit", help="the commit to read (with --git-dir) or to name (with a dir)")
    parser.add_argument("-o", "--output", default=str(OUT), help='the table to write ("-": stdout)')
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the table differs from --output, write nothing")
    args = parser.parse_args(argv)
    if bool(args.perftest_dir) == bool(args.git_dir):
        parser.error("give PERFTEST_DIR or --git-dir DIR --commit SHA")
    if args.git_dir:
        if not args.commit:
            parser.error("--git-dir needs --commit")
        sources, commit = read_git(args.git_dir, args.commit)
    else:
        sources, commit = read_dir(args.perftest_dir, args.commit)
    rows = table(sources)
    text = render(rows, commit)
    if args.check:
        current = Path(args.output).read_text(encoding="utf-8") if Path(args.output).is_file() else ""
        if current != text:
            print(f"{args.output} differs from perftest {commit}", file=sys.stderr)
            return 1
        return 0
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"{len(rows)} strings -> {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
