#!/usr/bin/env python3
"""Generate layout.rs: the Go struct layout of v1.PodTemplateSpec for the go-spew printer.

Usage (from the workspace root):
    python3 crates/machinery/src/controller/hash/gen_layout.py CORE_TYPES_GO META_TYPES_GO \
        --release vX.Y [--drop Struct.Field ...] [--k8s-openapi DIR] [--source-note TEXT] \
        | rustfmt --edition 2024 > crates/machinery/src/controller/hash/layout.rs

layout.rs was generated with:
    gen_layout.py core_v1_types.go meta_v1_types.go --release v1.36 \
        --k8s-openapi ~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_36 --source-note '...'
where core_v1_types.go holds the v1.36 struct declarations of k8s.io/api core/v1/types.go
reachable from PodTemplateSpec and meta_v1_types.go those of k8s.io/apimachinery
pkg/apis/meta/v1/types.go (the header of layout.rs says where they were read). Nothing is
dropped: every field the declarations have, v1.36 has, and the k8s-openapi cross-check fails if
a field is missing or extra.

CORE_TYPES_GO is k8s.io/api core/v1/types.go, META_TYPES_GO is
k8s.io/apimachinery pkg/apis/meta/v1/types.go (upstream source, or a transcription
holding the same struct declarations: comments and protobuf tags are ignored).
Only structs reachable from v1.PodTemplateSpec are emitted.

--release names the Kubernetes release the table describes (layout.rs's header says it).
--drop removes fields that a newer source has but the target release lacks.
--k8s-openapi DIR (k8s-openapi's src/v1_XX for that release) cross-checks that every
emitted struct has exactly the JSON fields k8s-openapi knows for that release.

resource.Quantity, intstr.IntOrString, metav1.Time, metav1.FieldsV1 and
types.UID are not parsed: the printer knows their layout (see spew.rs).
"""

import argparse
import os
import re
import sys

SPECIAL = {
    ("resource", "Quantity"): "Quantity",
    ("intstr", "IntOrString"): "IntOrString",
    ("meta", "Time"): "Time",
    ("meta", "FieldsV1"): "FieldsV1",
}
BUILTIN_INTS = {"int32", "int64", "int", "uint64", "uint32"}


def strip_comments(src):
    out = []
    for line in src.splitlines():
        # Drop // comments that are not inside a backtick tag.
        in_tag = False
        cut = len(line)
        i = 0
        while i < len(line):
            c = line[i]
            if c == "`":
                in_tag = not in_tag
            elif c == '"' and not in_tag:
                j = line.find('"', i + 1)
                i = j if j > i else len(line)
            elif not in_tag and line.startswith("//", i):
                cut = i
                break
            i += 1
        out.append(line[:cut].rstrip())
    return "\n".join(out)


def parse_package(src, pkg):
    """Returns (structs, named): structs[name] = [(go_name, go_type, tag)],
    named[name] = underlying type expression."""
    src = strip_comments(src)
    structs, named = {}, {}
    lines = src.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        m = re.match(r"^type\s+(\w+)\s+struct\s*\{\s*$", line)
        if m:
            name = m.group(1)
            fields = []
            i += 1
            while lines[i].strip() != "}":
                f = lines[i].strip()
                i += 1
                if not f:
                    continue
                tag = ""
                tm = re.search(r"`(.*)`", f)
                if tm:
                    tag = tm.group(1)
                    f = f[: tm.start()].strip()
                parts = f.split()
                if len(parts) == 1:  # embedded field
                    ty = parts[0]
                    fields.append((ty.split(".")[-1].lstrip("*"), ty, tag, True))
                else:
                    fields.append((parts[0], " ".join(parts[1:]), tag, False))
            structs[name] = fields
        else:
            m = re.match(r"^type\s+(\w+)\s+(=\s*)?([^{]+)$", line)
            if m:
                named[m.group(1)] = m.group(3).strip()
        i += 1
    return structs, named


def json_of(tag):
    m = re.search(r'json:"([^"]*)"', tag)
    if not m:
        return None, False
    parts = m.group(1).split(",")
    return parts[0], "omitempty" in parts[1:]


