"""Sensitive values are recognised by their checksum where they have one: a number of the right shape
whose check digit is wrong is not one, and neither are the values tables hold everywhere (dates, amounts,
codes, hashes)."""

from __future__ import annotations

import hashlib
import random

import pytest

from cdc_delta.pii.detectors import cn_id_valid, iban_valid, kind_of, luhn


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("4111 1111 1111 1111", "card_number"),  # Visa's test number
        ("5500-0000-0000-0004", "card_number"),
        ("378282246310005", "card_number"),  # Amex, 15 digits
        ("11010519491231002X", "cn_resident_id"),  # GB 11643's example, check digit X
        ("11010519491231002x", "cn_resident_id"),  # written in lower case
        ("GB82 WEST 1234 5698 7654 32", "iban"),
        ("DE89370400440532013000", "iban"),
        ("jane.doe+news@example.co.uk", "email"),
        ("+44 20 7946 0958", "phone"),
        ("13812345678", "phone"),  # a Chinese mobile number
        ("078-05-1120", "us_ssn"),
    ],
)
def test_each_kind_is_recognised(value: str, kind: str) -> None:
    assert kind_of(value) == kind


@pytest.mark.parametrize(
    "value",
    [
        "4111 1111 1111 1112",  # Luhn fails
        "110105194912310021",  # the check digit is X
        "GB82 WEST 1234 5698 7654 33",  # MOD 97 fails
        "000-12-3456",  # no SSN has area 000
        "0000000000000000",  # passes Luhn, but is no card
        "2026-01-01",
        "2026-01-01 10:00:00",
        "12345.67",
        "customer-718",
        "shipped",
        "ORD-000123",
        "550e8400-e29b-41d4-a716-446655440000",
        hashlib.sha256(b"jane@example.com").hexdigest(),  # what a masked column holds
        "****************",
        "not an email@",
        "",
    ],
)
def test_look_alikes_are_not(value: str) -> None:
    assert kind_of(value) is None


def test_check_digits_catch_one_digit_changed() -> None:
    rng = random.Random(7)
    card, cn_id, iban = "4111111111111111", "11010519491231002X", "DE89370400440532013000"
    assert luhn(card) and cn_id_valid(cn_id) and iban_valid(iban)
    for _ in range(50):
        i = rng.randrange(len(card))
        changed = card[:i] + str((int(card[i]) + rng.randint(1, 9)) % 10) + card[i + 1 :]
        assert not luhn(changed), changed  # Luhn catches every single-digit error
        i = rng.randrange(17)
        changed = cn_id[:i] + str((int(cn_id[i]) + rng.randint(1, 9)) % 10) + cn_id[i + 1 :]
        assert not cn_id_valid(changed), changed
        i = rng.randrange(4, len(iban))
        changed = iban[:i] + str((int(iban[i]) + rng.randint(1, 9)) % 10) + iban[i + 1 :]
        assert not iban_valid(changed), changed
