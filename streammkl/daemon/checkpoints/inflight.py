"""The in-flight marker: what the process was doing when it died, so a restart never loops.

Limits (:mod:`streammkl.wire`, :mod:`streammkl.daemon.learning.admission`) stop the poison records
we can foresee. This is the net under them: if a record kills the process anyway (out of memory, an
abort in a native library, a hang ended by the supervisor's SIGKILL), the restart must not feed it
to the learner again and die again, forever.

A small private file ``inflight`` beside the checkpoints holds two things, written with one
``pwrite`` each (no fsync: they must survive the death of the *process*, which the page cache
does; after the death of the machine they are merely lost, which costs one more crash at most):

- the **record slot** (a fixed binary slot with a CRC), written before a *risky* round -- one
  record that makes the model grow (new features or classes) or any record of a *careful*
  replay -- and cleared after it: ``(topic, partition, offset, strikes)``;
- the **journal** (JSON with a CRC): whether the process ended cleanly, how far it got (the
  highest offset per partition that entered processing: its *span*), the records condemned by
  earlier crashes and not yet behind a checkpoint, and the suspects.

With ``checkpoint.hmac_key_file`` (the checkpoints' key), both are signed too (HMAC-SHA256 with
that key, one domain per part): whoever can write the checkpoint directory but not read the key
cannot plant a model, and cannot condemn chosen records either. A busy slot or a journal without
a valid signature is ignored (as an unreadable one is), with a warning, and reported in
:attr:`InflightMarker.rejected` (the daemon counts it). Without a key the CRC alone is checked,
and a signed file still reads.

On start (:meth:`InflightMarker.recover`), an unclean end means:

- a record in the slot died in flight once more: with ``strikes`` deaths it is *condemned*
  (dead-lettered with reason ``crashed_worker`` whenever it is replayed, until a checkpoint
  is past it), else it becomes a *suspect* that is processed alone, marked, with its count;
- no record in the slot (the process died elsewhere: in a compiled run, or killed from
  outside): the records up to the dead process's span are replayed *carefully*, one at a
  time and each marked, so that if one of them kills the process again the slot names it.

A single ``kill -9`` therefore changes nothing (with the default ``strikes = 2`` the suspect
is simply learned again), and a record that kills the process is dead-lettered after
``strikes`` deaths in a marked round (at most ``strikes + 1`` deaths if the first was outside
one): no crash loop.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from streammkl.files import open_private, private_dir

log = logging.getLogger(__name__)

FILENAME = "inflight"
Key = tuple[str, int, int]  # (topic, partition, offset)

_MAGIC = b"SMIF"
_SLOT = struct.Struct("<4sBxHiqH250s")  # magic, busy, strikes, partition, offset, len, topic
_TAG = hashlib.sha256().digest_size  # an HMAC-SHA256 signature
_SLOT_SIZE = _SLOT.size + 4 + _TAG  # + crc32 + signature (zeros when unsigned)
# the journal's offset in the file: [u32 length][u32 crc]([signature] if signed)[json]
_JOURNAL_AT = 4096
_HEADER = struct.Struct("<II")
_SIGNED = 1 << 31  # set in the journal's length field when a signature follows the header
_IDLE = _SLOT.pack(_MAGIC, 0, 0, 0, 0, 0, b"")
_IDLE += struct.pack("<I", zlib.crc32(_IDLE)) + bytes(_TAG)
#: What each signature covers, besides the bytes it signs (a slot's cannot pass for a journal's).
_DOMAINS = {"slot": b"streammkl-inflight-slot\0", "journal": b"streammkl-inflight-journal\0"}
#: Why a part of the marker was ignored (with a key): ``unsigned`` (no signature: written
#: without the key) or ``forged`` (a signature that does not match).
REJECT_REASONS = ("unsigned", "forged")


def _partitions(data: Mapping[str, Mapping[str, int]] | None) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in (data or {}).items() for p, o in parts.items()}


def _tree(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = off
    return out


@dataclass
class Recovery:
    """What the previous process left for this one (see the module docstring).

    Parameters
    ----------
    clean
        The previous process ended cleanly (or there was none).
    condemned
        Records to dead-letter (``crashed_worker``) whenever they are replayed: key -> deaths.
    suspects
        Records that died in flight fewer than ``strikes`` times: key -> deaths so far.
    careful
        Per partition, the offset up to which records are replayed one by one, marked.
    """

    clean: bool = True
    condemned: dict[Key, int] = field(default_factory=dict)
    suspects: dict[Key, int] = field(default_factory=dict)
    careful: dict[tuple[str, int], int] = field(default_factory=dict)


class InflightMarker:
    """The marker file of one daemon (in its checkpoint directory).

    Parameters
    ----------
    directory
        The checkpoint directory.
    strikes
        Deaths in a marked round after which a record is condemned (>= 1).
    key
        The checkpoints' HMAC key (``checkpoint.hmac_key_file``): the slot and the journal are
        signed with it, and only signed ones are believed. ``None``: CRC only.
    """

    def __init__(
        self, directory: str | os.PathLike[str], strikes: int = 2, key: bytes | None = None
    ) -> None:
        if strikes < 1:
            raise ValueError(f"strikes must be >= 1, got {strikes}")
        self.path = Path(directory) / FILENAME
        self.strikes = strikes
        self.state = Recovery()
        self.span: dict[tuple[str, int], int] = {}
        #: The parts of the marker :meth:`recover` ignored for want of a valid signature (with a
        #: key): ``(part, reason)``, part ``slot`` or ``journal``, reason in
        #: :data:`REJECT_REASONS`.
        self.rejected: list[tuple[str, str]] = []
        self._macs = (
            None
            if key is None
            else {part: hmac.new(key, domain, hashlib.sha256) for part, domain in _DOMAINS.items()}
        )
        self._fd: int | None = None
        self._busy = False

    # -- start and end ------------------------------------------------------------------------

    def recover(self) -> Recovery:
        """Read what the previous process left, decide, and start this process's journal."""
        private_dir(self.path.parent)
        self._fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        slot, journal = self._read()
        state = Recovery(
            clean=bool(journal.get("clean", True)),
            condemned={tuple(k): int(n) for *k, n in journal.get("condemned", [])},
            suspects={tuple(k): int(n) for *k, n in journal.get("suspects", [])},
            careful=_partitions(journal.get("careful")),
        )
        if not state.clean:
            if slot is not None:
                key, before = slot
                deaths = before + 1
                state.suspects.pop(key, None)
                if deaths >= self.strikes:
                    state.condemned[key] = deaths
                    log.error(
                        "the previous process died while processing %s/%d@%d (%d time(s)): "
                        "it goes to the dead-letter topic (crashed_worker) instead",
                        *key, deaths,
                    )  # fmt: skip
                else:
                    state.suspects[key] = deaths
                    log.warning(
                        "the previous process died while processing %s/%d@%d: it is learned "
                        "again, alone and marked (dead-lettered if it kills the process %d "
                        "more time(s))",
                        *key, self.strikes - deaths,
                    )  # fmt: skip
            else:
                for tp, off in _partitions(journal.get("span")).items():
                    state.careful[tp] = max(off, state.careful.get(tp, -1))
                if state.careful:
                    log.warning(
                        "the previous process died outside a marked round: the records it had "
                        "in hand are replayed one by one, marked (%s)",
                        ", ".join(f"{t}/{p} up to {o}" for (t, p), o in state.careful.items()),
                    )
        self.state = state
        self.span = {}
        self._write(_IDLE, 0)
        self._save_journal(clean=False)
        return state

    def close(self, clean: bool = True) -> None:
        """End of the process: the journal says whether it ended cleanly."""
        if self._fd is None:
            return
        self._save_journal(clean=clean)
        os.close(self._fd)
        self._fd = None

    # -- what the previous crash asks of this process ----------------------------------------

    @property
    def watching(self) -> bool:
        """Whether any record needs a look of its own (condemned, suspect or careful)."""
        s = self.state
        return bool(s.condemned or s.suspects or s.careful)

    def condemned(self, topic: str, partition: int, offset: int) -> int:
        """How many deaths condemned this record (0: it is not condemned)."""
        return self.state.condemned.get((topic, partition, offset), 0)

    def alone(self, topic: str, partition: int, offset: int) -> bool:
        """Whether this record is processed alone and marked: a suspect, or within the span of
        a process that died outside a marked round."""
        s = self.state
        if (topic, partition, offset) in s.suspects:
            return True
        return offset <= s.careful.get((topic, partition), -1)

    # -- the record slot (hot path of risky rounds) ------------------------------------------

    def begin(self, topic: str, partition: int, offset: int) -> None:
        """Mark one record as in flight (before its risky round)."""
        if self._fd is None:
            return
        strikes = self.state.suspects.get((topic, partition, offset), 0)
        name = topic.encode()[:250]
        body = _SLOT.pack(_MAGIC, 1, strikes, partition, offset, len(name), name)
        body += struct.pack("<I", zlib.crc32(body))
        os.pwrite(self._fd, body + self._sign("slot", body), 0)
        self._busy = True

    def end(self) -> None:
        """The marked record's round is over."""
        if self._busy and self._fd is not None:
            os.pwrite(self._fd, _IDLE, 0)
            self._busy = False

    # -- the journal --------------------------------------------------------------------------

    def entered(self, high: dict[tuple[str, int], int]) -> None:
        """Records up to these offsets (per partition) entered processing (once per batch)."""
        changed = False
        for tp, off in high.items():
            if off > self.span.get(tp, -1):
                self.span[tp] = off
                changed = True
        if changed:
            self._save_journal(clean=False)

    def covered(self, offsets: dict[tuple[str, int], int]) -> None:
        """A checkpoint now holds these next offsets: forget what is behind them."""
        s = self.state
        before = (len(s.condemned), len(s.suspects), len(s.careful))

        def behind(key: Key) -> bool:
            return key[2] < offsets.get((key[0], key[1]), -1)

        s.condemned = {k: n for k, n in s.condemned.items() if not behind(k)}
        s.suspects = {k: n for k, n in s.suspects.items() if not behind(k)}
        s.careful = {tp: o for tp, o in s.careful.items() if o >= offsets.get(tp, -1)}
        if (len(s.condemned), len(s.suspects), len(s.careful)) != before:
            self._save_journal(clean=False)

    def _save_journal(self, clean: bool) -> None:
        if self._fd is None:
            return
        s = self.state
        # orjson: the same bytes as json.dumps(..., separators=(",", ":")) for ASCII topics
        # (UTF-8 instead of \u escapes otherwise; both read back by json.loads), ~0.7 us
        # against ~8.8 us (timeit, this dict with three partitions): written at every batch
        data = orjson.dumps(
            {
                "pid": os.getpid(),
                "clean": clean,
                "span": _tree(self.span),
                "careful": _tree(s.careful),
                "condemned": [[*k, n] for k, n in sorted(s.condemned.items())],
                "suspects": [[*k, n] for k, n in sorted(s.suspects.items())],
            }
        )
        if self._macs is None:
            self._write(_HEADER.pack(len(data), zlib.crc32(data)) + data, _JOURNAL_AT)
        else:
            head = _HEADER.pack(len(data) | _SIGNED, zlib.crc32(data))
            self._write(head + self._sign("journal", data) + data, _JOURNAL_AT)

    # -- signatures ---------------------------------------------------------------------------

    def _sign(self, part: str, data: bytes) -> bytes:
        """The signature of one part's bytes (empty without a key)."""
        if self._macs is None:
            return b""
        mac = self._macs[part].copy()
        mac.update(data)
        return mac.digest()

    def _believed(self, part: str, data: bytes, tag: bytes) -> bool:
        """Whether a part read back may be believed: always without a key; with one, only with
        its valid signature (else it is recorded in :attr:`rejected`, with a warning)."""
        if self._macs is None:
            return True
        if hmac.compare_digest(tag, self._sign(part, data)):
            return True
        why = "unsigned" if not tag.strip(b"\0") else "forged"
        self.rejected.append((part, why))
        log.warning(
            "%s: the in-flight %s is not signed with checkpoint.hmac_key_file's key (%s: "
            "written without the key, or by someone without it); ignored",
            self.path, part, "no signature" if why == "unsigned" else "a wrong signature",
        )  # fmt: skip
        return False

    # -- file access --------------------------------------------------------------------------

    def _write(self, data: bytes, at: int) -> None:
        assert self._fd is not None
        os.pwrite(self._fd, data, at)

    def _read(self) -> tuple[tuple[Key, int] | None, dict[str, Any]]:
        """(the record in the slot with its strikes, or None; the journal, {} if unreadable or
        not believed)."""
        assert self._fd is not None
        self.rejected = []
        raw = os.pread(self._fd, _SLOT_SIZE, 0)
        slot = None
        end = _SLOT.size + 4
        if len(raw) >= end:
            body, (crc,) = raw[: end - 4], struct.unpack("<I", raw[end - 4 : end])
            if zlib.crc32(body) == crc:
                magic, busy, strikes, part, off, n, name = _SLOT.unpack(body)
                if magic == _MAGIC and busy and self._believed("slot", raw[:end], raw[end:]):
                    slot = ((name[:n].decode(errors="replace"), part, off), strikes)
        head = os.pread(self._fd, _HEADER.size, _JOURNAL_AT)
        journal: dict[str, Any] = {}
        if len(head) == _HEADER.size:
            size, crc = _HEADER.unpack(head)
            at = _JOURNAL_AT + _HEADER.size
            tag = os.pread(self._fd, _TAG, at) if size & _SIGNED else b""
            size &= ~_SIGNED
            data = os.pread(self._fd, size, at + len(tag)) if size < 1 << 24 else b""
            if (
                len(data) == size
                and zlib.crc32(data) == crc
                and self._believed("journal", data, tag)
            ):
                try:
                    journal = json.loads(data)
                except ValueError:
                    journal = {}
        if not journal and (slot is not None or head.strip(b"\0")):
            if not any(part == "journal" for part, _ in self.rejected):
                log.warning("%s: unreadable journal; treating the last end as unclean", self.path)
            journal = {"clean": False}
        return slot, journal
