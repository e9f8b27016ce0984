"""``python -m streammkl.daemon``: the ``streammkl`` command (:mod:`.commands.cli`)."""

from __future__ import annotations

import sys

from streammkl.daemon.commands.cli import main

sys.exit(main())
