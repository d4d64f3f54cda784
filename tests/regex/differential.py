#!/usr/bin/env python3
"""Differential test of qpolicy's `re:` matcher against the `regex` package vLLM compiles with.

Generates (pattern, name) pairs from a seed -- patterns from a grammar over the constructs qpolicy
runs, names layer-like (ASCII and not) or drawn from the pattern's own characters -- and compares, per
pair, what `regex.match` says (match, no match, or the compile error's message) with what
tests/regex/regex_oracle answers. A pattern qpolicy refuses as unsupported is counted, not failed,
unless the refusal rate passes --max-unsupported. Prints the first disagreements and a summary line.

    differential.py ORACLE --pairs 20000 --seed 1
"""
import argparse
import json
import random
import subprocess
import sys

import regex

LETTERS = "abcxyz"
ODD = ["é", "K", "\u212a", "ſ", "ß", "ẞ", "İ", "ı", "Σ", "σ", "ς", "ǅ", "٣", "\u00a0", "Ⅻ", "𝐀", "_", "0", "7"]
PUNCT = [".", "_", "-", "/"]


class Gen:
    def __init__(self, rnd):
        self.r = rnd
        self.groups = 0
        self.names = []

    def pick(self, *opts):
        return self.r.choice(opts)

    def char(self):
        r = self.r.random()
        if r < 0.55:
            return self.r.choice(LETTERS)
        if r < 0.7:
            return "\\" + self.r.choice(PUNCT) if self.r.random() < 0.5 else self.r.choice(["_", "-", "/"])
        if r < 0.85:
            return self.r.choice(ODD)
        return self.r.choice(["0", "1", "9"])

    def set_item(self):
        r = self.r.random()
        if r < 0.3:
            return self.r.choice(LETTERS + "_.019")
        if r < 0.45:
            a, b = sorted(self.r.sample("abcxyz019", 2))
            return a + "-" + b
        if r < 0.6:
            return self.r.choice(["\\d", "\\w", "\\s", "\\W", "\\D", "\\S", "\\h"])
        if r < 0.72:
            return self.r.choice(["[:alpha:]", "[:digit:]", "[:alnum:]", "[:upper:]", "[:lower:]", "[:punct:]",
                                  "[:space:]", "[:word:]", "[:xdigit:]", "[:^alpha:]", "[:ascii:]", "[:graph:]",
                                  "[:print:]", "[:blank:]", "[:cntrl:]"])
        if r < 0.82:
            return self.r.choice(["\\p{L}", "\\p{Lu}", "\\p{Ll}", "\\P{L}", "\\p{N}", "\\p{Nd}", "\\pL", "\\p{P}",
                                  "\\p{Zs}", "\\p{^Lu}", "\\p{gc=Lo}", "\\p{Alphabetic}", "\\p{Letter}"])
        return self.r.choice(ODD)

    def atom(self, depth):
        r = self.r.random()
        if r < 0.35 or depth > 3:
            return self.char()
        if r < 0.42:
            return "."
        if r < 0.52:
            items = "".join(self.set_item() for _ in range(self.r.randint(1, 3)))
            return "[" + ("^" if self.r.random() < 0.3 else "") + items + "]"
        if r < 0.6:
            return self.r.choice(["\\w", "\\d", "\\s", "\\W", "\\D", "\\b", "\\B", "\\p{L}", "\\p{Lu}", "\\P{L}",
                                  "\\p{Nd}", "\\m", "\\M", "\\h", "\\pN"])
        if r < 0.64:
            return self.r.choice(["^", "$", "\\A", "\\Z", "\\z", "\\G", "\\K", "\\R", "\\0", "\\101", "\\x41",
                                  "\\u00e9", "{", "}", "a{,}", "[[:foo]", "\\N", "\\p", "\n", "#", "\\#", "[\\b]",
                                  "[\\101-\\x7a]", "(?#c)", "\\ ", "[-a]", "[a-]", "[]-a]", "[^]]"])
        if r < 0.72 and self.groups:
            g = self.r.randint(1, self.groups + (1 if self.r.random() < 0.1 else 0))
            if self.names and self.r.random() < 0.3:
                return "(?P=%s)" % self.r.choice(self.names)
            return self.r.choice(["\\%d" % g, "\\g<%d>" % g])
        if r < 0.8:
            return "(" + self.group_head() + self.alt(depth + 1) + ")"
        if r < 0.86:
            return self.pick("(?=", "(?!", "(?<=", "(?<!") + self.alt(depth + 1) + ")"
        if r < 0.89:
            return "(?>" + self.alt(depth + 1) + ")"
        if r < 0.93 and self.groups:
            g = self.r.randint(1, self.groups)
            return "(?(%d)%s|%s)" % (g, self.seq(depth + 1), self.seq(depth + 1))
        if r < 0.95:
            return "(?%s)" % self.pick("?=", "?!", "?<=", "?<!")[1:] if False else "(?(?=%s)%s|%s)" % (
                self.char(), self.seq(depth + 1), self.seq(depth + 1))
        if r < 0.98:
            f = self.pick("i", "s", "m", "x", "-i", "i-s", "a", "u")
            return "(?%s:%s)" % (f, self.alt(depth + 1))
        return self.pick("(?#note)", "(?i)", "(?s)", "(?m)")

    def group_head(self):
        r = self.r.random()
        if r < 0.5:
            self.groups += 1
            return ""
        if r < 0.7:
            self.groups += 1
            name = "n%d" % self.groups
            self.names.append(name)
            return "?P<%s>" % name
        return "?:"

    def quant(self):
        r = self.r.random()
        if r < 0.7:
            return ""
        q = self.pick("*", "+", "?", "{2}", "{1,3}", "{,2}", "{2,}")
        s = self.r.random()
        if s < 0.2:
            q += "?"
        elif s < 0.3:
            q += "+"
        return q

    def seq(self, depth):
        return "".join(self.atom(depth) + self.quant() for _ in range(self.r.randint(0, 4)))

    def alt(self, depth):
        parts = [self.seq(depth) for _ in range(self.r.randint(1, 2 if depth else 3))]
        return "|".join(parts)

    def pattern(self):
        self.groups = 0
        self.names = []
        p = ""
        r = self.r.random()
        if r < 0.1:
            p = self.pick("(?i)", "(?s)", "(?m)", "(?x)", "(?a)", "(?L)", "(?u)", "(?ix)", "(?-i)", "(?V0)")
        body = self.alt(0)
        if p == "(?x)" or p == "(?ix)":
            body = " ".join(body) + " # comment"
        p += body
        if self.r.random() < 0.05:  # a known-bad fragment
            p = self.pick("(", ")", "*", "a**", "[z-a]", "\\q", "a{3,1}", "(?P<1>a)", "(?<a", "[a", "(?P=zz)",
                          "(?i-i)a", "(?-)", "\\x4", "\\U00110000", "(?(9)a|b)", "\\8", "(?a)(?u)x",
                          "[[:foo:]]", "\\p{Foo}", "(a)(?P=a)", "(?(x)a)") + p
        return p


