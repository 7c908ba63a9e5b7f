"""How a configuration field is declared, and how a section of the file is read.

- ConfigError: a value is missing or wrong; the message names the field;
- Setting, setting(): a field's help, type, range and default, as dataclass field metadata
  (model.py declares every field of the file this way);
- read_section(): a YAML mapping checked against a dataclass's settings;
- value checkers (number, choice, host, url, size, token, ...), each naming its field.
"""
from __future__ import annotations

import builtins
import dataclasses
import ipaddress
import math
import re
from dataclasses import MISSING, dataclass
from typing import Any
from collections.abc import Callable
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names the field."""


@dataclass(frozen=True)
class Setting:
    """One field of the configuration file.

    type: number | integer | choice | bool | string | section | sections | custom.
    Defaults: the dataclass field's own, or default_from(values read so far, context) when
    it depends on other fields (default_doc says how, for the docs and the schema)."""
    help: str
    type: str = "number"
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()
    nullable: bool = False
    # builtins.type: `type` here is the field above
    section: builtins.type | None = None             # section, sections: the nested class
    parse: Callable[..., Any] | None = None          # custom: checks and converts a value
    check: Callable[[Any, str], Any] | None = None   # after the type's check: may refuse
    default_from: Callable[[dict, Any], Any] | None = None
    default_doc: str = ""
    key: str = ""                                    # its name in the file, if not the field's
    schema: dict | None = None                       # JSON Schema of a custom value
    contextual: bool = False                         # parse(value, where, context)
    what: str = ""                                   # a custom value's kind, for the docs

    def name(self, field: dataclasses.Field) -> str:
        return self.key or field.name


def setting(default: Any = MISSING, *, help: str, repr: bool = True, **options) -> Any:
    """A dataclass field declared with its Setting (default MISSING: required, unless
    default_from computes it)."""
    meta = {"setting": Setting(help=help, **options)}
    if default is MISSING and (options.get("default_from") or options.get("nullable")):
        default = None
    if isinstance(default, (list, dict, set)):
        raise TypeError("a mutable default; use a tuple")
    return dataclasses.field(default=default, metadata=meta, repr=repr)


def settings(cls) -> list[tuple[dataclasses.Field, Setting]]:
    """A section's fields that the file sets, in declaration order."""
    return [(f, f.metadata["setting"]) for f in dataclasses.fields(cls)
            if "setting" in f.metadata]


def read_section(cls, raw: Any, path: str, context: Any = None, **derived):
    """A section of the file as an instance of cls: unknown keys refused, each field
    checked by its Setting (fields the file leaves out take their default; computed
    defaults after the others), `derived` filled in, then cls.validate(path) if it has one
    (checks across fields)."""
    raw = mapping(raw, path)
    fields = settings(cls)
    reject_unknown(raw, {s.name(f) for f, s in fields}, path)
    values: dict[str, Any] = {}
    later: list[tuple[dataclasses.Field, Setting, Callable[[dict, Any], Any]]] = []
    for f, s in fields:
        if s.name(f) not in raw and s.default_from is not None:
            later.append((f, s, s.default_from))
            continue
        value = raw[s.name(f)] if s.name(f) in raw else _default(f, s)
        values[f.name] = read_value(s, value, where(path, s.name(f)), context)
    for f, s, default_from in later:
        values[f.name] = read_value(s, default_from(values, context),
                                    where(path, s.name(f)), context)
    obj = cls(**values, **derived)
    if hasattr(obj, "validate"):
        obj.validate(path)
    return obj


def _default(f: dataclasses.Field, s: Setting) -> Any:
    """What a field the file leaves out is read as: a section its own defaults."""
    if f.default is MISSING or s.type == "section":
        return None
    return f.default


