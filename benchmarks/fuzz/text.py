"""Cases for the text inputs: tshark CSV exports (missing columns, non-numbers, NaN, unsorted rows,
huge values), `t,rate` files, mahimahi traces, scenario files (wrong types, unknown keys, YAML
bombs, ``!!python/...`` tags, references that leave the scenario's folder, huge sizes) and uploads
(hostile names, any bytes). Each generator returns the files of one case: {name: bytes}, the first
one being the input."""

from __future__ import annotations

import json
import random
from pathlib import Path

__all__ = ["csv_case", "mahimahi_case", "rate_case", "scenario_case", "upload_case"]

_WEIRD = ["", "nan", "NaN", "inf", "-inf", "-1", "0", "1e308", "-1e308", "18446744073709551616",
          "99999999999999999999999", "0x10", "abc", "1,5", '"', "1e-320", " ", "\t", "None", "true",
          "4294967296", "-0", "1" * 400, "\x00", "é"]


def _weird(rng: random.Random) -> str:
    return rng.choice(_WEIRD) if rng.random() < 0.8 else str(rng.uniform(-1e20, 1e20))


def _csv_lines_mutated(lines: list[str], rng: random.Random, sep: str = ",") -> list[str]:
    out = list(lines)
    for _ in range(rng.choice((1, 1, 2, 4))):
        try:
            out = _csv_step(out, rng, sep)
        except (IndexError, KeyError, TypeError, ValueError):
            continue  # an earlier step removed what this one wanted to change
    return out


def _csv_step(out: list[str], rng: random.Random, sep: str) -> list[str]:
    for _ in (0,):
        k = rng.randrange(9)
        if k == 0 and len(out) > 1:  # a cell gets a weird value
            i = rng.randrange(1, len(out))
            cells = out[i].split(sep)
            cells[rng.randrange(len(cells))] = _weird(rng)
            out[i] = sep.join(cells)
        elif k == 1 and out:  # drop or rename a header column (and maybe that column everywhere)
            head = out[0].split(sep)
            j = rng.randrange(len(head))
            if rng.random() < 0.5:
                out = [sep.join(c for n, c in enumerate(ln.split(sep)) if n != j) for ln in out]
            else:
                head[j] = rng.choice(("", "x", head[j].upper(), head[j] + " ", "frame.time_epoch"))
                out[0] = sep.join(head)
        elif k == 2 and len(out) > 2:  # rows out of order / duplicated
            body = out[1:]
            rng.shuffle(body) if rng.random() < 0.5 else body.insert(rng.randrange(len(body)), rng.choice(body))
            out = [out[0], *body]
        elif k == 3 and out:  # cut mid-line
            i = rng.randrange(len(out))
            out = [*out[:i], out[i][: rng.randrange(len(out[i]) + 1)]]
        elif k == 4 and out:  # extra or missing cells on a line
            i = rng.randrange(len(out))
            out[i] = out[i] + sep + _weird(rng) if rng.random() < 0.5 else sep.join(out[i].split(sep)[:-1])
        elif k == 5:  # header only / empty
            out = out[:1] if rng.random() < 0.7 else []
        elif k == 6 and len(out) > 1 and out[0]:  # a whole column of one weird value
            j = rng.randrange(len(out[0].split(sep)))
            v = _weird(rng)
            out = [out[0]] + [sep.join(v if n == j else c for n, c in enumerate(ln.split(sep))) for ln in out[1:]]
        elif k == 7:  # a BOM, CRLF or a comment line
            out[0:0] = [rng.choice(("\ufeff" + (out.pop(0) if out else ""), "# comment", ""))]
        else:  # many lines of the same huge value (size bounds)
            out += [sep.join([_weird(rng)] * max(len(out[0].split(sep)) if out else 2, 1))] * rng.randrange(1, 50)
    return out


class _Seeds:
    def __init__(self, shared: Path) -> None:
        hsr = sorted((shared / "hsr-mptcp").glob("*.csv"), key=lambda p: p.stat().st_size)
        # Small exports (cut to 300 lines): the CSV reader's paths are the same for a big one.
        picks = [p for p in hsr if p.stat().st_size > 2000][:6]
        self.csv = [(p.name, p.read_text().splitlines()[:300]) for p in picks]
        mm = shared / "timelines" / "mahimahi"
        self.mahimahi = [p.read_text().splitlines()[:2000] for p in sorted(mm.glob("*.up"))[:2]]


_SEEDS: dict[str, _Seeds] = {}


def _seeds(shared: Path) -> _Seeds:
    key = str(shared)
    if key not in _SEEDS:
        _SEEDS[key] = _Seeds(shared)
    return _SEEDS[key]


def csv_case(rng: random.Random, shared: Path) -> dict[str, bytes]:
    name, lines = rng.choice(_seeds(shared).csv)
    text = "\n".join(_csv_lines_mutated(lines, rng))
    return {name: text.encode("utf-8", "surrogatepass")}


