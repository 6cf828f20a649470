#!/usr/bin/env python3
"""Writes the seed inputs of classify_fuzz and service_fuzz.

Both targets decode their input with libFuzzer's FuzzedDataProvider, which
reads integers from the end of the input and strings from the front, so
meaningful inputs cannot be typed by hand. This script encodes named
scenarios (trip a breaker, probe it, force it, watch it...) in exactly the
order the harnesses consume them; keep it in step with classify_fuzz.cc and
service_fuzz.cc. To see what a seed decodes to:

    BREAKERD_FUZZ_TRACE=1 build-fuzz/service_fuzz fuzz/corpus/service_fuzz/<seed>

Usage: fuzz/seeds.py [CORPUS_DIR]   (default: the corpus/ next to this file)

The reproducers of known findings (inputs that pass unless
BREAKERD_FUZZ_STRICT=1) are written to crashes/<target>/ beside CORPUS_DIR.
"""

import os
import sys


class Fdp:
    """Builds bytes that FuzzedDataProvider (LLVM 14) decodes to given values."""

    def __init__(self):
        self.front = bytearray()  # ConsumeRandomLengthString, front to back
        self.back = bytearray()  # integers, in the order they are consumed

    def int_range(self, lo, hi, value, bits=32):
        """ConsumeIntegralInRange<T>(lo, hi) returning `value`."""
        assert lo <= value <= hi, (lo, value, hi)
        span = hi - lo
        nbytes = 0
        while nbytes * 8 < bits and (span >> (nbytes * 8)) > 0:
            nbytes += 1
        x = value - lo
        # The first byte consumed ends up most significant.
        for i in reversed(range(nbytes)):
            self.back.append((x >> (8 * i)) & 0xFF)
        return self

    def u32(self, value):
        return self.int_range(0, 2**32 - 1, value)

    def i32(self, value):
        return self.int_range(-(2**31), 2**31 - 1, value)

    def u64(self, value):
        return self.int_range(0, 2**64 - 1, value, bits=64)

    def i64(self, value):
        return self.int_range(-(2**63), 2**63 - 1, value, bits=64)

    def boolean(self, value):
        return self.int_range(0, 255, 1 if value else 0, bits=8)

    def string(self, text):
        """ConsumeRandomLengthString: backslashes doubled, then a terminator."""
        data = text.encode("latin-1") if isinstance(text, str) else text
        self.front += data.replace(b"\\", b"\\\\") + b"\\ "
        return self

    def data(self):
        return bytes(self.front) + bytes(reversed(self.back))


# --- classify_fuzz (fuzz/classify_fuzz.cc) -----------------------------------

CLASSIFY_NAMES = ["a", "openai/key-1", "b.c:d@e-f_g", "z"]
STATUSES = [200, 204, 301, 400, 401, 403, 404, 408, 429, 500, 502, 503, 504, 529]


def c_raw_outcome(f, explicit=0, http=0, grpc=None):
    """ConsumeRawOutcome with small-range branches."""
    if explicit == 0:
        f.int_range(0, 3, 0)
    else:
        f.int_range(0, 3, 1).int_range(-2, 11, explicit)
    if http == 0:
        f.int_range(0, 3, 0)
    else:
        f.int_range(0, 3, 1).int_range(90, 610, http)
    if grpc is None:
        f.int_range(0, 3, 0)
    else:
        f.int_range(0, 3, 1).int_range(-2, 18, grpc)


SHARES = [0.1, 0.5, 1, 0.25, 0.000001]


def c_duration_or_off(f, ms):
    """ConsumeDurationOrOff: 0 (off) or a whole number of ms up to 10 s."""
    if ms == 0:
        f.int_range(0, 3, 0)
    else:
        f.int_range(0, 3, 2).int_range(1, 10000, ms, bits=64)