def read_value(s: Setting, value: Any, where_: str, context: Any = None) -> Any:
    """One value checked and converted as its Setting says."""
    if value is None and s.nullable:
        return None
    if value is None and s.type == "sections":      # none listed
        return ()
    if s.type == "section":
        return read_section(s.section, value, where_, context)
    if value is None and s.type in ("number", "integer"):
        raise ConfigError(f"{where_}: required")
    if s.type in ("number", "integer"):
        value = number(value, where_, lo=s.lo, hi=s.hi, integer=s.type == "integer")
    elif s.type == "choice":
        if value not in s.choices:
            raise ConfigError(f"{where_}: must be one of {', '.join(s.choices)}, got {value!r}")
    elif s.type == "string":
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where_}: expected a non-empty string, got {value!r}")
    elif s.type == "bool":
        if not isinstance(value, bool):     # a quoted "yes" or a 1 is not a boolean
            raise ConfigError(f"{where_}: expected true or false, got {show(value)}")
    elif s.type == "sections":
        if not isinstance(value, (list, tuple)):
            keys = ", ".join(f.name for f, _ in settings(s.section))
            raise ConfigError(f"{where_}: expected a list of {{{keys}}}")
        value = tuple(read_section(s.section, item, f"{where_}[{j}]", context)
                      for j, item in enumerate(value))
    elif s.type == "custom":
        assert s.parse is not None, "a custom setting has its parse"
        value = s.parse(value, where_, context) if s.contextual else s.parse(value, where_)
    else:
        raise TypeError(f"unknown setting type {s.type}")
    if s.check is not None:
        s.check(value, where_)
    return value


def where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# ---------------------------------------------------------------------------
# Value checkers: each names the field (`where`) in its error.
# ---------------------------------------------------------------------------

