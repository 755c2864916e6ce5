"""Schemathesis hooks for the perpsim broker API (loaded through SCHEMATHESIS_HOOKS).

1. Every request is D2-signed with the key in $PERPSIM_KEY, just before it is sent: ed25519
   over "{nonce}\\n{METHOD}\\n{path_and_query}\\n{body}", nonces strictly increasing.
   Schemathesis's own probes of the security scheme (requests sent without or with broken
   credentials, to see that they are refused) stay unsigned or keep their broken header.
2. Positive cases carry no pagination cursor: a cursor is opaque and tamper-evident (D4), so
   a generated string is never a valid one, and `after` with `before` is a 400 by D4, a rule
   between parameters that OpenAPI cannot state. Negative cases keep them, to be refused.
"""

import os

import schemathesis
from schemathesis.core.parameters import ParameterLocation

from d2 import D2Signature

CURSORS = ("after", "before")


with open(os.environ["PERPSIM_KEY"], "rb") as key_file:
    SIGNER = D2Signature(key_file.read())


@schemathesis.auth()
class ExplicitAuth:
    """Declares the API's auth as supplied by these hooks, so schemathesis sends its own
    probes unauthenticated instead of filling the security headers with generated values."""

    def get(self, case, context):
        return SIGNER

    def set(self, case, data, context):
        pass  # the signature is added in before_call, over the final request


def _probes_signing(case) -> bool:
    """Whether the case is about the D2 headers themselves (its headers were generated to be
    invalid: missing or malformed), in which case they are sent as generated."""
    meta = case.meta
    return meta is not None and meta.is_negative_at(ParameterLocation.HEADER)


@schemathesis.hook
def before_call(context, case, kwargs):
    if not _probes_signing(case):
        kwargs["auth"] = SIGNER


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    if case.query and meta is not None and meta.generation.mode.is_positive:
        for cursor in CURSORS:
            case.query.pop(cursor, None)
    return case
