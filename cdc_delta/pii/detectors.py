"""What a sensitive value looks like, confirmed by its checksum where it has one, so that numbers that
merely have the right length are not taken for one: card numbers (Luhn), Chinese resident identity
numbers (ISO 7064 MOD 11-2), IBANs (ISO 13616 MOD 97-10); and by pattern: e-mail addresses, phone
numbers in international form (or Chinese mobile numbers), US social security numbers written with
dashes. A value matches when the whole of it (spaces and dashes aside where noted) is one. Only string
columns are scanned: a number held as an integer column is not. Look-alikes that pass: device numbers
(IMEI) pass the Luhn check, and any 11-digit code starting 13-19 looks like a Chinese mobile number; a
column of them is reported (``scan_pii.allow`` takes it out)."""

from __future__ import annotations

import re
from collections.abc import Callable

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
PHONE = re.compile(r"\+[1-9]\d{7,14}|1[3-9]\d{9}")
SSN = re.compile(r"(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}")
CN_ID = re.compile(r"[1-9]\d{5}(18|19|20)\d{2}(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])\d{3}[\dX]")
IBAN = re.compile(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}")
CARD = re.compile(r"\d{13,19}")

CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
CN_ID_CHECK = "10X98765432"


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def cn_id_valid(value: str) -> bool:
    return CN_ID_CHECK[sum(int(c) * w for c, w in zip(value[:17], CN_ID_WEIGHTS, strict=True)) % 11] == value[17]


def iban_valid(value: str) -> bool:
    moved = value[4:] + value[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _card(value: str) -> bool:
    digits = value.replace(" ", "").replace("-", "")
    return bool(CARD.fullmatch(digits)) and len(set(digits)) > 1 and luhn(digits)


def _cn_id(value: str) -> bool:
    upper = value.upper()  # the check character X is written x too
    return bool(CN_ID.fullmatch(upper)) and cn_id_valid(upper)


def _iban(value: str) -> bool:
    compact = value.replace(" ", "")
    return bool(IBAN.fullmatch(compact)) and iban_valid(compact)


def _phone(value: str) -> bool:
    return bool(PHONE.fullmatch(value.replace(" ", "").replace("-", "")))


DETECTORS: dict[str, Callable[[str], bool]] = {
    "email": lambda v: bool(EMAIL.fullmatch(v)),
    "card_number": _card,
    "cn_resident_id": _cn_id,
    "iban": _iban,
    "us_ssn": lambda v: bool(SSN.fullmatch(v)),
    "phone": _phone,
}
"""Kind -> whether a value (stripped) is one. The order is the order of precedence: a value that is a
valid card number is not counted as a phone number too."""


def kind_of(value: str) -> str | None:
    """The kind of sensitive value ``value`` is, or None."""
    text = value.strip()
    if not text or len(text) > 64:
        return None
    for kind, matches in DETECTORS.items():
        if matches(text):
            return kind
    return None
