"""Python side of the derive differential test (run with /usr/bin/python3).

Reads one JSON object per line on stdin and writes one per line on stdout:

  {"k":"v1","rule":R,"value":S}  version 1 by the reference semantics,
                                  written with Python's own str.strip(),
                                  str.lower(), str.isalnum(), unicodedata
                                  and decimal.Decimal
  {"k":"phone","value":S}         Google's libphonenumber, Python port
                                  (Debian's python3-phonenumbers)
  {"k":"key",...}                 canonical bytes and HMAC of a v1 payload

Answers: {"value":...} (plus "type"/"valid"/"region"), or {"error":...}.
"""
import decimal
import hashlib
import hmac
import json
import sys
import unicodedata

import phonenumbers


def nfc(s):
    return unicodedata.normalize("NFC", s)


def v1(rule, s):
    if rule == "text":
        out = nfc(s).strip()
    elif rule == "ref":
        out = s.strip()
    elif rule in ("template", "email"):
        out = nfc(s).strip().lower()
    elif rule == "pix_key":
        s = nfc(s).strip()
        if "@" in s:
            out = s.lower()
        else:
            out = "".join(c for c in s if c.isalnum()).lower()
    elif rule == "money":
        d = decimal.Decimal(s.strip())
        if not d.is_finite():
            raise ValueError("not finite")
        cents = d * 100
        if cents != cents.to_integral_value():
            raise ValueError("sub-cent")
        out = str(int(cents))
    else:
        raise ValueError("unknown rule " + rule)
    if out == "":
        raise ValueError("empty")
    return {"value": out}


TYPES = {
    phonenumbers.PhoneNumberType.MOBILE: "mobile",
    phonenumbers.PhoneNumberType.FIXED_LINE: "fixed_line",
    phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE: "fixed_line_or_mobile",
}


def phone(s):
    n = phonenumbers.parse(s, "BR")
    return {
        "value": phonenumbers.format_number(n, phonenumbers.PhoneNumberFormat.E164),
        "valid": phonenumbers.is_valid_number(n),
        "region": phonenumbers.region_code_for_number(n) or "",
        "type": TYPES.get(phonenumbers.number_type(n), "other"),
    }


def key(o):
    canonical = json.dumps(
        {"a": o["action"], "p": o["payload"], "t": o["tenant"], "v": 1},
        ensure_ascii=False, sort_keys=True, separators=(",", ":"),
    )
    mac = hmac.new(o["secret"].encode(), canonical.encode(), hashlib.sha256).hexdigest()
    return {"canonical": canonical, "key": mac}


def main():
    out = sys.stdout
    for line in sys.stdin:
        o = json.loads(line)
        try:
            if o["k"] == "v1":
                unassigned = any(unicodedata.category(c) == "Cn" for c in o["value"])
                try:
                    r = v1(o["rule"], o["value"])
                finally:
                    pass
                if unassigned:
                    r["unassigned"] = True
            elif o["k"] == "phone":
                r = phone(o["value"])
            elif o["k"] == "key":
                r = key(o)
            else:
                r = {"error": "unknown kind"}
        except Exception as e:  # every refusal is an answer, not a crash
            r = {"error": type(e).__name__}
        out.write(json.dumps(r, ensure_ascii=False) + "\n")
    out.flush()


if __name__ == "__main__":
    print("unidata", unicodedata.unidata_version, file=sys.stderr)
    main()
