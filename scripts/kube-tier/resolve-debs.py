#!/usr/bin/env python3
"""Resolve the Go source packages a Debian `golang-*-dev` package needs, from Packages files.

Usage: resolve-debs.py PACKAGES_XZ... -- PACKAGE...

Prints one line per package of the closure: `name version filename size sha256`. Only the
dependencies that carry Go source (`golang-*`) are followed: the rest (libc, systemd) is what the
machine already has, and the build never installs anything — the files are only unpacked.
A dependency no Packages file provides is an error naming it.
"""

import lzma
import sys


def stanzas(path):
    with lzma.open(path, "rt", encoding="utf-8") as f:
        for block in f.read().split("\n\n"):
            fields, key = {}, None
            for line in block.split("\n"):
                if line.startswith((" ", "\t")) and key:
                    fields[key] += line
                elif ":" in line:
                    key, value = line.split(":", 1)
                    fields[key] = value.strip()
            if "Package" in fields:
                yield fields


def main(argv):
    if "--" not in argv:
        sys.exit("usage: resolve-debs.py PACKAGES_XZ... -- PACKAGE...")
    split = argv.index("--")
    files, wanted = argv[:split], argv[split + 1 :]
    packages, provides = {}, {}
    for path in files:
        for p in stanzas(path):
            packages[p["Package"]] = p
            for provided in p.get("Provides", "").split(","):
                name = provided.strip().split(" ")[0]
                if name:
                    provides.setdefault(name, p["Package"])
    seen, closure, stack, missing = set(), [], list(wanted), []
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        p = packages.get(name) or packages.get(provides.get(name, ""))
        if p is None:
            missing.append(name)
            continue
        closure.append(p)
        for dep in p.get("Depends", "").split(","):
            first = dep.split("|")[0].strip().split(" ")[0].split(":")[0]
            if first.startswith("golang-"):
                stack.append(first)
    if missing:
        sys.exit("no Packages file provides: " + ", ".join(sorted(missing)))
    for p in sorted(closure, key=lambda p: p["Package"]):
        print(p["Package"], p["Version"], p["Filename"], p["Size"], p["SHA256"])


if __name__ == "__main__":
    main(sys.argv[1:])