def mapping(value: Any, path: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: expected a mapping, got {type(value).__name__}")
    return value


def reject_unknown(data: dict, known: set[str], path: str) -> None:
    unknown = sorted(set(data) - known, key=str)
    if unknown:
        raise ConfigError(f"{where(path, unknown[0])}: unknown field (known: "
                          f"{', '.join(sorted(known))})")


def show(value: Any, limit: int = 60) -> str:
    """repr() of a value for an error, cut short (a YAML integer may have thousands of
    digits: more than 4,300 and repr() itself fails)."""
    try:
        text = repr(value)
    except ValueError:
        return "a number too long to print"
    return text if len(text) <= limit else text[:limit] + "..."


def number(value: Any, where_: str, *, lo: float | None = None, hi: float | None = None,
           integer: bool = False):
    """A finite number (not a bool) in [lo, hi]; an int when integer."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where_}: expected a number, got {show(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:          # an integer beyond a float's range
        finite = False
    if not finite:                 # YAML's .nan, .inf; NaN passes every comparison below
        raise ConfigError(f"{where_}: expected a finite number, got {show(value)}")
    if integer and int(value) != value:
        raise ConfigError(f"{where_}: expected an integer, got {show(value)}")
    if lo is not None and value < lo:
        raise ConfigError(f"{where_}: must be >= {lo}, got {show(value)}")
    if hi is not None and value > hi:
        raise ConfigError(f"{where_}: must be <= {hi}, got {show(value)}")
    return int(value) if integer else float(value)


NAME_RE = re.compile(r"^[a-z][a-z0-9]*$")


def name(value: Any, where_: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise ConfigError(f"{where_}: lowercase letters and digits, starting with a letter; "
                          f"got {value!r}")
    return value


INSTANCE_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def instance_name(value: Any, where_: str) -> str:
    if not isinstance(value, str) or not INSTANCE_NAME_RE.match(value):
        raise ConfigError(f"{where_}: lowercase letters, digits and hyphens, starting with a "
                          f"letter, at most 63 characters; got {value!r}")
    return value


def ipv4(value: Any, where_: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except (ipaddress.AddressValueError, ValueError, TypeError):
        raise ConfigError(f"{where_}: not an IPv4 address: {value!r}") from None


MAC_PATTERN = r"([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}"


def mac(value: Any, where_: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(MAC_PATTERN, value):
        raise ConfigError(f"{where_}: not a MAC address: {value!r}")
    return value.lower()


def host_port(value: Any, where_: str) -> str:
    if not isinstance(value, str) or ":" not in value:
        raise ConfigError(f"{where_}: expected 'host:port', got {value!r}")
    host_, port = value.rsplit(":", 1)
    if not host_ or not port.isdigit() or len(port) > 5 or not 0 < int(port) < 65536:
        raise ConfigError(f"{where_}: expected 'host:port', got {show(value)}")
    host(host_, f"{where_} (host)")
    return value


_LABEL_RE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def host(value: Any, where_: str, ipv6: bool = False) -> str:
    """An address to listen on or to reach: an IPv4 address, a host name (RFC 1123), or,
    where ipv6, an IPv6 address. Digits and dots only must make an IPv4 address
    (999.999.1.1 is not a host name)."""
    what = "an IPv4 address" + (", an IPv6 address" if ipv6 else "") + " or a host name"
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where_}: expected {what}, got {show(value)}")
    if ":" in value:
        try:
            if ipv6:
                return str(ipaddress.IPv6Address(value))
        except ValueError:
            pass
        raise ConfigError(f"{where_}: expected {what}, got {show(value)}")
    if re.fullmatch(r"[0-9.]+", value):
        try:
            return str(ipaddress.IPv4Address(value))
        except ValueError:
            raise ConfigError(f"{where_}: not a valid IPv4 address: {show(value)}") from None
    name_ = value[:-1] if value.endswith(".") else value
    if len(name_) > 253 or not all(_LABEL_RE.fullmatch(label) for label in name_.split(".")):
        raise ConfigError(f"{where_}: not a valid host name or IPv4 address: {show(value)}")
    return value


def host_or_ipv6(value: Any, where_: str) -> str:
    return host(value, where_, ipv6=True)


def url(value: Any, where_: str) -> str:
    """An http(s) URL with a valid host and, if given, a valid port; no trailing slash."""
    if not isinstance(value, str) or not re.match(r"https?://", value):
        raise ConfigError(f"{where_}: expected an http URL, got {show(value)}")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- ValueError when not a number from 0 to 65535
    except ValueError:
        raise ConfigError(f"{where_}: not a valid URL (its port?): {show(value)}") from None
    if parts.port == 0:
        raise ConfigError(f"{where_}: port 0 is not a port to reach: {show(value)}")
    host(parts.hostname, f"{where_} (host)", ipv6=True)
    return value.rstrip("/")


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)[bB]?\s*$")


def size_mb(value: Any, where_: str) -> int:
    """'256m', '1g', 512 (MB) -> MB."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            mb = float(value)
        except OverflowError:
            mb = math.inf
    else:
        m = _SIZE_RE.match(str(value))
        if not m:
            raise ConfigError(f"{where_}: expected a size like 256m or 1g, got {value!r}")
        amount, unit = float(m.group(1)), m.group(2).lower()
        mb = amount * {"": 1 / (1024 * 1024), "k": 1 / 1024, "m": 1, "g": 1024}[unit]
    if not math.isfinite(mb):   # .nan, .inf, or digits past a float's range
        raise ConfigError(f"{where_}: expected a finite size, got {show(value)}")
    if mb < 6:  # Docker refuses limits below 6 MB
        raise ConfigError(f"{where_}: must be at least 6 MB, got {value!r}")
    return int(mb)


_TOKEN_RE = re.compile(r"[\x21-\x7e]{16,256}")


def token(value: Any, where_: str) -> str:
    """A shared token: 16 to 256 visible ASCII characters (it travels in an HTTP header).
    The error never quotes it."""
    if not isinstance(value, str) or not _TOKEN_RE.fullmatch(value):
        got = f"{len(value)} characters" + ("" if value.isascii() and value.isprintable()
                                            and " " not in value else
                                            ", not all visible ASCII") \
            if isinstance(value, str) else type(value).__name__
        raise ConfigError(f"{where_}: expected 16 to 256 visible ASCII characters (no "
                          f"spaces), got {got}")
    return value
