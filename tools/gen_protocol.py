#!/usr/bin/env python3
"""Generate kafkaio/protocol/messages/ from Kafka's JSON message definitions.

Input: the JSON definitions of Kafka's wire protocol (clients/src/main/resources/common/message
in the Apache Kafka repository; on our machines a copy lives at ../shared/kafka-protocol/message).
The JSON is read at generation time only; the generated Python is committed.

Usage: python tools/gen_protocol.py [--spec DIR] [--out DIR]

For every message the generator writes a slotted dataclass (nested structs become nested
classes) and straight-line encode/decode functions. Versions whose wire layout is the same
share one function, and runs of fixed-width fields are packed with a single struct.Struct.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = REPO.parent / "shared" / "kafka-protocol" / "message"
DEFAULT_OUT = REPO / "kafkaio" / "protocol" / "messages"

# The client-facing APIs kafkaio speaks (broker-to-broker and KRaft-internal APIs are left out).
CLIENT_APIS = [
    "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
    "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups",
    "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics", "DeleteTopics", "DeleteRecords",
    "InitProducerId", "OffsetForLeaderEpoch", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn",
    "TxnOffsetCommit", "DescribeAcls", "CreateAcls", "DeleteAcls", "DescribeConfigs",
    "AlterConfigs", "DescribeLogDirs", "SaslAuthenticate", "CreatePartitions", "DeleteGroups",
    "ElectLeaders", "IncrementalAlterConfigs", "AlterPartitionReassignments",
    "ListPartitionReassignments", "OffsetDelete", "DescribeClientQuotas", "AlterClientQuotas",
    "DescribeUserScramCredentials", "AlterUserScramCredentials", "DescribeProducers",
    "DescribeTransactions", "ListTransactions", "DescribeCluster", "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe", "GetTelemetrySubscriptions", "PushTelemetry",
    "DescribeTopicPartitions", "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch",
    "ShareAcknowledge",
]
DATA_TYPES = ["ConsumerProtocolSubscription", "ConsumerProtocolAssignment"]

FIXED = {
    "bool": ("?", 1), "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2),
    "int32": ("i", 4), "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8),
}
# Arrays of a fixed-size type shorter than this decode through a prebuilt Struct per length.
ARRAY_STRUCTS = 32
PY_TYPES = {
    "bool": "bool", "int8": "int", "int16": "int", "uint16": "int", "int32": "int",
    "uint32": "int", "int64": "int", "float64": "float", "string": "str", "bytes": "bytes",
    "uuid": "uuid.UUID", "records": "Buffer",
}


# ---------------------------------------------------------------------------- versions
@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int | None  # None = open-ended; an empty range has lo > hi

    @staticmethod
    def parse(text: str | None) -> Versions:
        if text is None or text == "none":
            return Versions(1, 0)
        if text.endswith("+"):
            return Versions(int(text[:-1]), None)
        if "-" in text:
            a, b = text.split("-")
            return Versions(int(a), int(b))
        return Versions(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v and (self.hi is None or v <= self.hi)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    return s + "_" if keyword.iskeyword(s) or s in ("field", "uuid") else s


# ---------------------------------------------------------------------------- model
@dataclass
class Field:
    name: str
    attr: str
    type: str  # primitive name, struct name, or "[]X"
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any
    flexible_override: Versions | None
    about: str
    struct: Struct | None = None  # for struct and []struct

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class Struct:
    name: str
    qual: str  # dotted path from the module, e.g. "FetchResponse.PartitionData"
    fields: list[Field] = field(default_factory=list)
    about: str = ""


@dataclass
class Message:
    name: str
    kind: str  # request / response / data / header
    api_key: int | None
    valid: Versions
    flexible: Versions
    unstable_latest: bool
    root: Struct
    structs: list[Struct]  # nested structs in definition order (inner first)


def load_message(path: Path) -> Message:
    text = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("//"))
    spec = json.loads(text)
    name = spec["name"]
    root = Struct(name, name, about="")
    structs: list[Struct] = []
    by_name: dict[str, Struct] = {}
    common = {c["name"]: c for c in spec.get("commonStructs", [])}

    def build(st: Struct, fields: list[dict[str, Any]]) -> None:
        for f in fields:
            ftype = f["type"]
            elem = ftype[2:] if ftype.startswith("[]") else ftype
            fd = Field(
                name=f["name"],
                attr=snake(f["name"]),
                type=ftype,
                versions=Versions.parse(f["versions"]),
                nullable=Versions.parse(f.get("nullableVersions")),
                tagged=Versions.parse(f.get("taggedVersions")),
                tag=f.get("tag"),
                default=f.get("default"),
                flexible_override=Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None,
                about=f.get("about", ""),
            )
            if elem not in FIXED and elem not in ("string", "bytes", "uuid", "records"):
                sub = by_name.get(elem)
                if sub is None:
                    sub = Struct(elem, f"{name}.{elem}", about=f.get("about", ""))
                    by_name[elem] = sub
                    if "fields" in f:
                        build(sub, f["fields"])
                    elif elem in common:
                        build(sub, common[elem]["fields"])
                    else:
                        raise SystemExit(f"{path.name}: struct {elem} has no definition")
                    structs.append(sub)
                fd.struct = sub
            st.fields.append(fd)

    build(root, spec["fields"])
    return Message(
        name=name,
        kind=spec["type"],
        api_key=spec.get("apiKey"),
        valid=Versions.parse(spec["validVersions"]),
        flexible=Versions.parse(spec.get("flexibleVersions", "none")),
        unstable_latest=bool(spec.get("latestVersionUnstable", False)),
        root=root,
        structs=structs,
    )


# ---------------------------------------------------------------------------- defaults
def default_expr(f: Field) -> str:
    """A Python expression for the field's default value (a fresh object for mutables)."""
    d = f.default
    if f.is_array:
        return "None" if d == "null" else "[]"
    if f.struct is not None:
        return "None" if d == "null" else f"{f.struct.qual}()"
    t = f.type
    if d == "null":
        return "None"
    if t == "bool":
        return "True" if str(d).lower() == "true" else "False"
    if t in FIXED:
        if d is None or d == "":
            return "0.0" if t == "float64" else "0"
        return str(int(str(d), 0)) if t != "float64" else repr(float(d))
    if t == "string":
        return repr(d if isinstance(d, str) else "")
    if t == "uuid":
        return "_UUID_ZERO"
    if t in ("bytes", "records"):
        return "b''" if t == "bytes" else "None"
    raise AssertionError(t)