def c_policy(f, shadow=False, consecutive=3, threshold_index=0, min_calls=4,
             window_ms=10000, base_ms=1000, max_factor=4, jitter_index=0,
             lease_ms=2000, required=1, rate_limited_ignore=False,
             hang_after_ms=0, ramp_ms=0, start_share=0.1):
    f.int_range(0, 3, 0 if shadow else 1)
    f.int_range(0, 6, consecutive)
    f.int_range(0, 4, threshold_index)  # {0, 0.25, 0.5, 1, 0.01}
    f.int_range(1, 8, min_calls)
    f.int_range(1000, 60000, window_ms, bits=64)
    f.int_range(0, 4, 0)  # slow_call_rate off
    f.int_range(1, 8, 2)
    f.int_range(1, 5000, 1000, bits=64)
    f.int_range(1, 60000, base_ms, bits=64)
    f.int_range(1, 64, max_factor, bits=64)
    f.int_range(0, 3, jitter_index)  # {0, 0.1, 0.5, 0.999}
    f.int_range(1, 20000, lease_ms, bits=64)
    f.int_range(1, 3, required)
    f.boolean(rate_limited_ignore)
    f.int_range(0, 20, 1)  # ratio 0.1
    f.int_range(0, 20, 2)  # min_per_second 0.2
    f.int_range(1000, 20000, 5000, bits=64)
    c_duration_or_off(f, hang_after_ms)
    c_duration_or_off(f, ramp_ms)
    if start_share in SHARES:
        f.int_range(0, 5, SHARES.index(start_share))
    else:
        f.int_range(0, 5, 5).int_range(1, 1000000, round(start_share * 1e6))


def c_start(f, second_policy=None, max_breakers=4, idle_s=5, **policy):
    c_raw_outcome(f, explicit=1)
    c_policy(f, **policy)
    f.boolean(second_policy is not None)
    if second_policy is not None:
        c_policy(f, **second_policy)
    f.int_range(1, 5, max_breakers)
    f.int_range(1, 600, idle_s)


OPS = 13  # classify_fuzz's operations are numbered 0..OPS


def c_acquire(f, name=0, attempt=0):
    f.int_range(0, OPS, 0).int_range(0, 3, name)
    if attempt == 0:
        f.int_range(0, 5, 2)
    elif attempt == 1:
        f.int_range(0, 5, 0)
    else:
        f.int_range(0, 5, 1).u32(attempt)


def c_report(f, index, issued, explicit=None, http=None, grpc=None,
             latency_ms=None, retry_after_ms=None):
    """Reports issued permit `index` of `issued` (the count so far)."""
    f.int_range(0, OPS, 2)
    f.int_range(0, issued - 1, index, bits=64)
    c_facts(f, explicit, http, grpc, latency_ms, retry_after_ms)


def c_facts(f, explicit=None, http=None, grpc=None, latency_ms=None,
            retry_after_ms=None):
    f.int_range(0, 7, 1)  # not a raw outcome
    if explicit is not None:
        f.int_range(0, 2, 0).int_range(1, 9, explicit)
    elif http is not None:
        f.int_range(0, 2, 1).int_range(0, 13, STATUSES.index(http))
    else:
        f.int_range(0, 2, 2).int_range(0, 16, grpc)
    if latency_ms is None:
        f.int_range(0, 3, 0)
    else:
        f.int_range(0, 3, 2).int_range(0, 6000, latency_ms, bits=64)
    if retry_after_ms is None:
        f.int_range(0, 3, 1)
    else:
        f.int_range(0, 3, 0).int_range(0, 24 * 3600 * 1000, retry_after_ms,
                                       bits=64)


def c_forged(f, name=0, kind="garbage", value=12345, explicit=1):
    f.int_range(0, OPS, 4).int_range(0, 3, name)
    if kind == "zero":
        f.int_range(0, 3, 0)
    else:
        f.int_range(0, 3, 2).u64(value)
    f.int_range(0, 7, 1).int_range(0, 2, 0).int_range(1, 9, explicit)
    f.int_range(0, 3, 0).int_range(0, 3, 1)


def c_advance_ms(f, ms):
    f.int_range(0, OPS, 5).int_range(0, 2, 1).int_range(0, 120000, ms)


def c_admin(f, name=0, op=0):
    f.int_range(0, OPS, 6).int_range(0, 3, name).int_range(0, 2, op)


def c_acquire_first(f, names, attempt=0):
    f.int_range(0, OPS, 8).int_range(0, 5, len(names))
    for n in names:
        f.int_range(0, 3, n)
    f.int_range(0, 5, 2 if attempt == 0 else 0)


def c_evict(f):
    f.int_range(0, OPS, 9)


