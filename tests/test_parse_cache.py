"""The parse cache is checked, never trusted: every entry carries the SHA-256 of its table, and an
entry whose bytes do not match (flipped bits parquet would not notice, a valid table from another
capture, a torn write, a missing or foreign meta file) is deleted and rebuilt from the capture. The
truth each time is an uncached read of the same file."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest

from workbench.capture import read_packets

TRACES = Path(__file__).resolve().parents[1] / "traces" / "fixtures"
CAPTURE = TRACES / "tests_mptcp-v1.pcap"
OTHER = TRACES / "tests_mptcp-v0.pcap"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _entry(cache: Path) -> tuple[Path, Path]:
    (table,) = cache.glob("*.parquet")
    return table, table.with_suffix(".meta.json")


def test_entry_has_a_checksum_and_is_used(cache: Path) -> None:
    truth = read_packets(CAPTURE, use_cache=False).packets
    first = read_packets(CAPTURE)
    table, meta = _entry(cache)
    import hashlib

    assert json.loads(meta.read_text())["sha256"] == hashlib.sha256(table.read_bytes()).hexdigest()
    second = read_packets(CAPTURE)
    assert not first.from_cache and second.from_cache and second.packets.equals(truth)


def _valid_parquet_of(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf)
    return buf.getvalue()


@pytest.mark.parametrize("damage", ["other_table", "changed_row", "flipped_byte", "truncated", "no_meta",
                                    "meta_not_json", "meta_old_format", "meta_wrong_sum"])
def test_corrupt_entry_is_rebuilt(cache: Path, damage: str) -> None:
    truth = read_packets(CAPTURE, use_cache=False).packets
    read_packets(CAPTURE)
    table, meta = _entry(cache)
    raw = table.read_bytes()
    if damage == "other_table":  # a perfectly valid parquet file, of another capture
        table.write_bytes(_valid_parquet_of(read_packets(OTHER, use_cache=False).packets))
    elif damage == "changed_row":  # valid parquet, same schema, one value different
        table.write_bytes(_valid_parquet_of(truth.with_columns(pl.when(pl.col("frame") == 1).then(0)
                                                               .otherwise(pl.col("seq")).cast(pl.UInt32).alias("seq"))))
    elif damage == "flipped_byte":
        b = bytearray(raw)
        b[len(b) // 2] ^= 0x10
        table.write_bytes(bytes(b))
    elif damage == "truncated":
        table.write_bytes(raw[: len(raw) // 3])
    elif damage == "no_meta":
        meta.unlink()
    elif damage == "meta_not_json":
        meta.write_text("{not json")
    elif damage == "meta_old_format":
        meta.write_text(json.dumps({"format": 0, "sha256": json.loads(meta.read_text())["sha256"]}))
    else:
        meta.write_text(json.dumps(json.loads(meta.read_text()) | {"sha256": "0" * 64}))
    again = read_packets(CAPTURE)
    assert not again.from_cache  # detected: rebuilt from the capture
    assert again.packets.equals(truth)
    # ... and the rebuilt entry is whole again and used next time.
    third = read_packets(CAPTURE)
    assert third.from_cache and third.packets.equals(truth)
