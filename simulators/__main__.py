"""``python -m simulators SCENARIO [--count N] [--out F | --bootstrap-servers B --topic T]``."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