def c_burst(f, name=0, n=1):
    """n Acquires of one name at the same instant (first attempts)."""
    f.int_range(0, OPS, 11).int_range(0, 3, name).int_range(1, 100, n)


def c_report_all(f, name=0, reverse=False, **facts):
    """Reports every permit issued for `name` so far, with the same facts."""
    f.int_range(0, OPS, 12).int_range(0, 3, name).boolean(reverse)
    c_facts(f, **facts)


def classify_seeds():
    seeds = {}

    f = Fdp()  # Raw outcomes only: each precedence rule once.
    c_raw_outcome(f, explicit=4, http=200, grpc=0)
    seeds["precedence_explicit"] = f.data()
    f = Fdp()
    c_raw_outcome(f, http=503, grpc=0)
    seeds["precedence_http"] = f.data()
    f = Fdp()
    c_raw_outcome(f, explicit=11)
    seeds["bad_explicit"] = f.data()
    f = Fdp()
    c_raw_outcome(f, grpc=17)
    seeds["bad_grpc"] = f.data()

    # Trip by consecutive failures, wait out the cooldown, probe, close.
    f = Fdp()
    c_start(f, consecutive=3)
    issued = 0
    for _ in range(3):
        c_acquire(f, name=0)
        c_report(f, issued, issued + 1, explicit=2)  # timeout
        issued += 1
    c_acquire(f, name=0)  # rejected: open
    c_advance_ms(f, 1500)
    c_acquire(f, name=0)  # the probe
    issued += 1
    c_acquire(f, name=0)  # probe in flight
    c_report(f, issued - 1, issued, explicit=1)  # probe success closes
    c_acquire(f, name=0)
    seeds["trip_probe_close"] = f.data()

    # A failed probe escalates; a retry while open is refused.
    f = Fdp()
    c_start(f, consecutive=1, jitter_index=1)
    c_acquire(f, name=1)
    c_report(f, 0, 1, http=503, retry_after_ms=2500)
    c_acquire(f, name=1, attempt=1)
    c_advance_ms(f, 3000)
    c_acquire(f, name=1)
    c_report(f, 1, 2, grpc=14)  # probe failure
    c_advance_ms(f, 5000)
    c_acquire(f, name=1)
    c_report(f, 2, 3, http=429)
    seeds["probe_failure_escalates"] = f.data()

    # Shadow mode, rate-limited ignored, late and forged reports.
    f = Fdp()
    c_start(f, shadow=True, consecutive=2, rate_limited_ignore=True)
    c_acquire(f, name=2)
    c_acquire(f, name=2)
    c_report(f, 0, 2, http=429)
    c_report(f, 1, 2, explicit=3)
    c_acquire(f, name=2)
    c_report(f, 2, 3, explicit=4)
    c_report(f, 0, 3, explicit=1)  # late by now
    c_forged(f, name=2, kind="garbage")
    c_forged(f, name=2, kind="zero")
    c_acquire(f, name=2, attempt=3)
    seeds["shadow_late_forged"] = f.data()

    # Failure rate with a second policy, admin overrides, eviction, the cap.
    f = Fdp()
    c_start(f, consecutive=0, threshold_index=2, min_calls=2,
            second_policy=dict(consecutive=0, threshold_index=1, min_calls=3,
                               required=2),
            max_breakers=3, idle_s=1)
    c_acquire(f, name=1)
    c_acquire(f, name=1)
    c_report(f, 0, 2, explicit=1)
    c_report(f, 1, 2, explicit=4)
    c_admin(f, name=0, op=0)
    c_acquire(f, name=0)
    c_admin(f, name=0, op=1)
    c_acquire(f, name=0)
    c_admin(f, name=0, op=2)
    c_acquire_first(f, [0, 1, 2, 3])
    c_advance_ms(f, 60000)
    c_evict(f)
    c_acquire(f, name=3)
    seeds["rate_admin_evict_cap"] = f.data()

    # Hung calls (hang_after 1 s) open the breaker at the next Acquire; a
    # permit reported twice is late, then a duplicate.
    f = Fdp()
    c_start(f, consecutive=0, threshold_index=2, min_calls=4,
            hang_after_ms=1000)
    c_burst(f, name=0, n=4)
    c_advance_ms(f, 1500)
    c_acquire(f, name=0)  # 4 hung: failure rate 4/4 -> open (hung_calls)
    c_report(f, 0, 4, explicit=1)  # late
    c_report(f, 0, 4, explicit=1)  # duplicate
    c_advance_ms(f, 1500)
    c_acquire(f, name=0)  # the probe
    c_report(f, 4, 5, explicit=1)
    seeds["hung_calls_open"] = f.data()

    # The real report replaces the hung count, while the window holds it.
    f = Fdp()
    c_start(f, consecutive=0, hang_after_ms=1000)
    c_burst(f, name=1, n=3)
    c_advance_ms(f, 1500)
    c_acquire(f, name=1)  # 3 hung
    c_report(f, 0, 4, explicit=1)  # replaces one
    c_report(f, 0, 4, explicit=1)  # duplicate
    c_advance_ms(f, 60000)
    c_report(f, 1, 4, explicit=1)  # its hung count has left the window
    seeds["hung_replaced"] = f.data()

    # Every permit reported twice: the repeats are duplicates.
    f = Fdp()
    c_start(f, consecutive=3)
    c_burst(f, name=0, n=3)
    c_report_all(f, name=0, explicit=2)  # the third failure opens
    c_report_all(f, name=0, reverse=True, explicit=1)
    c_acquire(f, name=0)
    seeds["duplicates"] = f.data()

    # Gentle recovery: a 2 s ramp from 0.1 after the probe closes; the ramp
    # refuses most first attempts and every retry; two failures re-open
    # (ramp_failed, escalation 1).
    f = Fdp()
    c_start(f, consecutive=2, ramp_ms=2000, start_share=0.1)
    for i in range(2):
        c_acquire(f, name=0)
        c_report(f, i, i + 1, explicit=2)
    c_advance_ms(f, 1500)
    c_acquire(f, name=0)  # the probe
    c_report(f, 2, 3, explicit=1)  # closes: the ramp starts
    c_burst(f, name=0, n=20)  # 2 admitted (the first, then 1 in 10)
    c_acquire(f, name=0, attempt=1)  # refused: a retry while ramping
    c_advance_ms(f, 1000)  # share 0.55
    c_burst(f, name=0, n=4)  # 3 admitted
    c_report(f, 5, 8, explicit=2)
    c_report(f, 6, 8, explicit=2)  # re-opens: ramp_failed
    c_acquire(f, name=0)
    seeds["ramp_then_fail"] = f.data()

    # Shadow mode counts what the ramp would refuse.
    f = Fdp()
    c_start(f, shadow=True, consecutive=2, ramp_ms=2000, start_share=0.5)
    for i in range(2):
        c_acquire(f, name=2)
        c_report(f, i, i + 1, explicit=2)
    c_advance_ms(f, 1500)
    c_acquire(f, name=2)  # the probe
    c_report(f, 2, 3, explicit=1)
    c_burst(f, name=2, n=5)
    c_acquire(f, name=2, attempt=1)
    seeds["shadow_ramp"] = f.data()

    # A permit out keeps its breaker from eviction until the horizon (60 s).
    f = Fdp()
    c_start(f, idle_s=1)
    c_acquire(f, name=0)  # never reported
    c_acquire(f, name=3)
    c_report(f, 1, 2, explicit=6)  # neutral: no history
    c_advance_ms(f, 5000)
    c_evict(f)  # "z" goes, "a" stays
    c_advance_ms(f, 60000)
    c_evict(f)  # "a" goes
    c_acquire(f, name=0)
    seeds["evict_permit_out"] = f.data()

    # A breaker nobody calls after its ramp has run its course is evicted
    # (the eviction pass ends the ramp and its escalation).
    f = Fdp()
    c_start(f, consecutive=1, ramp_ms=500, start_share=0.1, idle_s=1)
    escalate_then_recover(f)
    c_advance_ms(f, 120000)
    c_evict(f)
    seeds["ramp_over_evicted"] = f.data()
    return seeds


