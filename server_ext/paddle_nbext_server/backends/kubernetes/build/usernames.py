"""`{username}` in Kubernetes names and paths, spelled the way the hub's KubeSpawner spells it.

Job pods must mount the very volume the notebook pod mounts.  With `home_volume = "pvc"` or
`"cephfs"` the backend rebuilds that volume from a template (`claim-{username}`,
`/volumes/jupyter/{username}`), so the template must expand exactly as KubeSpawner expanded it
when it made the notebook pod, or jobs mount a different (often brand new, empty) claim or
directory.  KubeSpawner never puts the raw JupyterHub name there: `Alice` or
`alice@example.org` are not valid object names.  It has two schemes, chosen by its
`slug_scheme`, and `c.KubernetesBackend.slug_scheme` must name the same one:

- `"safe"` (KubeSpawner 7 and later, the default): a name that already is a valid DNS label of
  at most 48 characters and has no `--` stays as it is; any other name becomes a lower-case
  readable part plus `---` and the first 8 hex digits of the SHA-256 of the raw name (the hash
  keeps `Alice` and `alice` apart).
- `"escape"` (KubeSpawner before 7): every character other than `a-z` and `0-9` becomes `-` and
  the hex of its UTF-8 bytes (`@` -> `-40`, `A` -> `-41`), then all is lower-cased.  Lossless
  but not always a valid name (`Alice` -> `-41lice` starts with a hyphen); it is what the hub
  made, so it is what we must make too.

The placeholders are KubeSpawner's per-user ones ({username}, {servername}, {user_server} and
their `safe_`, `escaped_` and `unescaped_` forms); the result gets KubeSpawner's last step too
(trailing `-` dropped unless the template itself ends with one), because `claim-{user_server}`
for a default server relies on it.  The algorithm was written here from KubeSpawner's and
escapism's documented behaviour; tests/backends/kubernetes/test_k8s_home_volume.py holds the hand-derived table.
"""

from __future__ import annotations

import hashlib
import re
import string
from typing import Literal

Scheme = Literal["safe", "escape"]
SCHEMES: tuple[Scheme, ...] = ("safe", "escape")

# KubeSpawner caps each user/server slug at 48 characters, leaving room in a 63-character
# object name for a prefix such as "jupyter-" or "claim-".
SLUG_MAX_LENGTH = 48
_HASH_LENGTH = 8

_ESCAPE_SAFE = frozenset(string.ascii_lowercase + string.digits)
_DNS_LABEL = re.compile(r"[a-z](?:[a-z0-9-]*[a-z0-9])?")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")

PLACEHOLDERS = (
    "username",
    "servername",
    "user_server",
    "safe_username",
    "safe_servername",
    "safe_user_server",
    "escaped_username",
    "escaped_servername",
    "escaped_user_server",
    "unescaped_username",
    "unescaped_servername",
)


def escape_slug(name: str) -> str:
    """The legacy ("escape") slug: reversible, so two names never share a PVC, but not always a
    valid Kubernetes name.  Bytes are written in hex without zero padding (a tab is `-9`),
    exactly like the hub did, since a padded form would name a different claim."""
    out: list[str] = []
    for char in name:
        if char in _ESCAPE_SAFE:
            out.append(char)
        else:
            out.extend(f"-{byte:x}" for byte in char.encode("utf-8"))
    return "".join(out)


def _is_dns_label(name: str) -> bool:
    """RFC 1035 label: what KubeSpawner accepts unchanged (it then needs no hash)."""
    return len(name) <= 63 and _DNS_LABEL.fullmatch(name) is not None


def _readable_part(name: str, max_length: int) -> str:
    """The human-readable start of a hashed slug: lower case, runs of other characters turned
    into one `-`, cut to `max_length`, starting with a letter (`x-` is put before a digit) and
    never empty (`x`).  Cutting happens before the `x-` is added, so like KubeSpawner the part
    may end in `-` in that one case; it must, to produce the hub's exact name."""
    part = _NOT_ALNUM.sub("-", name.lower()).lstrip("-")[:max_length].rstrip("-")
    if part and part[0] not in string.ascii_lowercase:
        part = "x-" + part[: max_length - 2]
    return part or "x"