def is_optional(f: Field) -> bool:
    return f.nullable.hi is None or f.nullable.lo <= f.nullable.hi


def py_type(f: Field) -> str:
    if f.struct is not None:
        base = f.struct.qual
    else:
        base = PY_TYPES[f.elem]
    if f.is_array:
        t = f"list[{base}]"
    else:
        t = base
    if is_optional(f) or default_expr(f) == "None":
        t += " | None"
    return t


# ---------------------------------------------------------------------------- layouts
class Gen:
    """Emits the encode/decode functions of one module, sharing them across versions."""

    def __init__(self, msg: Message) -> None:
        self.msg = msg
        self.funcs: list[str] = []
        self.enc_names: dict[tuple[Any, ...], str] = {}
        self.dec_names: dict[tuple[Any, ...], str] = {}
        self.structs_used: dict[str, str] = {}  # fmt -> const name

    def flexible(self, v: int) -> bool:
        return v in self.msg.flexible

    def field_flex(self, f: Field, v: int) -> bool:
        if f.flexible_override is not None:
            return v in f.flexible_override
        return self.flexible(v)

    def layout(self, st: Struct, v: int) -> tuple[Any, ...]:
        flex = self.flexible(v)
        parts: list[Any] = [flex]
        for f in st.fields:
            if v not in f.versions:
                parts.append(None)
                continue
            sub = self.layout(f.struct, v) if f.struct is not None else None
            parts.append((
                f.attr, f.type, v in f.nullable, flex and v in f.tagged, f.tag,
                self.field_flex(f, v), sub,
            ))
        return tuple(parts)

    def const(self, fmt: str) -> str:
        """The module constant of a Struct of `fmt`, or of the Structs of arrays of 0 to
        ARRAY_STRUCTS - 1 items of one fixed type ("[]" + its struct code)."""
        name = self.structs_used.get(fmt)
        if name is None:
            name = f"_S{len(self.structs_used)}"
            self.structs_used[fmt] = name
        return name

    # ------------------------------------------------------------------ encode
    def enc_func(self, st: Struct, v: int) -> str:
        key = (st.qual, self.layout(st, v))
        name = self.enc_names.get(key)
        if name is not None:
            return name
        name = f"_e_{st.qual.replace('.', '_')}_{len(self.enc_names)}"
        self.enc_names[key] = name
        flex = self.flexible(v)
        body: list[str] = []
        present = [f for f in st.fields if v in f.versions]
        inline = [f for f in present if not (flex and v in f.tagged)]
        tagged = sorted((f for f in present if flex and v in f.tagged), key=lambda f: f.tag or 0)
        i = 0
        while i < len(inline):
            f = inline[i]
            if f.type in FIXED and not f.is_array:
                run = [f]
                j = i + 1
                while j < len(inline) and inline[j].type in FIXED:
                    run.append(inline[j])
                    j += 1
                fmt = ">" + "".join(FIXED[x.type][0] for x in run)
                c = self.const(fmt)
                body.append(f"out += {c}.pack({', '.join('o.' + x.attr for x in run)})")
                i = j
                continue
            body.extend(self.enc_value(f, v, f"o.{f.attr}", "out", self.field_flex(f, v)))
            i += 1
        if flex:
            if not tagged:
                body.append("out.append(0)")
            else:
                body.append("tags: list[tuple[int, bytearray]] = []")
                for f in tagged:
                    cond = self.nondefault_cond(f, f"o.{f.attr}")
                    body.append(f"if {cond}:")
                    body.append("    t = bytearray()")
                    body.extend("    " + s for s in self.enc_value(f, v, f"o.{f.attr}", "t", True))
                    body.append(f"    tags.append(({f.tag}, t))")
                body.append("_w_tags(tags, out)")
        if not body:
            body.append("pass")
        self.funcs.append(
            f"def {name}(o: {st.qual}, out: bytearray) -> None:\n" + "".join(f"    {s}\n" for s in body)
        )
        return name

    def nondefault_cond(self, f: Field, expr: str) -> str:
        d = default_expr(f)
        if d == "[]":
            return f"{expr}"
        if d == "None":
            return f"{expr} is not None"
        return f"{expr} != {d}"

    def enc_value(self, f: Field, v: int, expr: str, out: str, flex: bool) -> list[str]:
        nullable = v in f.nullable
        if f.is_array:
            lines: list[str] = []
            lines.append(f"a = {expr}")
            if nullable:
                lines.append("if a is None:")
                lines.append(f"    {out}.append(0)" if flex else f"    {out} += _NULL32")
                lines.append("else:")
                ind = "    "
            else:
                ind = ""
            wlen = f"_w_uvarint(len(a) + 1, {out})" if flex else f"{out} += _I32.pack(len(a))"
            lines.append(f"{ind}{wlen}")
            if f.struct is not None:
                fn = self.enc_func(f.struct, v)
                lines.append(f"{ind}for x in a:")
                lines.append(f"{ind}    {fn}(x, {out})")
            elif f.elem in FIXED:
                lines.append(f"{ind}{out} += _struct.pack('>%d{FIXED[f.elem][0]}' % len(a), *a)")
            else:
                lines.append(f"{ind}for x in a:")
                lines.extend(f"{ind}    {s}" for s in self.enc_scalar(f.elem, v, "x", out, flex, False))
            return lines
        if f.struct is not None:
            fn = self.enc_func(f.struct, v)
            if nullable:
                return [
                    f"if {expr} is None:",
                    f"    {out}.append(255)",
                    "else:",
                    f"    {out}.append(1)",
                    f"    {fn}({expr}, {out})",
                ]
            return [f"{fn}({expr}, {out})"]
        return self.enc_scalar(f.type, v, expr, out, flex, nullable)

    def enc_scalar(self, t: str, v: int, expr: str, out: str, flex: bool, nullable: bool) -> list[str]:
        if t in FIXED:
            return [f"{out} += {self.const('>' + FIXED[t][0])}.pack({expr})"]
        if t == "uuid":
            return [f"{out} += {expr}.bytes"]
        if t == "string":
            if flex:
                null = f"{out}.append(0)"
                wlen = f"_w_uvarint(len(s) + 1, {out})"
            else:
                null = f"{out} += _NULL16"
                wlen = f"{out} += _I16.pack(len(s))"
            lines = []
            if nullable:
                lines += [f"if {expr} is None:", f"    {null}", "else:"]
                ind = "    "
            else:
                ind = ""
            lines += [f"{ind}s = {expr}.encode()", f"{ind}{wlen}", f"{ind}{out} += s"]
            return lines
        if t in ("bytes", "records"):
            if flex:
                null = f"{out}.append(0)"
                wlen = f"_w_uvarint(len(b) + 1, {out})"
            else:
                null = f"{out} += _NULL32"
                wlen = f"{out} += _I32.pack(len(b))"
            lines = []
            if nullable:
                lines += [f"if {expr} is None:", f"    {null}", "else:"]
                ind = "    "
            else:
                ind = ""
            lines += [f"{ind}b = {expr}", f"{ind}{wlen}", f"{ind}{out} += b"]
            return lines
        raise AssertionError(t)

    # ------------------------------------------------------------------ decode
    def dec_func(self, st: Struct, v: int) -> str:
        key = (st.qual, self.layout(st, v))
        name = self.dec_names.get(key)
        if name is not None:
            return name
        name = f"_d_{st.qual.replace('.', '_')}_{len(self.dec_names)}"
        self.dec_names[key] = name
        flex = self.flexible(v)
        body: list[str] = []
        present = [f for f in st.fields if v in f.versions]
        inline = [f for f in present if not (flex and v in f.tagged)]
        tagged = sorted((f for f in present if flex and v in f.tagged), key=lambda f: f.tag or 0)
        local = {f.attr: f"v_{k}" for k, f in enumerate(st.fields)}
        i = 0
        while i < len(inline):
            f = inline[i]
            if f.type in FIXED and not f.is_array:
                run = [f]
                j = i + 1
                while j < len(inline) and inline[j].type in FIXED:
                    run.append(inline[j])
                    j += 1
                fmt = ">" + "".join(FIXED[x.type][0] for x in run)
                size = sum(FIXED[x.type][1] for x in run)
                c = self.const(fmt)
                targets = ", ".join(local[x.attr] for x in run)
                if len(run) == 1:
                    targets += ","
                body.append(f"{targets} = {c}.unpack_from(buf, pos)")
                body.append(f"pos += {size}")
                i = j
                continue
            body.extend(self.dec_value(f, v, local[f.attr], self.field_flex(f, v)))
            i += 1
        for f in tagged:
            body.append(f"{local[f.attr]} = {default_expr(f)}")
        if flex and not tagged:
            # no known tags: skip the section (usually a single 0 byte)
            body.append("if buf[pos] == 0:")
            body.append("    pos += 1")
            body.append("else:")
            body.append("    pos = _skip_tags(buf, pos)")
        elif flex:
            body.append("n = buf[pos]")
            body.append("if n < 128:")
            body.append("    pos += 1")
            body.append("else:")
            body.append("    n, pos = _r_uvarint(buf, pos)")
            body.append("for _ in range(n):")
            body.append("    tag, pos = _r_uvarint(buf, pos)")
            body.append("    size, pos = _r_uvarint(buf, pos)")
            body.append("    end = pos + size")
            body.append("    if end > len(buf):")
            body.append("        raise _truncated()")
            first = True
            for f in tagged:
                body.append(f"    {'if' if first else 'elif'} tag == {f.tag}:")
                first = False
                body.extend("        " + s for s in self.dec_value(f, v, local[f.attr], True))
            body.append("    pos = end")
        args = []
        for f in st.fields:
            args.append(local[f.attr] if v in f.versions else default_expr(f))
        body.append(f"return {st.qual}({', '.join(args)}), pos")
        self.funcs.append(
            f"def {name}(buf: memoryview, pos: int) -> tuple[{st.qual}, int]:\n"
            + "".join(f"    {s}\n" for s in body)
        )
        return name

    def dec_len(self, target: str, flex: bool, wide: bool) -> list[str]:
        """Read a length/count into `target` (-1 = null)."""
        if flex:
            return [
                f"{target} = buf[pos]",
                f"if {target} < 128:",
                "    pos += 1",
                "else:",
                f"    {target}, pos = _r_uvarint(buf, pos)",
                f"{target} -= 1",
            ]
        c = "_I32" if wide else "_I16"
        return [f"{target}, = {c}.unpack_from(buf, pos)", f"pos += {4 if wide else 2}"]

    def dec_value(self, f: Field, v: int, target: str, flex: bool) -> list[str]:
        nullable = v in f.nullable
        if f.is_array:
            lines = self.dec_len("n", flex, True)
            lines.append("if n < 0:")
            if nullable:
                lines.append(f"    {target} = None")
            else:
                lines.append(f"    raise _null({f.name!r})")
            lines.append("else:")
            lines.append("    if n > len(buf) - pos:")
            lines.append("        raise _truncated()")
            if f.struct is not None:
                fn = self.dec_func(f.struct, v)
                lines.append(f"    {target} = []")
                lines.append(f"    ap = {target}.append")
                lines.append("    for _ in range(n):")
                lines.append(f"        x, pos = {fn}(buf, pos)")
                lines.append("        ap(x)")
            elif f.elem in FIXED:
                code, size = FIXED[f.elem]
                # short arrays (replica lists...) through a prebuilt Struct per length: no
                # format string to build and look up per array
                arrays = self.const("[]" + code)
                lines.append(f"    if n < {ARRAY_STRUCTS}:")
                lines.append(f"        {target} = list({arrays}[n].unpack_from(buf, pos))")
                lines.append("    else:")
                lines.append(f"        {target} = list(_struct.unpack_from('>%d{code}' % n, buf, pos))")
                lines.append(f"    pos += {size} * n" if size > 1 else "    pos += n")
            else:
                lines.append(f"    {target} = []")
                lines.append("    for _ in range(n):")
                lines.extend("        " + s for s in self.dec_scalar(f.elem, "x", flex, False, f.name))
                lines.append(f"        {target}.append(x)")
            return lines
        if f.struct is not None:
            fn = self.dec_func(f.struct, v)
            if nullable:
                return [
                    "if buf[pos] == 255:",
                    f"    {target} = None",
                    "    pos += 1",
                    "else:",
                    f"    {target}, pos = {fn}(buf, pos + 1)",
                ]
            return [f"{target}, pos = {fn}(buf, pos)"]
        return self.dec_scalar(f.type, target, flex, nullable, f.name)

    def dec_scalar(self, t: str, target: str, flex: bool, nullable: bool, fname: str) -> list[str]:
        if t in FIXED:
            c = self.const(">" + FIXED[t][0])
            return [f"{target}, = {c}.unpack_from(buf, pos)", f"pos += {FIXED[t][1]}"]
        if t == "uuid":
            return [
                "if pos + 16 > len(buf):",
                "    raise _truncated()",
                f"{target} = _uuid(buf[pos:pos + 16])",
                "pos += 16",
            ]
        lines = self.dec_len("n", flex, t != "string")
        lines.append("if n < 0:")
        lines.append(f"    {target} = None" if nullable else f"    raise _null({fname!r})")
        lines.append("else:")
        lines.append("    end = pos + n")
        lines.append("    if end > len(buf):")
        lines.append("        raise _truncated()")
        if t == "string":
            lines.append(f"    {target} = str(buf[pos:end], 'utf-8')")
        elif t == "bytes":
            lines.append(f"    {target} = bytes(buf[pos:end])")
        else:  # records: zero-copy view into the frame
            lines.append(f"    {target} = buf[pos:end]")
        lines.append("    pos = end")
        return lines