def escalate_then_recover(f):
    """Opens "a" (consecutive_failures 1), fails a probe (escalation 1),
    then closes it on a probe (permits 0..2)."""
    c_acquire(f, name=0)
    c_report(f, 0, 1, explicit=2)  # open, escalation 0 (1 s)
    c_advance_ms(f, 1500)
    c_acquire(f, name=0)
    c_report(f, 1, 2, explicit=2)  # probe failed: escalation 1 (2 s)
    c_advance_ms(f, 2500)
    c_acquire(f, name=0)
    c_report(f, 2, 3, explicit=1)  # closes: the ramp starts, escalation 1


def classify_known_finding_seeds():
    """Inputs of the KNOWN FINDING in classify_fuzz.cc (a ramp run its
    course keeps its escalation until the next Acquire); they pass unless
    BREAKERD_FUZZ_STRICT=1 (so they live in fuzz/crashes/classify_fuzz/)."""
    seeds = {}
    # A trip after the ramp's time: re-opens at escalation 1 (2 s), though
    # the status showed 0.
    f = Fdp()
    c_start(f, consecutive=1, ramp_ms=500, start_share=0.1)
    escalate_then_recover(f)
    c_acquire(f, name=0)  # the first attempt after the close goes through
    c_advance_ms(f, 1000)  # the ramp is over: escalation shown 0
    c_report(f, 3, 4, explicit=2)
    seeds["ramp_over_kept_escalation"] = f.data()
    return seeds