def rate_case(rng: random.Random, shared: Path) -> dict[str, bytes]:
    t_unit = rng.choice(("s", "ms", "us", "ns", "h", "", "S"))
    r_unit = rng.choice(("mbps", "kbps", "bps", "gbps", "MB/s", "B/s", "furlongs", ""))
    sep = rng.choice((",", "\t", " ", ";"))
    n = rng.choice((0, 1, 2, 10, 200))
    t = 0.0
    lines = [f"t_{t_unit}{sep}rate_{r_unit}"] if rng.random() < 0.8 else []
    for _ in range(n):
        t += rng.choice((0.1, 1.0, 0.0, -0.5, 1e12))
        lines.append(f"{t:g}{sep}{rng.choice((rng.uniform(0, 100), 0, -1, 1e300))}")
    lines = _csv_lines_mutated(lines, rng, sep) if lines and rng.random() < 0.6 else lines
    return {"rate.csv": "\n".join(lines).encode("utf-8", "surrogatepass")}


def mahimahi_case(rng: random.Random, shared: Path) -> dict[str, bytes]:
    seeds = _seeds(shared).mahimahi
    lines = list(rng.choice(seeds)) if seeds and rng.random() < 0.7 else [str(i * 3) for i in range(rng.randrange(50))]
    for _ in range(rng.choice((1, 1, 2, 3))):
        k = rng.randrange(6)
        i = rng.randrange(len(lines)) if lines else 0
        if k == 0 and lines:
            lines[i] = _weird(rng)
        elif k == 1:  # huge last timestamp: a period of years
            lines.append(str(rng.choice((10**9, 10**12, 10**15, 2**62, 2**63 - 1, 2**64))))
        elif k == 2 and lines:
            lines = lines[:i]
        elif k == 3:
            lines.insert(i, str(rng.randrange(-5, 5)))
        elif k == 4:
            lines = ["0"] * rng.randrange(1, 100)
        else:
            lines.append("")
    return {rng.choice(("trace.down", "trace.up", "trace")): "\n".join(lines).encode("utf-8", "surrogatepass")}


