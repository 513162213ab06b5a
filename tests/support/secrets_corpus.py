"""Fake credentials, one of each kind memory keeps out, and look-alikes that must stay.

Every value is made up, and each is put together from pieces so that no scanner mistakes this
file for a leak. `CREDENTIALS` maps a kind (as ocat names it) to a sentence holding one such
secret and the secret itself; `PROSE` holds what only `memory.secrets: strict` takes out;
`LOOK_ALIKES` must come through redaction unchanged.
"""

from __future__ import annotations

import base64
import json

_R = "Xq7Lp2Vd9Rt4Kw8Zb3Nm6Hc1Jy5Gf0Sa"  # 32 random-looking letters and digits


def _jwt() -> str:
    part = lambda data: base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")  # noqa: E731
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': '1234567890', 'name': 'Ann'})}.{_R[:22]}Ab4_9x"


_PEM = "\n".join(["-----BEGIN " + "RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA" + _R + _R, _R + "Q==",
                  "-----END " + "RSA PRIVATE KEY-----"])

# kind -> (the secret, a sentence around it). The sentence's other words must survive.
CREDENTIALS: dict[str, tuple[str, str]] = {
    "OpenAI key": (s := "sk-" + "proj-" + _R + "T3Blbk" + "FJ" + _R[:20], f"my key is {s} and it fails"),
    "Anthropic key": (s := "sk-" + "ant-api03-" + _R + _R[:12], f"ANTHROPIC key {s} rejected"),
    "AWS key": (s := "AK" + "IA" + "Q3EGUO7ZXN5K2W4P", f"aws access id {s} in the profile"),
    "GitHub token": (s := "gh" + "p_" + _R + "AbCd", f"cloned with {s} yesterday"),
    "GitLab token": (s := "gl" + "pat-" + _R[:20], f"the runner uses {s} now"),
    "Slack token": (s := "xo" + "xb-" + "123456789012-1234567890123-" + _R[:24].lower(), f"bot token {s} here"),
    "Stripe key": (s := "sk" + "_live_" + _R[:24], f"charge with {s} please"),
    "Google key": (s := "AI" + "za" + "Sy" + _R[:30] + "Ab1", f"maps key {s} on the page"),
    "Hugging Face token": (s := "hf" + "_" + _R + "Qz", f"login with {s} works"),
    "JSON web token": (s := _jwt(), f"the cookie holds {s} for a day"),
    "bearer token": (s := "9f8e7d6c5b4a." + _R, f"curl -H 'Authorization: Bearer {s}' https://api.example.com"),
    "private key": (_PEM, f"my server key:\n{_PEM}\nwhy does ssh refuse it?"),
    "password in a URL": (s := "Tr0ub4dor-and3", f"DATABASE_URL is postgres://admin:{s}@db.example.com:5432/app"),
    "password": (s := "hunter2-Horse", f"in .env I have DB_PASSWORD={s} and it still fails"),
    "secret": (s := "v3ry-s3cret-value", f'client_secret: "{s}" in the yaml'),
    "key": (s := "a8F3k9Lq2Zx7Vb1Nm4Pw6Rt0", f"set SERVICE_API_KEY={s} in the shell"),
    "token": (s := "Q2x9Vb7Nm3Kp8Lw1Zr5Tt4Yh", f"export DEPLOY_TOKEN={s} before pushing"),
}

# What `strict` takes out and `redact` keeps: passwords and codes said in prose.
PROSE: dict[str, tuple[str, str]] = {
    "password": ("Blue-Heron-77", "The new wifi password is Blue-Heron-77, tell the guests."),
    "code": ("4512", "The door code is 4512 since Monday."),
}

# Text that looks like a secret and is not one: it must stay as it is.
LOOK_ALIKES: tuple[str, ...] = (
    "Fixed in commit 3f9a2c1e5b7d9f0a1c3e5b7d9f0a1c3e5b7d9f0a, see the log.",
    "The request id was 550e8400-e29b-41d4-a716-446655440000 in the trace.",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "![logo](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" + _R + "AYAAAAAElFTkSuQmCC)",
    "Use the colours #1e1e2e, #cdd6f4 and #f38ba8 for the theme.",
    "api_key = os.environ['OPENAI_API_KEY']",
    "client = OpenAI(api_key=api_key)",
    'API_KEY = "YOUR_API_KEY"',
    "password = getpass.getpass()",
    "Set OPENAI_API_KEY in your shell, then run it again.",
    "The bearer token goes in the Authorization header.",
    "primary_key = 7f3c9a1b2d4e6f80a1b2c3d4",
    "max_tokens: 4096",
    "The code is messy and the password policy is strict.",
    "What is a good password manager?",
    "Run pip install scikit-learn and sk-learn style names are fine.",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ann@laptop",
    "Version 2024.11.27-rc1 shipped; build 20241127T101500Z passed.",
)