# --- service_fuzz (fuzz/service_fuzz.cc) ---------------------------------------

SERVICE_NAMES = ["a", "openai/key-1", "shadow/s", "slow/x", "rl/y", "b", "c.d",
                 "e@f:g-h_i", "shadow/t", "hang/h", "ramp/r"]
SERVICE_OPS = [0] * 8 + [1] * 9 + [2] * 3 + [3] * 3 + [4] + [5] + [6] * 3 + [7] * 4
TOKEN = "fuzz-admin-token-7f3a"


def s_knobs(f, hang_after_ms=None, ramp_ms=None, start_share=None):
    """ConsumeKnobs, first: the defaults (1 s, 2 s, 0.1) unless all given."""
    if hang_after_ms is None:
        f.int_range(0, 3, 0)
        return
    f.int_range(0, 3, 1)
    f.int_range(1, 300000, hang_after_ms, bits=64)
    f.int_range(1, 3600000, ramp_ms, bits=64)
    f.int_range(1, 1000000, round(start_share * 1e6))


def s_op(f, kind):
    f.int_range(0, 31, SERVICE_OPS.index(kind))


def s_name(f, name):
    if isinstance(name, int):
        f.int_range(0, 7, 2).int_range(0, len(SERVICE_NAMES) - 1, name)
    else:
        f.int_range(0, 7, 0).string(name)


def s_attempt(f, attempt):
    if attempt == 0:
        f.int_range(0, 5, 2)
    elif attempt == 1:
        f.int_range(0, 5, 1)
    else:
        f.int_range(0, 5, 0).u32(attempt)


def s_wire(f, wire):
    f.int_range(0, 15, 0 if wire else 1)


def s_acquire(f, name=0, attempt=0, wire=False):
    s_op(f, 0)
    s_name(f, name)
    s_attempt(f, attempt)
    s_wire(f, wire)


def s_duration(f, seconds, nanos):
    if 0 <= seconds <= 3 and 0 <= nanos <= 999999999:
        f.int_range(0, 3, 2).int_range(0, 3, seconds, bits=64)
        f.int_range(0, 999999999, nanos)
    elif -2 <= seconds <= 90000 and -10**9 <= nanos <= 10**9:
        f.int_range(0, 3, 1).int_range(-2, 90000, seconds, bits=64)
        f.int_range(-10**9, 10**9, nanos)
    else:
        f.int_range(0, 3, 0).i64(seconds).i32(nanos)


