"""Parsing one DataX export file: compression by magic bytes, delimiters, null marker, rejects."""

from __future__ import annotations

import bz2
import gzip

import pytest

from cdc_delta.config import StockExportConfig
from cdc_delta.snapshot.stock_export import parse_file

LINES = b"1\x01ann\x01\\N\n2\x01bob\x0112\n3\x01too\x01many\x01fields\n4\x01\xe9t\xe9\x011\n"


@pytest.mark.parametrize("pack", [lambda b: b, gzip.compress, bz2.compress], ids=["plain", "gzip", "bzip2"])
def test_lines_fields_and_rejects(pack) -> None:
    stock = StockExportConfig(path="/x", delimiter="\u0001")
    out = list(parse_file("f", pack(LINES), stock, 3))
    assert out == [
        ("f", 1, ["1", "ann", None], None, None),
        ("f", 2, ["2", "bob", "12"], None, None),
        ("f", 3, None, "4 fields, expected 3", "3\x01too\x01many\x01fields"),
        ("f", 4, None, "not valid utf-8 at byte 2", "4\x01\ufffdt\ufffd\x011"),
    ]
    # The same bytes in the encoding they were written in read fine.
    latin = StockExportConfig(path="/x", delimiter="\u0001", encoding="latin-1")
    assert list(parse_file("f", pack(LINES), latin, 3))[3] == ("f", 4, ["4", "été", "1"], None, None)


def test_a_truncated_gzip_file_is_a_reject_not_a_crash() -> None:
    data = gzip.compress(b"1,a\n2,b\n" * 1000)[:-40]
    out = list(parse_file("f", data, StockExportConfig(path="/x", delimiter=","), 2))
    assert out[-1][2] is None and "cannot decompress" in out[-1][3] and "lines after it unread" in out[-1][3]
    assert all(row[3] is None for row in out[:-1])


def test_crlf_line_ends_and_multi_character_delimiters() -> None:
    stock = StockExportConfig(path="/x", delimiter="||", null_marker="NULL")
    assert list(parse_file("f", b"1||NULL\r\n2||x\r\n", stock, 2)) == [
        ("f", 1, ["1", None], None, None),
        ("f", 2, ["2", "x"], None, None),
    ]