class Gen:
    def __init__(self, pkgs, drop):
        self.pkgs = pkgs  # pkg -> (structs, named)
        self.drop = drop
        self.types = {}  # rust ident -> rust expr
        self.order = []
        self.struct_fields = {}  # (pkg,name) -> [json names]

    def ident(self, go_string):
        s = go_string
        s = s.replace("[]", "SLICE_").replace("*", "PTR_")
        s = re.sub(r"map\[(\w+)\]", r"MAP_\1_", s)
        s = s.replace(".", "_")
        s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
        return "T_" + s.upper()

    def resolve(self, pkg, expr):
        """Returns (go type string, rust ident) for a Go type expression in pkg."""
        expr = expr.strip()
        if expr.startswith("*"):
            s, inner = self.resolve(pkg, expr[1:])
            return self.add("*" + s, "Kind::Ptr(&%s)" % inner)
        if expr.startswith("[]"):
            s, inner = self.resolve(pkg, expr[2:])
            if s == "uint8":
                raise SystemExit("[]byte outside FieldsV1 is not supported by the printer")
            return self.add("[]" + s, "Kind::Slice(&%s)" % inner)
        m = re.match(r"^map\[([\w.]+)\](.+)$", expr)
        if m:
            ks, ki = self.resolve(pkg, m.group(1))
            vs, vi = self.resolve(pkg, m.group(2))
            return self.add("map[%s]%s" % (ks, vs), "Kind::Map(&%s, &%s)" % (ki, vi))
        if expr == "string":
            return self.add("string", "Kind::String")
        if expr == "bool":
            return self.add("bool", "Kind::Bool")
        if expr in BUILTIN_INTS:
            return self.add(expr, "Kind::Int")
        if expr == "byte":
            return "uint8", None
        if "." in expr:
            alias, name = expr.split(".")
            tpkg = {"metav1": "meta", "resource": "resource", "intstr": "intstr", "types": "types"}[alias]
        else:
            tpkg, name = pkg, expr
        return self.named_type(tpkg, name)

    def go_prefix(self, pkg):
        return {"core": "v1", "meta": "v1", "resource": "resource", "intstr": "intstr", "types": "types"}[pkg]

    def named_type(self, pkg, name):
        gs = "%s.%s" % (self.go_prefix(pkg), name)
        if (pkg, name) in SPECIAL:
            return self.add(gs, "Kind::%s" % SPECIAL[(pkg, name)])
        if (pkg, name) == ("types", "UID"):
            return self.add(gs, "Kind::String")
        structs, named = self.pkgs[pkg]
        if name in structs:
            ident = self.ident(gs)
            if ident not in self.types:
                self.types[ident] = None  # reserve (recursion guard)
                fields = []
                jsons = []
                for go_name, ty, tag, embedded in structs[name]:
                    if "%s.%s" % (name, go_name) in self.drop:
                        continue
                    js, _ = json_of(tag)
                    _, fi = self.resolve(pkg, ty)
                    if js == "" or (embedded and js is None):
                        loc = "Json::Inline"
                        jsons.append(("inline", ty))
                    elif js == "-":
                        raise SystemExit("json:\"-\" field %s.%s is not supported" % (name, go_name))
                    else:
                        loc = 'Json::Key("%s")' % js
                        jsons.append(js)
                    fields.append('        Field { name: "%s", json: %s, ty: &%s },' % (go_name, loc, fi))
                self.struct_fields[(pkg, name)] = jsons
                body = "Kind::Struct(&[\n%s\n    ])" % "\n".join(fields)
                self.types[ident] = (gs, body)
                self.order.append(ident)
            return gs, ident
        if name in named:
            under = named[name]
            if under == "string":
                return self.add(gs, "Kind::String")
            if under in BUILTIN_INTS:
                return self.add(gs, "Kind::Int")
            m = re.match(r"^map\[([\w.]+)\](.+)$", under)
            if m:
                _, ki = self.resolve(pkg, m.group(1))
                _, vi = self.resolve(pkg, m.group(2))
                return self.add(gs, "Kind::Map(&%s, &%s)" % (ki, vi))
        raise SystemExit("unknown type %s.%s" % (pkg, name))

    def add(self, gs, kind):
        ident = self.ident(gs)
        if ident not in self.types:
            self.types[ident] = (gs, kind)
            self.order.append(ident)
        return gs, ident

    def emit(self, header):
        out = [header]
        for ident in sorted(self.order):
            gs, kind = self.types[ident]
            out.append('pub(super) static %s: GoType = GoType {\n    name: "%s",\n    kind: %s,\n};\n' % (ident, gs, kind))
        return "\n".join(out)