def s_report(f, name=0, permit="issued", index=0, issued=1, own_name=True,
             outcome=1, http=None, grpc=None, latency=None, retry_after=None,
             wire=False):
    s_op(f, 1)
    s_name(f, name)
    if permit == "zero":
        f.int_range(0, 5, 0)
    elif permit == "garbage":
        f.int_range(0, 5, 1).u64(0xDEADBEEF)
    else:
        f.int_range(0, 5, 2)
        f.int_range(0, issued - 1, index, bits=64).boolean(own_name)
    if 1 <= outcome <= 9:
        f.int_range(0, 3, 2).int_range(1, 9, outcome)
    elif 0 <= outcome <= 10:
        f.int_range(0, 3, 1).int_range(0, 10, outcome)
    else:
        f.int_range(0, 3, 0).i32(outcome)
    f.boolean(http is not None)
    if http is not None:
        f.boolean(False).int_range(0, 600, http)
    f.boolean(grpc is not None)
    if grpc is not None:
        f.boolean(False).int_range(-1, 17, grpc)
    f.boolean(latency is not None)
    if latency is not None:
        s_duration(f, *latency)
    if retry_after is None:
        f.int_range(0, 3, 1)
    else:
        f.int_range(0, 3, 0)
        s_duration(f, *retry_after)
    s_wire(f, wire)


def s_acquire_first(f, names, attempt=0, wire=False):
    s_op(f, 2)
    f.int_range(0, 18, len(names), bits=64)
    for n in names:
        s_name(f, n)
    s_attempt(f, attempt)
    s_wire(f, wire)


def s_get_state(f, name=0, wire=False):
    s_op(f, 3)
    s_name(f, name)
    s_wire(f, wire)


def s_list_states(f, wire=False):
    s_op(f, 4)
    s_wire(f, wire)


def s_watch(f, names):
    s_op(f, 5)
    f.int_range(0, 4, len(names), bits=64).int_range(0, 15, 1)
    for n in names:
        s_name(f, n)


def s_admin(f, op=0, name=0, auth="right"):
    s_op(f, 6)
    f.int_range(0, 2, op)
    s_name(f, name)
    if auth is None:
        f.int_range(0, 5, 0)
    elif auth == "right":
        f.int_range(0, 5, 1)
    elif auth == "lowercase":
        f.int_range(0, 5, 3)
    else:  # printable bytes (the harness maps them into 0x20..0x7e)
        f.int_range(0, 5, 4).string(auth).boolean(False)


def s_advance(f, ms):
    s_op(f, 7)
    f.int_range(0, 20000, ms)


