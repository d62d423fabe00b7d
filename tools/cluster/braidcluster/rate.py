"""Link rates and byte sizes as people type them: "1gbit", "100mbit", "64M"."""
import re

_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps)?$", re.IGNORECASE)
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


class RateError(ValueError):
    pass


def parse_rate(text):
    """Bits per second from tc-style text: "1gbit", "100mbit", "250kbit", plain numbers are bits.
    Decimal prefixes as tc uses them; "bps" means bytes per second, as in tc."""
    m = _RATE.match(str(text).strip())
    if not m:
        raise RateError(f"rate '{text}' is not like 1gbit, 100mbit or 500kbit")
    value = float(m.group(1)) * _SCALE[m.group(2).lower()]
    if (m.group(3) or "bit").lower() == "bps":
        value *= 8
    bits = int(value)
    if bits < 8000:
        raise RateError(f"rate '{text}' is below 8 kbit/s")
    return bits


def parse_bytes(text):
    """Bytes from "64M", "1G", "4096", "512K" (powers of 1024, as braid's env sizes)."""
    m = re.match(r"^(\d+)([KMG]?)$", str(text).strip(), re.IGNORECASE)
    if not m:
        raise RateError(f"size '{text}' is not like 4096, 512K, 64M or 1G")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def human_bits(bits_per_second):
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:.3g} {unit}"
    return f"{bits_per_second:.0f} bit/s"
