"""Named regex fragments for JSON values, and exact integer ranges.

Kept apart from the walker so each fragment can be read (and tested) on its own,
as outlines does with its ``STRING``/``INTEGER``/``WHITESPACE`` constants.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

__all__ = [
    "STRING_CHAR", "STRING", "INTEGER", "NUMBER", "ZERO_BOUNDED", "BOOLEAN", "NULL", "FORMATS", "REGEX_ATOM", "REGEX_QUANTIFIER", "REGEX_ANCHOR", "integer_range", "decimal_bound",
]

# One *character* of a JSON string: a raw character (no quote, backslash or control),
# an escape, or a \u escape. Escaped surrogates are allowed only as a complete pair,
# so the count of these units equals the string's length after json.loads — which
# keeps minLength/maxLength exact.
STRING_CHAR = (
    r'(?:[^"\\\x00-\x1f]'
    r'|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-CeEfF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})"
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)
STRING = f'"{STRING_CHAR}*"'
INTEGER = r"-?(?:0|[1-9][0-9]*)"
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
#: Numbers on one side of zero, exponents included: an exponent scales a number's magnitude but
#: never changes its sign or whether it is zero, so against a bound of 0 every spelling is judged
#: by its sign and its mantissa's digits alone ("minimum": 0 is the commonest bound there is).
#: (A negative zero, "-0", is left out: over-constrained, never weaker.)
_NONZERO_MANTISSA = r"(?:[1-9][0-9]*(?:\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)"
_ZERO = r"0(?:\.0+)?"
_EXPONENT = r"(?:[eE][+-]?[0-9]+)?"
#: Where the bound excludes 0 itself, no negative exponent: ``1e-400`` is above 0, but a reader of
#: JSON numbers as floats (``json.loads``, every validator built on it) reads it as 0.0, which is not.
_GROWING_EXPONENT = r"(?:[eE]\+?[0-9]+)?"
#: How close to a strict bound a decimal may come, in fraction digits (see ``fraction_clear_of``).
NEAR_DIGITS = 20
#: A strict bound must also keep out what json.loads rounds to zero: "0.(400 zeros)1" reads as
#: 0.0. A mantissa below 1 therefore has its first non-zero digit within the first
#: ``NEAR_DIGITS`` places (stricter: the exact cut is 2**-1075).
_FAR_FROM_ZERO = rf"(?:[1-9][0-9]*(?:\.[0-9]+)?|0\.0{{0,{NEAR_DIGITS - 1}}}[1-9][0-9]*)"
ZERO_BOUNDED = {
    (True, False): rf"(?:{_ZERO}|{_NONZERO_MANTISSA}){_EXPONENT}",  # x >= 0
    (True, True): rf"{_FAR_FROM_ZERO}{_GROWING_EXPONENT}",  # x > 0
    (False, False): rf"(?:{_ZERO}|-{_NONZERO_MANTISSA}){_EXPONENT}",  # x <= 0
    (False, True): rf"-{_FAR_FROM_ZERO}{_GROWING_EXPONENT}",  # x < 0
}
BOOLEAN = r"(?:true|false)"
NULL = r"null"

_YEAR = r"(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"  # 0001-9999, as Python's date
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    rf"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    rf"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)"
)
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = r"[0-9a-fA-F]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = "(?:" + "|".join([
    rf"(?:{_H16}:){{6}}{_LS32}",
    rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
]) + ")"  # fmt: skip
# A DNS label of 1-63 letters, digits and inner hyphens, without "--" as its third and
# fourth characters: that rules out IDNA A-labels ("xn--…"), whose validity needs
# punycode decoding, and the other reserved "??--" forms.
_ALNUM, _LDH = "[a-zA-Z0-9]", "[a-zA-Z0-9-]"
_LABEL = rf"{_ALNUM}(?:{_ALNUM}|{_LDH}{_ALNUM}|{_LDH}{_LDH}{_ALNUM}|{_LDH}(?:{_ALNUM}{_LDH}|-{_ALNUM}){_LDH}{{0,58}}{_ALNUM})?"
_SHORT_LABEL = rf"{_ALNUM}(?:{_ALNUM}|{_LDH}{_ALNUM}|{_LDH}{_LDH}{_ALNUM}|{_LDH}(?:{_ALNUM}{_LDH}|-{_ALNUM}){_LDH}{{0,13}}{_ALNUM})?"
# At most 63 + 9 × (1 + 18) = 234 characters: under the 253 a hostname may have.
_HOSTNAME = rf"{_LABEL}(?:\.{_SHORT_LABEL}){{0,9}}"
_N = r"[0-9]+"
# RFC 3339 appendix A: Y[M[D]] | M[D] | D, and H[M[S]] | M[S] | S after T.
_DURATION_TIME = rf"T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S)"
_DURATION = (
    rf"P(?:(?:{_N}Y(?:{_N}M(?:{_N}D)?)?|{_N}M(?:{_N}D)?|{_N}D)(?:{_DURATION_TIME})?|{_DURATION_TIME}|{_N}W)"
)
# RFC 3986 (URI) and RFC 3987 (IRI: the same grammar, with non-ASCII "ucschar" allowed
# where unreserved characters are, and private-use characters in the query).
_PCT = r"%[0-9A-Fa-f]{2}"
_UCS = (
    r"[\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"
    + "".join(f"\\U{plane:04x}0000-\\U{plane:04x}fffd" for plane in range(1, 14))
    + r"\U000e1000-\U000efffd]"
)
_PRIVATE = r"[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]"


def _uri_grammar(international: bool) -> tuple[str, str]:
    """(absolute URI, URI reference) regexes; IRIs with ``international``."""
    unreserved = r"[A-Za-z0-9\-._~!$&'()*+,;=]" + (f"|{_UCS}" if international else "")
    pchar = rf"(?:{unreserved}|{_PCT}|[:@])"
    future = r"[vV][0-9a-fA-F]+\.(?:[A-Za-z0-9\-._~!$&'()*+,;=]|:)+"
    authority = (
        rf"(?:(?:{unreserved}|{_PCT}|:)*@)?"
        rf"(?:\[(?:{_IPV6}|{future})\]|(?:{unreserved}|{_PCT})*)(?::[0-9]*)?"
    )
    segments = rf"(?:/{pchar}*)*"
    query = rf"(?:\?(?:{pchar}|[/?]" + (f"|{_PRIVATE}" if international else "") + ")*)?"
    fragment = rf"(?:#(?:{pchar}|[/?])*)?"
    absolute_path = rf"/(?:{pchar}+{segments})?"
    absolute = (
        rf"[a-zA-Z][a-zA-Z0-9+.-]*:(?://{authority}{segments}|{absolute_path}|{pchar}+{segments}|)"
        rf"{query}{fragment}"
    )
    no_colon = rf"(?:{unreserved}|{_PCT}|@)+"  # a relative path's first segment holds no ':'
    relative = rf"(?://{authority}{segments}|{absolute_path}|{no_colon}{segments}|){query}{fragment}"
    return absolute, f"(?:{absolute}|{relative})"


_URI, _URI_REFERENCE = _uri_grammar(False)
_IRI, _IRI_REFERENCE = _uri_grammar(True)
# RFC 6901. Characters stand as JSON writes them: raw, or escaped; escapes that spell '/'
# or '~' (\/, \u002f, \u007e) and other escaped printable ASCII are left out (stricter).
_POINTER_CHAR = (
    r'(?:[^"\\\x00-\x1f~/]|\\["\\bfnrt]|\\u00[01][0-9a-fA-F]'
    r"|\\u(?:[1-9a-cA-CeEfF][0-9a-fA-F]{3}|0[1-9a-fA-F][0-9a-fA-F]{2}|[dD][0-7][0-9a-fA-F]{2})"
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)
_JSON_POINTER = rf"(?:/(?:{_POINTER_CHAR}|~[01])*)*"
_RELATIVE_JSON_POINTER = rf"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})"
# RFC 6570 level 4: literals, and expressions {op varname[:n|*], ...}.
_TEMPLATE_LITERAL = rf"(?:[!#$&'()*+,\-./0-9:;=?@A-Z\[\]_a-z~]|{_UCS}|{_PRIVATE}|{_PCT})"
_VARNAME = rf"(?:[A-Za-z0-9_]|{_PCT})(?:\.?(?:[A-Za-z0-9_]|{_PCT}))*"
_VARSPEC = rf"{_VARNAME}(?::[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = rf"(?:{_TEMPLATE_LITERAL}|\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}})*"

# format "regex": regexes with groups nested at most a few deep (to_regex builds the nesting
# from these pieces), in a syntax ECMA-262 and Python's ``re`` share. The language of valid
# regexes is not regular (groups nest without bound), so this is a regular part of it, stricter
# on purpose: groups ``(…)`` and ``(?:…)``; ``.``, the class escapes ``\d \w \s`` and their
# negations, ``\n \r \t \f \v``, an escaped syntax character; classes whose ranges stay within
# the digits, the lower- or the upper-case letters in order, a ``-`` otherwise only first, last
# or escaped, no ``&``, ``~`` and only an escaped ``|``, ``[`` or ``^`` (Python warns about set
# operations, and reads a ``^`` first as a negation); ``* + ? {n} {n,} {0,m} {1,m}``, lazy or
# not, on anything but an anchor; ``^``, ``$``, ``\b``, ``\B``. Every text of it compiles in
# ``re`` (what the ``jsonschema`` library checks), and each construct is one ECMA-262 reads the
# same with or without the ``u`` flag (no ECMA-262 engine checks that here).
_CLASS_RANGES = "|".join(
    f"{chr(low)}-[{chr(low)}-{chr(last)}]" for first, last in ((48, 57), (97, 122), (65, 90))
    for low in range(first, last + 1)
)  # fmt: skip
_CLASS_ITEM = rf"(?:[^\\\]\[\-^|&~]|\\[dDwWsSnrtfv\\\]\[\-^.$|?*+(){{}}/]|{_CLASS_RANGES})"
_COUNT = "(?:0|[1-9][0-9]{0,2})"
#: One character, class or escape of a regex (a group is built around these).
REGEX_ATOM = rf"(?:[^\\^$.|?*+()\[\]{{}}]|\.|\\[dDwWsSnrtfv\\^$.|?*+()\[\]{{}}/]|\[\^?-?{_CLASS_ITEM}+-?\])"
#: What may follow an atom or a group.
REGEX_QUANTIFIER = rf"(?:[*+?]|\{{{_COUNT},?\}}|\{{0,{_COUNT}\}}|\{{1,[1-9][0-9]{{0,2}}\}})\??"
#: A piece that takes no quantifier.
REGEX_ANCHOR = r"[$^]|\\[bB]"


#: String formats enforced by the regex (the content between the quotes, as JSON spells it).
#: Each is at least as strict as the ``jsonschema`` library's checker for the same format.
FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}[tT]{_TIME}",
    "duration": _DURATION,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "email": r"[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    rf"@{_LABEL}(?:\.{_SHORT_LABEL}){{1,9}}",
    "hostname": _HOSTNAME,
    "uri": _URI,
    "uri-reference": _URI_REFERENCE,
    "iri": _IRI,
    "iri-reference": _IRI_REFERENCE,
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": _RELATIVE_JSON_POINTER,
    "uri-template": _URI_TEMPLATE,
}


def integer_range(low: int | None, high: int | None) -> str:
    """A regex for exactly the JSON integers in ``[low, high]`` (None = unbounded)."""
    if low is not None and high is not None and low > high:
        return r"[^\x00-\U0010FFFF]"  # the empty language
    options: list[str] = []
    if low is None or low < 0:  # negative part: '-' then magnitudes in [max(1, -high), -low]
        magnitude_low = 1 if high is None or high >= 0 else -high
        magnitude_high = None if low is None else -low
        options.append("-" + _group(_natural_range(magnitude_low, magnitude_high)))
    if high is None or high >= 0:
        options.append(_group(_natural_range(max(0, low if low is not None else 0), high)))
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"


def _group(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"


def _natural_range(low: int, high: int | None) -> list[str]:
    """Alternatives matching the decimal spellings (no leading zeros) of ``low..high``."""
    if high is None:
        digits = len(str(low))
        return _natural_range(low, 10**digits - 1) + [f"[1-9][0-9]{{{digits},}}"]
    if low > high:
        return []
    if len(str(low)) < len(str(high)):
        split = 10 ** len(str(low))
        return _natural_range(low, split - 1) + _natural_range(split, high)
    return _same_length(str(low), str(high))


_FRACTION = r"(?:\.[0-9]+)?"


def fraction_clear_of(magnitude: int, *, above: bool) -> str | None:
    """Fraction digits ``F`` for which ``json.loads`` keeps ``magnitude.F`` (``above``) or
    ``(magnitude - 1).F`` (below) on its side of the integer ``magnitude``: a regex, or None
    where no fraction is (from 2**52 on, the doubles are a whole unit or more apart).

    ``5.00000000000000000001`` is above 5 as a decimal but reads as 5.0, and
    ``4.99999999999999999999`` reads as 5.0 too: under ``exclusiveMinimum``/``exclusiveMaximum:
    5`` both are invalid. Above, ``F`` must reach the gap to the next double: its first
    non-zero digit within ``K`` places, 10**-K ≥ the gap. Below, ``F`` stays under 1 by at
    least the gap to the double before: one of its first ``K`` digits is not 9, or it is
    ``K`` nines and zeros. ``K`` is at most ``NEAR_DIGITS`` (stricter where that cuts).
    """
    gap = (Decimal(math.nextafter(magnitude, math.inf)) - magnitude if above
           else magnitude - Decimal(math.nextafter(magnitude, -math.inf)))  # fmt: skip
    if float(magnitude) != magnitude or gap >= 1:
        return None
    places = 0
    while places < NEAR_DIGITS and Decimal(10) ** -(places + 1) >= gap:
        places += 1
    if places == 0:
        return None
    if above:
        return f"0{{0,{places - 1}}}[1-9][0-9]*"
    return f"(?:9{{0,{places - 1}}}[0-8][0-9]*|9{{1,{places}}}0*)"


def decimal_bound(value: Decimal, *, above: bool, strict: bool) -> str:
    """A regex for the JSON numbers written without exponent that are ≥ ``value`` (``above``)
    or ≤ it (> and < with ``strict``), compared by their exact decimal value.

    A bound splits the numbers by sign, then by integer part (an exact integer range),
    and only numbers with the bound's own integer part compare their fraction digits,
    lexicographically, as decimals do ("5" > "49", "5" = "50"). ``-0`` is zero.
    """
    magnitude = abs(value)
    whole = int(magnitude)
    digits = format(magnitude - whole, "f")[2:].rstrip("0") if magnitude != whole else ""
    any_magnitude = INTEGER.lstrip("-?") + _FRACTION
    if (value >= 0) == above:  # ≥ a non-negative bound, or ≤ a negative one: the far side, by magnitude
        side = _magnitude_at_least(whole, digits, strict)
        if value >= 0:  # x ≥ value ≥ 0: non-negative spellings, and -0 when zero itself counts
            zero = r"-0(?:\.0+)?" if value == 0 and not strict else None
            return side if zero is None else f"(?:{side}|{zero})"
        return f"-(?:{side})"
    # ≥ a negative bound: every non-negative number, and negatives up to its magnitude;
    # ≤ a non-negative bound: every negative number, and non-negatives up to it.
    side = _magnitude_at_most(whole, digits, strict)
    if value < 0:
        return f"(?:{any_magnitude}|-(?:{side}))" if side else any_magnitude
    negatives = f"-{_magnitude_at_least(0, '', True)}" if value == 0 and strict else f"-{any_magnitude}"  # -0 < 0?
    return f"(?:{negatives}|{side})" if side else negatives


def _magnitude_at_least(whole: int, digits: str, strict: bool) -> str:
    """Unsigned spellings ``I(.F)?`` whose value is ≥ ``whole.digits`` (> with ``strict``)."""
    options = [_group(_natural_range(whole + 1, None)) + _FRACTION]
    # Same integer part: the fraction decides; F > D where they first differ, or F extends D.
    above = [re.escape(digits[:i]) + f"[{int(d) + 1}-9][0-9]*" for i, d in enumerate(digits) if d != "9"]
    above.append(re.escape(digits) + "[0-9]*[1-9][0-9]*")
    if not strict:
        above.append(re.escape(digits) + "0*" if digits else "0+")
    head = str(whole) + r"\.(?:" + "|".join(above) + ")"
    options.append(head if digits or strict else f"{whole}(?:\\.[0-9]+)?")
    return "(?:" + "|".join(options) + ")"


def _magnitude_at_most(whole: int, digits: str, strict: bool) -> str:
    """Unsigned spellings ``I(.F)?`` whose value is ≤ ``whole.digits`` (< with ``strict``); ''
    when there are none."""
    options = [_group(_natural_range(0, whole - 1)) + _FRACTION] if whole > 0 else []
    below = [re.escape(digits[:i]) + f"[0-{int(d) - 1}][0-9]*" for i, d in enumerate(digits) if d != "0"]
    below += [re.escape(digits[:i]) for i in range(1, len(digits))]  # F a proper prefix of D
    if not strict:
        below.append(re.escape(digits) + "0*" if digits else "0+")
    if digits or not strict:  # the integer part alone is below whole.digits, or equal to it
        options.append(f"{whole}" + (r"(?:\.(?:" + "|".join(below) + "))?" if below else ""))
    return "(?:" + "|".join(options) + ")" if options else ""


def _same_length(low: str, high: str) -> list[str]:
    if low == high:
        return [low]
    if len(low) == 1:
        return [f"[{low}-{high}]"]
    if low[0] == high[0]:
        return [low[0] + rest for rest in _same_length(low[1:], high[1:])]
    tail = len(low) - 1
    parts: list[str] = []
    first, last = int(low[0]), int(high[0])
    if low[1:] != "0" * tail:
        parts += [low[0] + rest for rest in _same_length(low[1:], "9" * tail)]
        first += 1
    closing: list[str] = []
    if high[1:] != "9" * tail:
        closing = [high[0] + rest for rest in _same_length("0" * tail, high[1:])]
        last -= 1
    if first <= last:
        digit = str(first) if first == last else f"[{first}-{last}]"
        parts.append(digit + f"[0-9]{{{tail}}}")
    return parts + closing


def escape_literal(text: str) -> str:
    """``re.escape`` for the parts of a regex that must match ``text`` literally."""
    return re.escape(text)