# ---------------------------------------------------------------------------- class text
def class_text(st: Struct, nested: list[Struct], indent: str, msg: Message, is_root: bool) -> str:
    out: list[str] = []
    out.append(f"{indent}@dataclass(slots=True)")
    if is_root and msg.kind == "request" and st.name.endswith("Request"):
        # typed pairs: Connection.send(XRequest) -> XResponse (see kafkaio.protocol.api)
        response = st.name[: -len("Request")] + "Response"
        out.append(f"{indent}class {st.name}(Request[{response!r}]):")
    else:
        out.append(f"{indent}class {st.name}:")
    doc = st.about or (f"Kafka {msg.name} (api key {msg.api_key})." if is_root and msg.api_key is not None else f"{st.name}.")
    doc = doc.replace("\\", "\\\\").replace('"""', "'''")
    out.append(f'{indent}    """{doc}"""')
    out.append("")
    if is_root:
        if msg.api_key is not None:
            out.append(f"{indent}    API_KEY: ClassVar[int] = {msg.api_key}")
        hi = msg.valid.hi if msg.valid.hi is not None else msg.valid.lo
        out.append(f"{indent}    MIN_VERSION: ClassVar[int] = {msg.valid.lo}")
        out.append(f"{indent}    MAX_VERSION: ClassVar[int] = {hi}")
        stable = hi - 1 if msg.unstable_latest else hi
        out.append(f"{indent}    MAX_STABLE_VERSION: ClassVar[int] = {stable}")
        out.append(
            f"{indent}    FIRST_FLEXIBLE_VERSION: ClassVar[int | None] = "
            f"{msg.flexible.lo if msg.flexible.hi is None or msg.flexible.lo <= msg.flexible.hi else None}"
        )
        out.append("")
        for sub in nested:
            out.append(class_text(sub, [], indent + "    ", msg, False))
    def rng(vs: Versions) -> str:
        return f"({vs.lo}, {-1 if vs.hi is None else vs.hi})"

    specs = ", ".join(
        f"({f.attr!r}, {f.type!r}, {rng(f.versions)}, {rng(f.nullable)}, {rng(f.tagged)})"
        for f in st.fields
    )
    out.append(f"{indent}    # (attribute, Kafka type, versions, nullable versions, tagged versions); -1 = open")
    out.append(f"{indent}    FIELD_SPECS: ClassVar[tuple[tuple[str, str, tuple[int, int], tuple[int, int], tuple[int, int]], ...]] = ({specs}{',' if len(st.fields) == 1 else ''})")
    for f in st.fields:
        d = default_expr(f)
        t = py_type(f)
        if d in ("[]",) or d.endswith("()") or d == "_UUID_ZERO":
            val = f"field(default_factory=lambda: {d})" if d != "[]" else "field(default_factory=list)"
            if d == "_UUID_ZERO":
                val = "_UUID_ZERO"
        else:
            val = d
        out.append(f"{indent}    {f.attr}: {t} = {val}")
    if is_root:
        out.append("")
        out.append(f"{indent}    def encode(self, version: int) -> bytes:")
        out.append(f'{indent}        """Encode this message as `version` (no header, no size prefix)."""')
        out.append(f"{indent}        out = bytearray()")
        out.append(f"{indent}        _encoder(_ENCODERS, {st.name!r}, version)(self, out)")
        out.append(f"{indent}        return bytes(out)")
        out.append("")
        out.append(f"{indent}    def encode_into(self, version: int, out: bytearray) -> None:")
        out.append(f'{indent}        """Append this message, encoded as `version`, to `out`."""')
        out.append(f"{indent}        _encoder(_ENCODERS, {st.name!r}, version)(self, out)")
        out.append("")
        out.append(f"{indent}    @classmethod")
        out.append(f"{indent}    def decode(cls, buf: Buffer, version: int) -> {st.name}:")
        out.append(f'{indent}        """Decode a whole message body of `version`; errors raise KafkaProtocolError."""')
        out.append(f"{indent}        return _decode_all(_DECODERS, {st.name!r}, buf, version)  # type: ignore[no-any-return]")
        out.append("")
        out.append(f"{indent}    @classmethod")
        out.append(f"{indent}    def decode_from(cls, buf: memoryview, pos: int, version: int) -> tuple[{st.name}, int]:")
        out.append(f'{indent}        """Decode from `pos`; returns the message and the position after it."""')
        out.append(f"{indent}        return _decode_at(_DECODERS, {st.name!r}, buf, pos, version)  # type: ignore[no-any-return]")
    out.append("")
    return "\n".join(out)


