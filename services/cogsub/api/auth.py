"""API keys per bank, and the check behind every ``/v1/banks/{bank_id}`` route.

A key grants a set of bank ids, or every bank (``"*"``). Only the SHA-256
digest of each key is kept (a key may be configured as ``"sha256:<hex>"`` so
the plain key is never written down); the presented key is hashed and compared
against every digest in constant time. Keys are long random tokens, so a plain
digest is enough: there is nothing to brute-force that a salt would protect.

``authorize`` decides from the key and the bank id in the path alone, before any
lookup: a key for bank A gets 403 on bank B whether or not B holds what was
asked for, so the answer never tells what another bank contains.

Without keys, a loopback API trusts whoever can reach it; :class:`HostGuard`
keeps that to programs on this machine. A web page can point a name it owns at
127.0.0.1 (DNS rebinding) and have the browser call the API, but the browser
still sends that name as ``Host``, so only loopback names are answered.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Iterable, Mapping

from cogsub.core.errors import (
    AuthenticationError,
    ConfigurationError,
    InvalidInputError,
    PermissionDeniedError,
)
from cogsub.core.events import checked_safe_id

ALL_BANKS = "*"
ANY_HOST = "*"
DIGEST_PREFIX = "sha256:"
MIN_KEY_LENGTH = 16
LOOPBACK_NAME = "localhost"


def key_digest(key: str) -> bytes:
    """The SHA-256 digest under which ``key`` is stored."""
    return hashlib.sha256(key.encode()).digest()


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
                checked_safe_id("bank_id", bank)
            except InvalidInputError as exc:
                raise ConfigurationError(f"API key #{position}: bank {bank!r}: {exc}") from None
        checked.add(bank)
    if not checked:
        raise ConfigurationError(f"API key #{position}: grants no bank")
    return frozenset(checked)


_BEARER = "bearer "


def bearer_key(header: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header; None for none or another scheme."""
    if header is None or header[: len(_BEARER)].lower() != _BEARER:
        return None
    return header[len(_BEARER) :].strip() or None


def banks_granted(keys: ApiKeys | None, key: str | None) -> frozenset[str] | None:
    """The banks ``key`` grants; None: every bank (a ``"*"`` key, or no keys required).

    Raises AuthenticationError (401) when keys are required and ``key`` is missing or unknown.
    """
    if keys is None:
        return None
    if key is None:
        raise AuthenticationError("missing API key: send Authorization: Bearer <key>")
    banks = keys.banks_for(key)
    if banks is None:
        raise AuthenticationError("unknown API key")
    return None if ALL_BANKS in banks else banks


def authorize(keys: ApiKeys | None, key: str | None, bank_id: str) -> str:
    """``bank_id`` if ``key`` may use it, checked as a safe id.

    With ``keys`` None (no keys required) every bank is open. Authorisation comes
    before the bank id's format check, so a caller without a key learns nothing.
    """
    return within_grant(banks_granted(keys, key), bank_id)


def within_grant(banks: frozenset[str] | None, bank_id: str) -> str:
    """``bank_id`` if it is among ``banks`` (None: every bank), checked as a safe id."""
    if banks is not None and bank_id not in banks:
        raise PermissionDeniedError("this API key does not grant that bank")
    return checked_safe_id("bank_id", bank_id)


def checked_memory_id(memory_id: str) -> str:
    """``memory_id`` from a path, checked as a safe id (422 otherwise)."""
    return checked_safe_id("memory_id", memory_id)


def authorize_operator(keys: ApiKeys | None, key: str | None) -> None:
    """Pass when ``key`` grants every bank (``"*"``), or when no keys are required.

    For what spans all banks (``/metrics``): a key for some banks must not see the rest.
    """
    if banks_granted(keys, key) is not None:
        raise PermissionDeniedError('this needs an operator key, one that grants "*"')


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without port, brackets, trailing dot or case."""
    name = header.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name[1:]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    return name.removesuffix(".")


def is_loopback_name(name: str) -> bool:
    """``localhost``, a name under ``.localhost`` (RFC 6761), or a loopback address."""
    if name == LOOPBACK_NAME or name.endswith("." + LOOPBACK_NAME):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostGuard:
    """Which ``Host`` values a keyless loopback API answers: loopback names and ``extra``.

    ``extra`` names more hosts (no port), or is ``["*"]`` to answer every one.
    """

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self._extra = frozenset(host_name(name) for name in extra)

    @classmethod
    def for_api(
        cls, bind_host: str, keys: ApiKeys | None, extra: Iterable[str]
    ) -> HostGuard | None:
        """The guard an API on ``bind_host`` needs: none with keys or off loopback."""
        if keys is not None or not is_loopback_name(host_name(bind_host)):
            return None
        return cls(extra)

    def admits(self, header: str | None) -> bool:
        """Whether a request with this ``Host`` header (None: none sent) is answered."""
        if ANY_HOST in self._extra:
            return True
        if not header:
            return False
        name = host_name(header)
        return is_loopback_name(name) or name in self._extra