def _short_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_HASH_LENGTH]


def _hashed_slug(name: str, max_length: int) -> str:
    """`<readable part>---<hash>`: valid for any input, unique through the hash.  The `---`
    cannot come out of `_readable_part`, so it cannot collide with an unhashed name."""
    part_length = max_length - (_HASH_LENGTH + 3)
    if part_length < 1:
        raise ValueError(f"a hashed slug needs at least {_HASH_LENGTH + 4} characters, not {max_length}")
    return f"{_readable_part(name, part_length)}---{_short_hash(name.encode('utf-8'))}"


def safe_slug(name: str, max_length: int = SLUG_MAX_LENGTH) -> str:
    """The "safe" slug: the name itself when it is already a valid object name that fits and
    holds no `--` (so it cannot look like a joined or hashed slug), else the hashed form."""
    if "--" not in name and _is_dns_label(name) and len(name) <= max_length:
        return name
    return _hashed_slug(name, max_length)


def _joined_slug(names: list[str], max_length: int = SLUG_MAX_LENGTH) -> str:
    """`{user}--{server}---{hash}` for when the two safe slugs joined would be too long.  The
    hash covers the raw names separated by a 0xFF byte (never part of UTF-8), so
    ("ab", "c") and ("a", "bc") hash differently."""
    digest = hashlib.sha256(b"\xff".join(n.encode("utf-8") for n in names)).hexdigest()[:_HASH_LENGTH]
    per_name = (max_length - (_HASH_LENGTH + 1)) // len(names) - 2
    if per_name < 2:
        raise ValueError(f"{max_length} characters cannot hold {len(names)} names")
    return "--".join(_readable_part(n, per_name) for n in names) + f"---{digest}"


def placeholders(username: str, scheme: Scheme = "safe", servername: str = "") -> dict[str, str]:
    """Every per-user placeholder KubeSpawner offers in its templates, for this user and server
    (`servername` is "" for the user's default server)."""
    if scheme not in SCHEMES:
        raise ValueError(f"slug scheme must be one of {', '.join(SCHEMES)}, not {scheme!r}")
    safe_user = safe_slug(username)
    safe_server = safe_slug(servername) if servername else ""
    if len(safe_user) + len(safe_server) + 2 > SLUG_MAX_LENGTH:
        # Even with no server name: a 47- or 48-character slug gets the joined form, as in
        # KubeSpawner, so `{user_server}` can differ from `{username}` for long names.
        safe_user_server = _joined_slug([username, servername])
    else:
        safe_user_server = f"{safe_user}--{safe_server}" if servername else safe_user
    escaped_user, escaped_server = escape_slug(username), escape_slug(servername)
    escaped_user_server = f"{escaped_user}--{escaped_server}"
    if scheme == "safe":
        chosen = (safe_user, safe_server, safe_user_server)
    else:
        chosen = (escaped_user, escaped_server, escaped_user_server if servername else escaped_user)
    return {
        "username": chosen[0],
        "servername": chosen[1],
        "user_server": chosen[2],
        "safe_username": safe_user,
        "safe_servername": safe_server,
        "safe_user_server": safe_user_server,
        "escaped_username": escaped_user,
        "escaped_servername": escaped_server,
        "escaped_user_server": escaped_user_server,
        "unescaped_username": username,
        "unescaped_servername": servername,
    }


def expand(template: str, username: str, scheme: Scheme = "safe", servername: str = "") -> str:
    """`template` with the placeholders filled in as the hub's KubeSpawner fills them.

    Raises KeyError / IndexError / ValueError for a template that names another placeholder or
    is malformed; callers turn that into a message naming their setting."""
    rendered = template.format(**placeholders(username, scheme, servername))
    # KubeSpawner drops a trailing "-" that only the expansion produced, so that
    # "claim-{username}-{servername}" for a default server is "claim-alice", not "claim-alice-".
    return rendered if template.endswith("-") else rendered.rstrip("-")