def module_text(msgs: list[Message], spec_dir: Path) -> str:
    head = [
        f'"""Kafka protocol messages: {", ".join(m.name for m in msgs)}.',
        "",
        "Generated by tools/gen_protocol.py from Kafka's JSON message definitions; do not edit.",
        '"""',
        "",
        "# ruff: noqa",
        "# mypy: disable-error-code=\"assignment,arg-type,misc,var-annotated,unused-ignore,union-attr,attr-defined\"",
        "from __future__ import annotations",
        "",
        "import uuid",
        "from dataclasses import dataclass, field",
        "from typing import Any, Callable, ClassVar",
        "",
        "from kafkaio.protocol._codec import (",
        "    _I16, _I32, _NULL16, _NULL32, _UUID_ZERO, Buffer, _decode_all, _decode_at, _encoder, _null, _r_uvarint,",
        "    _fixed_arrays, _skip_tags, _truncated, _uuid, _w_tags, _w_uvarint,",
        ")",
        "from kafkaio.protocol._codec import struct as _struct",
        "from kafkaio.protocol.api import Request",
        "",
    ]
    classes: list[str] = []
    funcs: list[str] = []
    tables: list[str] = []
    consts: dict[str, str] = {}
    for msg in msgs:
        classes.append(class_text(msg.root, msg.structs, "", msg, True))
        gen = Gen(msg)
        gen.structs_used = consts
        hi = msg.valid.hi if msg.valid.hi is not None else msg.valid.lo
        enc_map = {}
        dec_map = {}
        for v in range(msg.valid.lo, hi + 1):
            enc_map[v] = gen.enc_func(msg.root, v)
            dec_map[v] = gen.dec_func(msg.root, v)
        funcs.extend(gen.funcs)
        tables.append(
            f"_ENCODERS[{msg.name!r}] = {{{', '.join(f'{v}: {n}' for v, n in enc_map.items())}}}"
        )
        tables.append(
            f"_DECODERS[{msg.name!r}] = {{{', '.join(f'{v}: {n}' for v, n in dec_map.items())}}}"
        )
    const_lines = [
        f"{name} = _fixed_arrays({fmt[2:]!r}, {ARRAY_STRUCTS})"
        if fmt.startswith("[]")
        else f"{name} = _struct.Struct({fmt!r})"
        for fmt, name in consts.items()
    ]
    return "\n".join(
        head
        + const_lines
        + ["", "_ENCODERS: dict[str, dict[int, Callable[[Any, bytearray], None]]] = {}",
           "_DECODERS: dict[str, dict[int, Callable[[memoryview, int], tuple[Any, int]]]] = {}", "", ""]
        + classes
        + ["", ""]
        + funcs
        + tables
    ) + "\n"