_BOMB = """a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""
_TAGS = ["!!python/object/apply:os.system ['echo pwned > /tmp/fuzz-pwned']",
         "!!python/object/new:builtins.list [[1,2]]", "!!python/name:os.system", "!!binary AAAA",
         "!!python/tuple [1, 2]", "!!set {a, b}", "!!timestamp 2001-12-14", "!<tag:yaml.org,2002:python/none> ''"]
_OUTSIDE = ["../rate.csv", "../../../../etc/passwd", "/etc/passwd", "/proc/self/environ", "sub/../../x.csv",
            "/dev/zero", "/dev/urandom", "..", ".", "sub/", "\x00", "a" * 5000, "~/.ssh/id_rsa", "file:///etc/passwd"]


def _value(rng: random.Random, depth: int = 0) -> object:
    k = rng.randrange(10 if depth < 3 else 6)
    if k == 0:
        return rng.choice((0, 1, -1, 10**30, 1e308, float("nan"), float("inf"), 2**63, -(2**63)))
    if k == 1:
        return rng.uniform(-100, 100)
    if k == 2:
        return rng.choice(("", "x", "minrtt", "bulk", "10ms", "1e9", "none", "../x.py:X", "/etc/passwd:X"))
    if k == 3:
        return rng.choice((True, False, None))
    if k == 4:
        return [[rng.choice((0, 1, -1, 1e12, "a")), rng.choice((1, 0, -5, 1e300))] for _ in range(rng.randrange(4))]
    if k == 5:
        return {rng.choice(("file", "csv", "mahimahi")): rng.choice([*_OUTSIDE, "rate.csv", "trace.down", "owd.csv"])}
    if k == 6:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(("name", "params", "bytes", "x", "stop_s", 1, "file")): _value(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def _scenario_doc(rng: random.Random) -> dict:
    doc: dict = {
        "duration_s": rng.choice((1, 5, 0.5)),
        "seed": rng.choice((0, 1)),
        "scheduler": rng.choice(("minrtt", "upstream", {"name": "minrtt", "params": {}})),
        "paths": [{"name": "wifi", "rate_mbps": 10, "owd_ms": 10, "buffer_packets": 50},
                  {"name": "lte", "rate_mbps": {"file": "rate.csv"}, "owd_down_ms": {"file": "owd.csv"},
                   "owd_up_ms": 20, "buffer_bytes": 60000}],
        "connection": {"cc": "cubic"},
        "workload": {"finite": {"bytes": 100000}},
    }
    for _ in range(rng.choice((1, 1, 2, 3))):
        try:
            _scenario_step(doc, rng)
        except (IndexError, KeyError, TypeError, ValueError, AttributeError):
            continue  # an earlier step removed what this one wanted to change
    return doc


def _scenario_step(doc: dict, rng: random.Random) -> None:
    for _ in (0,):
        k = rng.randrange(7)
        if k == 0:  # a wrong type anywhere at the top level
            doc[rng.choice(list(doc))] = _value(rng)
        elif k == 1 and isinstance(doc.get("paths"), list):  # a wrong type in a path
            p = rng.choice(doc["paths"])
            p[rng.choice(("rate_mbps", "owd_ms", "buffer_packets", "buffer_bytes", "loss", "bin_ms", "name",
                          "packet_bytes", "kind", "rate", "owd_up"))] = _value(rng)
        elif k == 2:  # unknown keys
            paths = doc.get("paths") if isinstance(doc.get("paths"), list) else [{}]
            conn = doc.get("connection") if isinstance(doc.get("connection"), dict) else {}
            target = rng.choice((doc, rng.choice(paths), conn))
            target[rng.choice(("colour", "rate_mbs", "Paths", "__class__", "!!python", ""))] = _value(rng)
        elif k == 3 and isinstance(doc.get("paths"), list):  # a reference that leaves the folder
            p = rng.choice(doc["paths"])
            p[rng.choice(("rate_mbps", "owd_down_ms", "rate_up"))] = {rng.choice(("file", "csv", "mahimahi")):
                                                                     rng.choice(_OUTSIDE)}
        elif k == 4:  # huge sizes
            where = rng.choice(("duration_s", "buffer_bytes", "buffer_packets", "rate_mbps", "bytes", "rcv_buf_bytes",
                                "series", "bin_ms", "packet_bytes", "segments"))
            huge = rng.choice((1e12, 10**18, 2**64, 1e300, 10**9))
            if where == "duration_s":
                doc["duration_s"] = huge
            elif where in ("bytes", "segments"):
                doc["workload"] = {"finite": {"bytes": huge}} if where == "bytes" else {
                    "bursts": {"segments": huge, "count": huge}}
            elif where == "rcv_buf_bytes":
                doc["connection"] = {"rcv_buf_bytes": huge}
            elif where == "series" and isinstance(doc.get("paths"), list):
                doc["paths"][0]["rate_mbps"] = [[i * 0.001, 10] for i in range(rng.choice((10, 20000)))]
            elif isinstance(doc.get("paths"), list):
                doc["paths"][0][where] = huge
        elif k == 5:  # workload trace references
            doc["workload"] = {"trace": rng.choice(({"csv": rng.choice([*_OUTSIDE, "app.csv"])},
                                                    [[0, 100], [1, -5]], "x", [[1e300, 1e300]]))}
        else:  # scheduler from a file
            doc["scheduler"] = rng.choice(("../evil.py:Evil", "/tmp/evil.py:Evil", "sched.py:Nope", "nope",
                                           {"name": "minrtt", "params": {"nope": 1}}, "os:system"))


def scenario_case(rng: random.Random, shared: Path) -> dict[str, bytes]:
    """A scenario folder: the scenario (YAML or JSON) and the files it may reference."""
    helpers = {"rate.csv": b"t_s,rate_mbps\n0,10\n1,20\n", "owd.csv": b"t_s,owd_ms\n0,10\n2,30\n",
               "trace.down": b"\n".join(str(i).encode() for i in range(0, 200, 2)), "app.csv": b"0,1000\n1,2000\n"}
    k = rng.randrange(10)
    if k == 0:
        text = _BOMB + rng.choice(("paths: *i\n", "paths: [{name: a, rate_mbps: 1}]\nx: *i\n"))
        return {"scenario.yaml": text.encode(), **helpers}
    if k == 1:
        text = f"duration_s: {rng.choice(_TAGS)}\npaths: [{{name: a, rate_mbps: 1}}]\n"
        if rng.random() < 0.5:
            text = "!!python/object/apply:os.system ['true']\n" if rng.random() < 0.5 else f"paths: {rng.choice(_TAGS)}\n"
        return {"scenario.yaml": text.encode(), **helpers}
    if k == 2:  # broken or odd YAML/JSON text
        text = rng.choice(("{", "paths: [", "\t- a", "%YAML 9.9\n---\na: 1", "---\n---\n", "[]", "null", "42",
                           "a: " + "[" * 5000 + "]" * 5000, "a: " + "{b: " * 2000 + "1" + "}" * 2000, "\x00\x01",
                           "paths: !!str\n  - 1", "? [a, b]\n: c\n"))
        return {rng.choice(("scenario.yaml", "scenario.json")): text.encode("utf-8", "surrogatepass"), **helpers}
    doc = _scenario_doc(rng)
    if rng.random() < 0.3:
        try:
            return {"scenario.json": json.dumps(doc).encode(), **helpers}
        except (TypeError, ValueError):
            pass
    import yaml

    return {"scenario.yaml": yaml.safe_dump(doc, allow_unicode=True).encode("utf-8", "surrogatepass"), **helpers}


def upload_case(rng: random.Random, capture: bytes) -> tuple[str, bytes]:
    """An upload: a hostile or odd browser file name and a capture (often mutated) or any bytes."""
    name = rng.choice(("capture.pcap", "../../etc/passwd", "/etc/shadow", "..", ".", "", "a\x00b.pcap",
                       "x" * 5000 + ".pcap", "con.pcap", "\u202etxt.pcap", "a/b/c.pcapng", "..\\..\\win.ini",
                       "trace.csv", "\n.pcap"))
    data = capture if rng.random() < 0.7 else bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300)))
    return name, data
