#!/usr/bin/env python3
"""Checks every expectation bit of tests/regex/idioms.hpp against the `regex` package (regex.match for
`re:` patterns, equality for exact names), so the C++ tests that use the table test vLLM's answers."""
import re
import sys

import regex

text = open(sys.argv[1], encoding="utf-8").read()
unescape = lambda s: s.replace('\\"', '"').replace("\\\\", "\\")
names_block = text.split("idiom_names[] = {")[1].split("};")[0]
names = [unescape(m) for m in re.findall(r'"((?:[^"\\]|\\.)*)"', names_block)]
idioms = [(unescape(p), int(bits, 2)) for p, bits in
          re.findall(r'\{"((?:[^"\\]|\\.)*)", 0b([01]+)\}', text.split("idioms[] = {")[1])]
bad = 0
for pattern, bits in idioms:
    for k, name in enumerate(names):
        want = bool(regex.compile(pattern[3:]).match(name)) if pattern.startswith("re:") else pattern == name
        if want != bool((bits >> k) & 1):
            bad += 1
            print("WRONG: %r on %r: regex says %s" % (pattern, name, want))
print("idioms: %d patterns x %d names checked against regex %s, %d wrong" % (len(idioms), len(names),
                                                                            regex.__version__, bad))
sys.exit(1 if bad or not idioms else 0)