def api_module_name(api: str) -> str:
    return snake(api).rstrip("_")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    spec: Path = args.spec
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    exports: list[tuple[str, list[str]]] = []
    registry: list[tuple[int, str, str]] = []
    for api in CLIENT_APIS:
        req = load_message(spec / f"{api}Request.json")
        resp = load_message(spec / f"{api}Response.json")
        modname = api_module_name(api)
        (out / f"{modname}.py").write_text(module_text([req, resp], spec))
        exports.append((modname, [req.name, resp.name]))
        assert req.api_key is not None
        registry.append((req.api_key, req.name, resp.name))
    for data in DATA_TYPES:
        msg = load_message(spec / f"{data}.json")
        modname = api_module_name(data)
        (out / f"{modname}.py").write_text(module_text([msg], spec))
        exports.append((modname, [msg.name]))
    init = [
        '"""Every Kafka protocol message kafkaio speaks, generated from Kafka\'s JSON definitions.',
        "",
        "Generated by tools/gen_protocol.py; do not edit. `REQUESTS` maps an api key to its",
        "(request class, response class) pair. Each message's module is imported on first use",
        "(of its name here, or of its api key in REQUESTS): a process that only produces never",
        "loads the other fifty APIs' codecs, which keeps imports fast and the heap small.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from typing import TYPE_CHECKING, Any",
        "",
        "if TYPE_CHECKING:",
    ]
    for modname, names in exports:
        imports = ", ".join(f"{n} as {n}" for n in names)
        init.append(f"    from kafkaio.protocol.messages.{modname} import {imports}")
    init.append("")
    init.append("_MODULES: dict[str, str] = {")
    for modname, names in exports:
        for n in names:
            init.append(f"    {n!r}: {modname!r},")
    init.append("}")
    init.append("")
    init.append("_API_KEYS: dict[int, tuple[str, str]] = {")
    for key, rq, rs in sorted(registry):
        init.append(f"    {key}: ({rq!r}, {rs!r}),")
    init.append("}")
    init.extend(
        [
            "",
            "",
            "def __getattr__(name: str) -> Any:",
            "    module = _MODULES.get(name)",
            "    if module is None:",
            '        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")',
            '    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)',
            "    globals()[name] = value",
            "    return value",
            "",
            "",
            "class _Requests(dict[int, tuple[type, type]]):",
            '    """api key -> (request class, response class), filled in on first lookup."""',
            "",
            "    def __missing__(self, api_key: int) -> tuple[type, type]:",
            "        request, response = _API_KEYS[api_key]  # KeyError: not an API we speak",
            "        pair: tuple[type, type] = (__getattr__(request), __getattr__(response))",
            "        self[api_key] = pair",
            "        return pair",
            "",
            "    def get(self, api_key: int, default: Any = None) -> Any:",
            "        return self[api_key] if api_key in _API_KEYS else default",
            "",
            "    def __contains__(self, api_key: object) -> bool:",
            "        return api_key in _API_KEYS",
            "",
            "",
            "REQUESTS = _Requests()",
            "",
            "",
            "def load_all() -> None:",
            '    """Import every message module now (e.g. before measuring memory allocations)."""',
            "    for name in _MODULES:",
            "        __getattr__(name)",
            "    for api_key in _API_KEYS:",
            "        REQUESTS[api_key]",
            "",
        ]
    )
    allnames = ["REQUESTS"] + [n for _, names in exports for n in names]
    init.append("__all__ = [")
    init.extend(f"    {n!r}," for n in allnames)
    init.append("]")
    (out / "__init__.py").write_text("\n".join(init) + "\n")
    print(f"generated {len(exports)} modules into {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