def service_seeds():
    seeds = {}

    # Open "a" (3 failures), wait, probe, close; Watch it meanwhile.
    f = Fdp()
    s_knobs(f)
    s_watch(f, [0])
    for i in range(3):
        s_acquire(f, 0)
        s_report(f, 0, index=i, issued=i + 1, outcome=2)
    s_acquire(f, 0)  # rejected
    s_get_state(f, 0)
    s_advance(f, 1500)
    s_acquire(f, 0, wire=True)  # the probe, over the wire
    s_report(f, 0, index=3, issued=4, outcome=1, wire=True)
    s_list_states(f)
    seeds["trip_probe_close_watched"] = f.data()

    # Admin: every auth shape, every op, a name past the cap of 12.
    f = Fdp()
    s_knobs(f)
    s_admin(f, 0, 1, auth=None)
    s_admin(f, 0, 1, auth="lowercase")
    s_admin(f, 0, 1, auth="Bearer wrong")
    s_admin(f, 0, 1, auth="right")
    s_acquire(f, 1)
    s_admin(f, 1, 1)
    s_acquire(f, 1)
    s_admin(f, 2, 1)
    s_admin(f, 2, 5)  # Reset of an unknown name: NOT_FOUND
    s_watch(f, [])
    for i in range(13):
        s_acquire(f, "n%d" % i)
    seeds["admin_and_cap"] = f.data()

    # Bad input everywhere: names, permits, outcomes, durations.
    f = Fdp()
    s_knobs(f)
    s_acquire(f, "bad name!")
    s_acquire(f, "\xff\xfe", wire=True)
    s_acquire(f, 2, attempt=7)
    s_report(f, 2, permit="zero")
    s_report(f, 2, permit="garbage")
    s_report(f, 2, index=0, issued=1, outcome=12)
    s_report(f, 2, index=0, issued=1, outcome=0, http=99)
    s_report(f, 2, index=0, issued=1, outcome=0, grpc=17)
    s_report(f, 2, index=0, issued=1, latency=(1, -5))
    s_report(f, 2, index=0, issued=1, latency=(-1, 0))
    s_report(f, 2, index=0, issued=1, retry_after=(86401, 0))
    s_report(f, 5, index=0, issued=1, own_name=False)  # another's permit
    s_acquire_first(f, [])
    s_acquire_first(f, [0, "x y"])
    s_get_state(f, "")
    s_watch(f, [0, "#"])
    seeds["bad_inputs"] = f.data()

    # Slow calls, shadow mode, rate limits ignored, AcquireFirst fallback.
    f = Fdp()
    s_knobs(f)
    for i in range(2):
        s_acquire(f, 3)
        s_report(f, 3, index=i, issued=i + 1, outcome=1, latency=(2, 0))
    s_acquire(f, 4)
    s_report(f, 4, index=2, issued=3, outcome=0, http=429)
    s_acquire(f, 2)
    s_report(f, 2, index=3, issued=4, outcome=4)
    s_acquire_first(f, [3, 2, 0])
    s_advance(f, 20000)
    s_acquire_first(f, [3, 0], wire=True)
    seeds["slow_shadow_fallback"] = f.data()

    # Single use: every permit reported twice (the second is a duplicate,
    # also over the wire); one permit never reported keeps its breaker
    # through the reset and idle_ttl at the end.
    f = Fdp()
    s_knobs(f)
    for i in range(2):
        s_acquire(f, 5)
    s_report(f, 5, index=0, issued=2, outcome=2)
    s_report(f, 5, index=0, issued=2, outcome=1)  # duplicate
    s_report(f, 5, index=0, issued=2, outcome=1, wire=True)  # duplicate
    s_acquire(f, 6)  # "c.d": its permit stays out
    s_get_state(f, 5)
    seeds["duplicates_permit_out"] = f.data()

    # Hung calls (hang/* with hang_after 1.5 s): four calls never reported
    # open the breaker (failure rate 4 of 4) at the next Acquire; reported
    # late, then again (a duplicate). Watched.
    f = Fdp()
    s_knobs(f, hang_after_ms=1500, ramp_ms=2000, start_share=0.25)
    s_watch(f, [9])
    for i in range(4):
        s_acquire(f, 9)
    s_advance(f, 2000)
    s_acquire(f, 9)  # rejected: open (hung_calls)
    s_report(f, 9, index=0, issued=4, outcome=1)
    s_report(f, 9, index=0, issued=4, outcome=1)
    s_get_state(f, 9)
    seeds["hung_calls_watched"] = f.data()

    # Gentle recovery (ramp/* with a 2 s ramp from 0.25): open, probe,
    # close; then first attempts past the share and a retry are refused
    # with REJECT_REASON_RAMP.
    f = Fdp()
    s_knobs(f, hang_after_ms=1000, ramp_ms=2000, start_share=0.25)
    for i in range(3):
        s_acquire(f, 10)
        s_report(f, 10, index=i, issued=i + 1, outcome=2)
    s_advance(f, 1500)
    s_acquire(f, 10)  # the probe
    s_report(f, 10, index=3, issued=4, outcome=1)  # closes: the ramp starts
    for i in range(4):
        s_acquire(f, 10)  # the first goes through, then 1 in 4
    s_acquire(f, 10, attempt=1)  # a retry: refused while ramping
    s_get_state(f, 10, wire=True)  # admit_share 0.25
    s_acquire_first(f, [10, 0])
    seeds["ramp_refusals"] = f.data()
    return seeds


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    for target, seeds in (("classify_fuzz", classify_seeds()),
                          ("service_fuzz", service_seeds())):
        os.makedirs(os.path.join(corpus, target), exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(corpus, target, name), "wb") as out:
                out.write(data)
            print("%s/%s: %d bytes" % (target, name, len(data)))
    # Reproducers of known findings go beside the corpus, in crashes/.
    crashes = os.path.join(os.path.dirname(os.path.abspath(corpus)), "crashes")
    for target, seeds in (("classify_fuzz", classify_known_finding_seeds()),):
        os.makedirs(os.path.join(crashes, target), exist_ok=True)
        for name, data in seeds.items():
            path = os.path.join(crashes, target, "crash-" + name.replace("_", "-"))
            with open(path, "wb") as out:
                out.write(data)
            print("%s: %d bytes" % (os.path.relpath(path), len(data)))


if __name__ == "__main__":
    main()
