"""API keys per bank, and the check behind every ``/v1/banks/{bank_id}`` route.

A key grants a set of bank ids, or every bank (``"*"``). Only the SHA-256
digest of each key is kept (a key may be configured as ``"sha256:<hex>"`` so
the plain key is never written down); the presented key is hashed and compared
against every digest in constant time. Keys are long random tokens, so a plain
digest is enough: there is nothing to brute-force that a salt would protect.

``authorize`` decides from the key and the bank id in the path alone, before any
lookup: a key for bank A gets 403 on bank B whether or not B holds what was
asked for, so the answer never tells what another bank contains.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping

from pydantic import TypeAdapter, ValidationError

from cogsub.core.errors import ConfigurationError, FieldProblem, InvalidInputError
from cogsub.core.events import SafeId

# The SDK and the API share these two errors until core.errors has them.
from cogsub.sdk import AuthenticationError, PermissionDeniedError

ALL_BANKS = "*"
DIGEST_PREFIX = "sha256:"
MIN_KEY_LENGTH = 16

_SAFE_ID: TypeAdapter[str] = TypeAdapter(SafeId)


def key_digest(key: str) -> bytes:
    """The SHA-256 digest under which ``key`` is stored."""
    return hashlib.sha256(key.encode()).digest()


def _checked_id(field: str, value: str) -> str:
    try:
        return _SAFE_ID.validate_python(value)
    except ValidationError as exc:
        rules = "; ".join(e["msg"] for e in exc.errors(include_url=False))
        raise InvalidInputError([FieldProblem(field, rules)]) from None


class ApiKeys:
    """The configured keys (as digests) and the banks each one grants."""

    def __init__(self, grants: Mapping[str, Iterable[str]]) -> None:
        self._grants: list[tuple[bytes, frozenset[str]]] = []
        for position, (key, banks) in enumerate(grants.items(), start=1):
            self._grants.append((_digest_of(key, position), _banks_of(banks, position)))

    @classmethod
    def from_json(cls, text: str) -> ApiKeys:
        """Keys from a JSON object ``{"<key>": ["bank", ...], ...}`` (the keys file)."""
        return cls(grants_from_json(text))

    def __len__(self) -> int:
        return len(self._grants)

    def __repr__(self) -> str:
        return f"ApiKeys({len(self._grants)} keys)"  # never the digests either

    def banks_for(self, key: str) -> frozenset[str] | None:
        """The banks ``key`` grants, or ``None`` for an unknown key.

        Every digest is compared, matched or not, so the time taken does not
        depend on which key (if any) matched.
        """
        presented = key_digest(key)
        found: frozenset[str] | None = None
        for digest, banks in self._grants:
            if hmac.compare_digest(presented, digest) and found is None:
                found = banks
        return found

    def allows(self, key: str, bank_id: str) -> bool:
        """Whether ``key`` may use ``bank_id``."""
        banks = self.banks_for(key)
        return banks is not None and (ALL_BANKS in banks or bank_id in banks)


def grants_from_json(text: str) -> dict[str, list[str]]:
    """The ``{"<key>": ["bank", ...]}`` object in ``text``, checked for shape only."""
    try:
        grants = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"API keys: not JSON ({exc.args[0]})") from None
    if not isinstance(grants, dict) or not all(
        isinstance(v, list) and all(isinstance(b, str) for b in v) for v in grants.values()
    ):
        raise ConfigurationError("API keys: must map each key to a list of bank ids")
    return grants


def _digest_of(key: str, position: int) -> bytes:
    if key.startswith(DIGEST_PREFIX):
        hex_digest = key.removeprefix(DIGEST_PREFIX)
        try:
            digest = bytes.fromhex(hex_digest)
        except ValueError:
            digest = b""
        if len(digest) != hashlib.sha256().digest_size:
            raise ConfigurationError(f"API key #{position}: sha256: needs 64 hex digits")
        return digest
    if len(key) < MIN_KEY_LENGTH:
        raise ConfigurationError(
            f"API key #{position}: shorter than {MIN_KEY_LENGTH} characters; use a random token"
        )
    return key_digest(key)


def _banks_of(banks: Iterable[str], position: int) -> frozenset[str]:
    checked = set()
    for bank in banks:
        if bank != ALL_BANKS:
            try:
                _checked_id("bank_id", bank)
            except InvalidInputError as exc:
                raise ConfigurationError(f"API key #{position}: bank {bank!r}: {exc}") from None
        checked.add(bank)
    if not checked:
        raise ConfigurationError(f"API key #{position}: grants no bank")
    return frozenset(checked)


def authorize(keys: ApiKeys | None, key: str | None, bank_id: str) -> str:
    """``bank_id`` if ``key`` may use it, checked as a safe id.

    With ``keys`` None (no keys required) every bank is open. Authorisation comes
    before the bank id's format check, so a caller without a key learns nothing.
    """
    if keys is not None:
        if key is None:
            raise AuthenticationError("missing API key: send Authorization: Bearer <key>")
        banks = keys.banks_for(key)
        if banks is None:
            raise AuthenticationError("unknown API key")
        if ALL_BANKS not in banks and bank_id not in banks:
            raise PermissionDeniedError("this API key does not grant that bank")
    return _checked_id("bank_id", bank_id)


def checked_memory_id(memory_id: str) -> str:
    """``memory_id`` from a path, checked as a safe id (422 otherwise)."""
    return _checked_id("memory_id", memory_id)