def openapi_fields(openapi_dir, pkg, name):
    """JSON field names k8s-openapi deserializes for a type, or None if unknown."""
    sub = {"core": "api/core/v1", "meta": "apimachinery/pkg/apis/meta/v1"}[pkg]
    fname = re.sub(r"(?<!^)(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])", "_", name).lower() + ".rs"
    path = os.path.join(openapi_dir, sub, fname)
    if not os.path.exists(path):
        return None
    src = open(path).read()
    start = src.find("impl<'de> crate::serde::Deserialize<'de> for %s " % name)
    if start < 0:
        return None
    end = src.find("impl crate::serde::Serialize for %s" % name, start)
    return set(re.findall(r'"(\w+)" => Field::Key_', src[start:end]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("core")
    ap.add_argument("meta")
    ap.add_argument("--release", required=True, help="e.g. v1.36")
    ap.add_argument("--drop", action="append", default=[])
    ap.add_argument("--k8s-openapi")
    ap.add_argument("--source-note", default="")
    a = ap.parse_args()
    if not re.fullmatch(r"v1\.\d+", a.release):
        raise SystemExit("--release wants the form v1.NN, got %r" % a.release)
    pkgs = {
        "core": parse_package(open(a.core).read(), "core"),
        "meta": parse_package(open(a.meta).read(), "meta"),
    }
    g = Gen(pkgs, set(a.drop))
    g.named_type("core", "PodTemplateSpec")
    if a.k8s_openapi:
        bad = 0
        for (pkg, name), jsons in sorted(g.struct_fields.items()):
            want = openapi_fields(a.k8s_openapi, pkg, name)
            if want is None:
                continue
            have = set()
            for j in jsons:
                if isinstance(j, tuple):
                    _, ty = j
                    sub = ty.split(".")[-1].lstrip("*")
                    have |= {x for x in g.struct_fields[(pkg, sub)] if isinstance(x, str)}
                else:
                    have.add(j)
            if have != want:
                bad += 1
                print("MISMATCH %s.%s: extra %s missing %s" % (pkg, name, sorted(have - want), sorted(want - have)), file=sys.stderr)
        if bad:
            raise SystemExit("%d structs differ from k8s-openapi" % bad)
        print("k8s-openapi cross-check: %d structs ok" % len(g.struct_fields), file=sys.stderr)
    # The command, with the inputs named by role rather than by local path, so that the header
    # says exactly how to regenerate the file.
    drops = "".join(" --drop %s" % d for d in a.drop)
    check = (" --k8s-openapi K8S_OPENAPI_SRC_%s" % a.release.upper().replace(".", "_")) if a.k8s_openapi else ""
    command = (
        "python3 crates/machinery/src/controller/hash/gen_layout.py CORE_V1_TYPES_GO META_V1_TYPES_GO"
        + " --release " + a.release
        + drops + check + " --source-note NOTE"
        + " | rustfmt --edition 2024 > crates/machinery/src/controller/hash/layout.rs"
    )
    header = (
        "//! Go layout of `v1.PodTemplateSpec` as go-spew walks it: GENERATED, do not edit.\n"
        "//!\n"
        "//! Generated by `gen_layout.py` (beside this file; its docstring names the inputs) with:\n"
        "//! `%s`\n"
        "//!\n"
        "//! From Kubernetes %s API types: k8s.io/api `core/v1/types.go` and k8s.io/apimachinery\n"
        "//! `pkg/apis/meta/v1/types.go`.\n"
        "//! %s\n"
        "//! Statics are named after the Go type string spew prints (`v.Type().String()`).\n\n"
        "use super::spew::{Field, GoType, Json, Kind};\n" % (command, a.release, a.source_note)
    )
    sys.stdout.write(g.emit(header))


if __name__ == "__main__":
    main()
