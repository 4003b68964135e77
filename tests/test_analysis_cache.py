"""The analysis cache (`workbench.capture._analysis_cache`): a capture loaded again comes from it,
equal to an uncached load in every table, warning and name, and held by polars as the analysed one
was (the report's numbers depend on that to the last bit: `test_report_cache_determinism`); a damaged
entry is deleted and rebuilt, never trusted; anything the result is made of is part of the key."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import workbench.capture._load as load_mod
from workbench.capture import Capture, load
from workbench.capture._analysis_cache import _column_state, _entry, analysis_key

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "traces" / "fixtures"
LAB = ROOT / "traces" / "lab" / "c07"
CASES = {
    "v1": (FIXTURES / "tests_mptcp-v1.pcap", None),  # repeated-value columns (one subflow)
    "tcprst": (FIXTURES / "tests_mptcp-tcprst.pcap", None),  # warnings, two rows
    "pair": (LAB / "client.pcap", LAB / "server.pcap"),  # client + server: one-way delays, pair warnings
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "analysis"


def _same(a: Capture, b: Capture) -> None:
    for t in ("events", "connections", "subflows"):
        x, y = getattr(a, t), getattr(b, t)
        assert x.equals(y, null_equal=True), t
        assert list(x.schema.items()) == list(y.schema.items()), t
        assert _column_state(x) == _column_state(y), t
    assert (a.source, a.peer, a.warnings, a.reader, a.content_hashes) == \
        (b.source, b.peer, b.warnings, b.reader, b.content_hashes)


def _key(src: Path) -> str:
    return analysis_key([src], peer=None, path_names={}, reader="auto", one_connection=False)


def _no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on a load that reads a capture fails: only a cache hit can succeed."""
    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the capture was read: the analysis cache was not used")
    monkeypatch.setattr(load_mod, "read_packets", refuse)


@pytest.mark.parametrize("case", CASES)
def test_second_load_is_a_hit_equal_to_an_uncached_load(case: str, cache: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    src, peer = CASES[case]
    truth = load(src, peer=peer, use_cache=False)
    assert not cache.exists()  # use_cache=False writes nothing
    _same(load(src, peer=peer), truth)
    assert len(list(cache.glob("*.parquet"))) == 3  # events, connections, subflows
    _no_reading(monkeypatch)
    _same(load(src, peer=peer), truth)


def _damage(path: Path, how: str) -> None:
    if how == "flipped_byte":
        b = bytearray(path.read_bytes())
        b[len(b) // 2] ^= 0x10
        path.write_bytes(bytes(b))
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:10])
    else:
        path.unlink()


@pytest.mark.parametrize(("table", "how"), [("events", "flipped_byte"), ("events", "missing"),
                                             ("connections", "truncated"), ("subflows", "missing"),
                                             ("subflows.meta.json", "truncated")])
def test_damaged_entry_is_rebuilt(table: str, how: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, peer = CASES["v1"]
    truth = load(src, peer=peer, use_cache=False)
    load(src, peer=peer)
    key = _key(src)
    name = table if table.endswith(".json") else f"{table}.parquet"
    _damage(_entry(key, "events").with_name(_entry(key, "events").name.replace("events.parquet", name)), how)
    _same(load(src, peer=peer), truth)  # rebuilt from the capture ...
    _no_reading(monkeypatch)
    _same(load(src, peer=peer), truth)  # ... whole again, and used


def _cached_twice(src: Path, other: Path) -> Capture:
    """The uncached load of ``src``; both captures are in the cache."""
    truth = load(src, use_cache=False)
    load(src)
    load(other)
    return truth


def test_entry_of_another_key_is_not_used(cache: Path) -> None:
    """An entry whose meta names another key (a file copied over from another entry) is not trusted."""
    src, other = FIXTURES / "tests_mptcp-v1.pcap", FIXTURES / "tests_mptcp-v0.pcap"
    truth = _cached_twice(src, other)
    k_src, k_other = _key(src), _key(other)
    for t in ("events", "connections", "subflows"):
        for suffix in (".parquet", ".meta.json"):
            shutil.copy(_entry(k_other, t).with_suffix(suffix), _entry(k_src, t).with_suffix(suffix))
    _same(load(src), truth)


def test_key_covers_what_the_result_is_made_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = FIXTURES / "tests_mptcp-v1.pcap"
    copy = tmp_path / "v1.pcap"
    shutil.copy(src, copy)
    changed = tmp_path / "changed.pcap"
    raw = bytearray(src.read_bytes())
    raw[-1] ^= 0x01
    changed.write_bytes(bytes(raw))

    def key(files: list[Path], **kw: Any) -> str:
        args: dict[str, Any] = {"peer": None, "path_names": {}, "reader": "auto", "one_connection": False} | kw
        return analysis_key(files, **args)

    base = key([src])
    assert key([src]) == base
    others = [key([copy]),                                   # another name: the warnings name the file
              key([changed]),                                # other bytes
              key([src], peer=copy),                         # a peer
              key([src], path_names={"10.0.0.1": "wifi"}),   # path names
              key([src], reader="tshark"),                   # another reader
              key([src], one_connection=True)]               # CSV exports of one connection
    assert len({base, *others}) == 1 + len(others)
    # the code that analyses: any module of workbench.capture, polars, numpy
    import workbench.capture._analysis_cache as ac

    monkeypatch.setattr(ac, "_code_digest", lambda: "other code")
    assert key([src]) != base


def test_table_of_another_entry_is_not_used(cache: Path) -> None:
    """A valid connections table of another capture in this entry's place (its own checksum is right)
    is caught: the events' entry names the other two tables by checksum."""
    src, other = FIXTURES / "tests_mptcp-v1.pcap", LAB / "client.pcap"
    truth = _cached_twice(src, other)
    k_src, k_other = _key(src), _key(other)
    for suffix in (".parquet", ".meta.json"):
        shutil.copy(_entry(k_other, "connections").with_suffix(suffix), _entry(k_src, "connections").with_suffix(suffix))
    _same(load(src), truth)


def test_a_cold_load_hashes_each_file_once(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key's content hashes are the parse cache's too: a 6 MB capture is not read twice to hash it."""
    import workbench.capture._analysis_cache as ac
    import workbench.capture._read as read_mod

    hashed: list[Path] = []
    real = read_mod.content_hash

    def counted(path: Path) -> str:
        hashed.append(Path(path))
        return real(path)

    for mod in (read_mod, ac, load_mod):
        monkeypatch.setattr(mod, "content_hash", counted)
    src, peer = CASES["pair"]
    load(src, peer=peer)
    assert sorted(hashed) == sorted([src, peer])