def layer_name(rnd):
    i = rnd.randint(0, 40)
    tail = rnd.choice(["self_attn.q_proj", "self_attn.qkv_proj", "mlp.gate_up_proj", "mlp.down_proj",
                       "mlp.experts", "input_layernorm", "self_attn.o_proj"])
    name = "model.layers.%d.%s" % (i, tail)
    if rnd.random() < 0.2:
        name = name.replace("layers", rnd.choice(["lâyers", "layérs", "Layers", "LAYERS"]))
    return name


def name_for(rnd, pattern):
    r = rnd.random()
    if r < 0.25:
        return layer_name(rnd)
    pool = [c for c in pattern if c.isalnum() or c in "._-/ " or ord(c) > 127] or list("ab")
    pool += list("abxK_.") + ODD[:6]
    n = rnd.randint(0, 8)
    s = "".join(rnd.choice(pool) for _ in range(n))
    if rnd.random() < 0.05:
        s += "\n"
    return s


def witness(pattern, name):
    try:
        compiled = regex.compile(pattern)
    except regex.error as e:
        return "E " + str(e).replace("\n", " ")
    except ValueError as e:
        return "E " + str(e).replace("\n", " ")
    except Exception as e:  # the package's own crashes: not comparable
        return None
    try:
        return "1" if compiled.match(name, timeout=1.0) else "0"
    except TimeoutError:
        return "T"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("oracle")
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-unsupported", type=float, default=0.03)
    ap.add_argument("--show", type=int, default=15)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    gen = Gen(rnd)
    pairs = []
    for _ in range(args.pairs):
        p = gen.pattern()
        pairs.append((p, name_for(rnd, p)))
    proc = subprocess.run([args.oracle], input="\n".join(json.dumps(list(x)) for x in pairs) + "\n",
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print("oracle failed:", proc.stderr[-2000:])
        return 1
    answers = proc.stdout.split("\n")
    stats = {"pairs": 0, "agree": 0, "matched": 0, "errors": 0, "unsupported": 0, "mismatch": 0, "skipped": 0}
    shown = 0
    refused = {}
    for (p, name), got in zip(pairs, answers):
        stats["pairs"] += 1
        want = witness(p, name)
        if want is None or want == "T":
            stats["skipped"] += 1
            continue
        if got.startswith("U "):
            stats["unsupported"] += 1
            key = got.split(": ")[1].split(" (")[0] if ": " in got else got
            refused[key] = refused.get(key, 0) + 1
            continue
        if got == want:
            stats["agree"] += 1
            stats["matched"] += got == "1"
            stats["errors"] += got.startswith("E")
            continue
        stats["mismatch"] += 1
        if shown < args.show:
            shown += 1
            print("MISMATCH pattern=%r name=%r regex=%r qpolicy=%r" % (p, name, want, got))
    print("differential: %(pairs)d pairs, %(agree)d agree (%(matched)d matches, %(errors)d errors), "
          "%(mismatch)d disagree, %(unsupported)d refused as unsupported, %(skipped)d skipped" % stats)
    for key, count in sorted(refused.items(), key=lambda kv: -kv[1])[:8]:
        print("  refused %6d: %s" % (count, key))
    if stats["mismatch"]:
        return 1
    if stats["unsupported"] > args.max_unsupported * stats["pairs"]:
        print("too many refusals: %d > %.1f%% of the pairs" % (stats["unsupported"], 100 * args.max_unsupported))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
