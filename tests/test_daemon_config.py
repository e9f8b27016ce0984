"""Settings: file < environment < flags; frozen; every error names the field and its source."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from streammkl import wire
from streammkl.daemon.config import ConfigError, Settings, load_settings
from streammkl.daemon.learning.building import LearnerConfigError, build_component, build_learner

TOML = """
[kafka]
bootstrap_servers = "file:1"
topics = ["a", "b"]
group_id = "from-file"
session_timeout_ms = 6000

[checkpoint]
dir = "/tmp/ck"
every_records = 77

[learner]
task = "classification"
kernels = [{type = "Linear"}, {type = "RBF", gamma = 0.5}]
regularizer = {type = "SquaredGroupLasso", lam = 0.001}
schedule = {type = "InvSqrt", eta0 = 2.0}
budget = 300
budget_policy = "project"
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "streammkl.toml"
    path.write_text(TOML)
    return path


def test_defaults_are_valid_and_frozen() -> None:
    s = load_settings(env={})
    assert s.kafka.topics == ("streammkl.examples",)
    assert s.kafka.session_timeout_ms >= 6000  # real Kafka's minimum by default
    with pytest.raises(ValidationError):
        s.kafka.group_id = "x"  # type: ignore[misc]


def test_precedence_file_then_env_then_flags(config_file: Path) -> None:
    env = {
        "STREAMMKL_KAFKA__GROUP_ID": "from-env",
        "STREAMMKL_KAFKA__BOOTSTRAP_SERVERS": "env:2",
        "STREAMMKL_LEARNER__BUDGET": "500",
        "STREAMMKL_RECORDS__CLASSES": '["cat", "dog"]',
        "UNRELATED": "ignored",
    }
    s = load_settings(config_file, env=env, overrides={"kafka.group_id": "from-flag", "x": None})
    assert s.kafka.group_id == "from-flag"  # flag beats env beats file
    assert s.kafka.bootstrap_servers == "env:2"  # env beats file
    assert s.kafka.topics == ("a", "b")  # file beats default
    assert s.kafka.session_timeout_ms == 6000
    assert s.checkpoint.every_records == 77 and str(s.checkpoint.dir) == "/tmp/ck"
    assert s.learner.budget == 500
    assert s.learner.kernels == ({"type": "Linear"}, {"type": "RBF", "gamma": 0.5})
    assert s.records.classes == ("cat", "dog")


def test_config_file_from_environment_and_comma_lists(config_file: Path) -> None:
    s = load_settings(
        env={"STREAMMKL_CONFIG": str(config_file), "STREAMMKL_KAFKA__TOPICS": "x, y,z"}
    )
    assert s.kafka.topics == ("x", "y", "z")
    assert s.kafka.group_id == "from-file"


@pytest.mark.parametrize(
    ("env", "overrides", "needles"),
    [
        ({"STREAMMKL_KAFKA__SESSION_TIMEOUT_MS": "abc"}, {}, [
            "kafka.session_timeout_ms = 'abc'", "environment STREAMMKL_KAFKA__SESSION_TIMEOUT_MS"
        ]),
        ({}, {"checkpoint.keep": 0}, [
            "checkpoint.keep = 0", "greater than or equal to 1", "command line"
        ]),
        ({"STREAMMKL_KAFKA__GROUPID": "x"}, {}, ["kafka.groupid", "Extra inputs"]),
        ({}, {"kafka.heartbeat_interval_ms": 9000, "kafka.session_timeout_ms": 6000}, [
            "heartbeat_interval_ms (9000) must be below session_timeout_ms (6000)"
        ]),
        ({}, {"learner.task": "ranking"}, ["learner.task = 'ranking'"]),
        ({}, {"kafka.topics": ""}, ["kafka.topics", "at least one input topic"]),
    ],
)  # fmt: skip
def test_errors_name_the_field_and_source(
    env: dict[str, str], overrides: dict[str, object], needles: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env=env, overrides=overrides)
    for needle in needles:
        assert needle in str(info.value)


GROUP = {"mixing.enabled": True, "records.classes": [0, 1]}


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        ({"learner.kernels": []}, ["learner.kernels", "at least one kernel is required"]),
        ({"kafka.topics": "in,dl", "kafka.dead_letter_topic": "dl"},
         ["kafka.dead_letter_topic = 'dl' is also an input topic", "feedback loop"]),
        ({"kafka.topics": "in", "kafka.predictions_topic": "in"},
         ["kafka.predictions_topic = 'in' is also an input topic"]),
        ({**GROUP, "kafka.topics": "in", "mixing.topic": "in"},
         ["mixing.topic = 'in' is also an input topic"]),
        ({**GROUP, "mixing.topic": "streammkl.dead-letters"},
         ["mixing.topic = 'streammkl.dead-letters' is also kafka.dead_letter_topic"]),
        ({**GROUP, "mixing.topic": "p", "kafka.predictions_topic": "p"},
         ["mixing.topic = 'p' is also kafka.predictions_topic"]),
        ({**GROUP, "kafka.assignment": "all"}, ["mixing.enabled needs kafka.assignment"]),
        ({"mixing.enabled": True}, ["mixing.enabled needs records.classes"]),
        ({**GROUP, "learner.task": "regression"},
         ["mixing.enabled", "learner.task = 'regression'"]),
    ],
)  # fmt: skip
def test_settings_the_daemon_cannot_run_with_are_refused_naming_the_field(
    overrides: dict[str, object], needles: list[str]
) -> None:
    """An empty bank, an output topic that is an input topic (the daemon would read what it
    writes), a mix topic shared with another topic, and what a group needs."""
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, overrides=overrides)
    for needle in needles:
        assert needle in str(info.value)


def test_output_topics_distinct_from_the_inputs_are_accepted() -> None:
    no_predictions = {"kafka.topics": "a,b", "kafka.predictions_topic": ""}
    settings = load_settings(
        env={}, overrides={**GROUP, **no_predictions, "mixing.topic": "streammkl.predictions"}
    )
    assert settings.kafka.predictions_topic is None  # none written: the mix topic may take it
    # the mix topic only matters in a group
    alone = load_settings(env={}, overrides={"kafka.topics": "in", "mixing.topic": "in"})
    assert not alone.mixing.enabled


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[learner]\nkernels = []\n", "learner.kernels = []: Value error, at least one kernel"),
        ('[kafka]\ntopics = ["in"]\ndead_letter_topic = "in"\n',
         "kafka.dead_letter_topic = 'in' is also an input topic"),
        ('[kafka]\ntopics = ["in"]\npredictions_topic = "in"\n',
         "kafka.predictions_topic = 'in' is also an input topic"),
        ('[kafka]\nassignment = "all"\n[records]\nclasses = [0, 1]\n[mixing]\nenabled = true\n',
         "mixing.enabled needs kafka.assignment = 'group'"),
        ("[mixing]\nenabled = true\n", "mixing.enabled needs records.classes"),
    ],
    ids=["empty-bank", "dead-letters-in", "predictions-in", "group-assign-all", "group-no-classes"],
)  # fmt: skip
def test_the_daemon_refuses_such_settings_at_start_with_exit_2(
    tmp_path: Path, toml: str, needle: str
) -> None:
    """The real process: exit 2 and one message naming the field, no traceback (it never
    reaches the broker: nothing listens at the address)."""
    import subprocess
    import sys

    from tests.daemon_kafka import subprocess_env

    config = tmp_path / "streammkl.toml"
    config.write_text(toml)
    argv = [sys.executable, "-m", "streammkl.daemon", "run", "--config", str(config),
            "--bootstrap-servers", "127.0.0.1:9", "--checkpoint-dir", str(tmp_path / "ck"),
            "--metrics-port", "0"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, env=subprocess_env(), timeout=120, text=True)
    assert out.returncode == 2, out.stderr[-2000:]
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_bad_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[kafka\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(bad, env={})
    typo = tmp_path / "typo.toml"
    typo.write_text('[kafak]\nbootstrap_servers = "x"\n')
    with pytest.raises(ConfigError, match=r"kafak.*Extra inputs.*from file"):
        load_settings(typo, env={})
    with pytest.raises(ConfigError, match="No such file"):
        load_settings(tmp_path / "missing.toml", env={})


def test_record_settings_give_every_wire_limit_with_the_same_defaults() -> None:
    assert load_settings(env={}).records.wire_limits() == wire.Limits()
    limits = load_settings(env={"STREAMMKL_RECORDS__MAX_TOKENS": "7"}).records.wire_limits()
    assert limits.max_tokens == 7
    assert limits == wire.Limits(max_tokens=7)
    assert limits.short_record == wire.Limits(max_tokens=7).short_record


def test_learner_components_are_built_from_core_by_name() -> None:
    from streammkl.core import kernels, regularizers, schedules

    rbf = build_component("kernels", {"type": "rbf", "gamma": 0.25}, "learner.kernels[1]")
    assert isinstance(rbf, kernels.RBF)
    assert isinstance(build_component("kernels", "Linear", "k"), kernels.Linear)
    reg = build_component("regularizer", {"type": "squared_group_lasso", "lam": 0.01}, "r")
    assert isinstance(reg, regularizers.SquaredGroupLasso)
    assert isinstance(
        build_component("schedule", {"type": "InvSqrt", "eta0": 1.0}, "s"), schedules.InvSqrt
    )


@pytest.mark.parametrize(
    ("kind", "spec", "needle"),
    [
        ("kernels", {"type": "rbff"}, "learner.kernels[2].type: unknown kernels 'rbff'; known:"),
        ("kernels", {"type": "RBF", "bandwidth": 1}, "learner.kernels[2]: RBF("),
        ("kernels", 3, "expected a name or a table"),
    ],
)
def test_learner_component_errors_name_the_field(kind: str, spec: object, needle: str) -> None:
    with pytest.raises(LearnerConfigError) as info:
        build_component(kind, spec, "learner.kernels[2]")
    assert needle in str(info.value)


def test_custom_factory_and_its_errors() -> None:
    s = Settings.model_validate(
        {"learner": {"factory": "tests.daemon_fakes:make_learner", "params": {"lr": 0.5}}}
    )
    with pytest.raises(LearnerConfigError, match="--allow-learner-factory"):
        build_learner(s.learner)  # code named by the settings: refused by default
    learner = build_learner(s.learner, allow_factory=True)
    assert type(learner).__name__ == "FakeLearner" and learner.lr == 0.5
    bad = Settings.model_validate({"learner": {"factory": "tests.daemon_fakes:nope"}})
    with pytest.raises(LearnerConfigError, match=r"learner\.factory: cannot import"):
        build_learner(bad.learner, allow_factory=True)


def test_default_learner_and_a_configured_one_from_the_file(config_file: Path) -> None:
    from streammkl.core import regularizers, schedules
    from streammkl.river import MKLClassifier, MKLRegressor

    assert isinstance(build_learner(load_settings(env={}).learner), MKLClassifier)
    s = load_settings(config_file, env={}, overrides={"learner.task": "regression"})
    model = build_learner(s.learner)
    assert isinstance(model, MKLRegressor)
    assert model.budget == 300 and model.budget_policy == "project"
    with pytest.raises(ConfigError, match="budget_policy"):
        load_settings(config_file, env={}, overrides={"learner.budget_policy": "newest"})
    assert isinstance(model.regularizer, regularizers.SquaredGroupLasso)
    assert isinstance(model.schedule, schedules.InvSqrt)
    model.learn_one({"a": 1.0, "b": -1.0}, 0.5)
    assert sorted(model.kernel_weights) == ["linear", "rbf(gamma=0.5)"]


def test_the_demo_picks_the_learner_task_its_scenario_needs(tmp_path, monkeypatch):
    """digit-strings is a sequence stream: with the default task (classification) every record
    was dead-lettered as wrong_kind; the demo now sets learner.task, or says what to change."""
    import argparse

    from streammkl.daemon.commands.demo import demo_settings

    for name in [k for k in os.environ if k.startswith("STREAMMKL_")]:
        monkeypatch.delenv(name)

    def settings(scenario, config=None):
        args = argparse.Namespace(scenario=scenario, config=config)
        return demo_settings(args, "127.0.0.1:1", tmp_path / "ck", 0)

    expected = {
        "digit-strings": "sequence",
        "conllu": "parsing",
        "trump-approval": "regression",
        "phishing": "classification",
        "kernel-drift": "classification",
    }
    for scenario, task in expected.items():
        got, note = settings(scenario)
        assert got.learner.task == task, scenario
        assert (note is None) == (task == "classification"), (scenario, note)
    config = tmp_path / "c.toml"
    config.write_text('[learner]\ntask = "classification"\n')
    got, note = settings("digit-strings", str(config))
    assert got.learner.task == "classification"  # an explicit choice is kept ...
    assert note is not None and 'task = "sequence"' in note  # ... and the fix is named
    config.write_text("[learner]\nbudget = 64\n")  # other learner settings: task still follows
    got, _ = settings("digit-strings", str(config))
    assert (got.learner.task, got.learner.budget) == ("sequence", 64)


def test_the_demo_says_when_its_metrics_port_is_busy():
    import socket

    from streammkl.daemon.commands.demo import metrics_port

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        taken = busy.getsockname()[1]
        port, note = metrics_port(taken)
        assert port == 0 and note is not None and f"{taken} is busy" in note
    assert metrics_port(0) == (0, None)


def test_a_renamed_key_still_loads_with_a_warning_naming_the_new_one(tmp_path: Path) -> None:
    """``kafka.merge_idle_ms`` (the partitions' interleaving; "merge" is the mixing's word) is
    read as ``kafka.interleave_idle_ms`` from a file or the environment, with a FutureWarning
    naming the new key; giving both is an error that names them."""
    path = tmp_path / "old.toml"
    path.write_text("[kafka]\nmerge_idle_ms = 250\n")
    with pytest.warns(FutureWarning, match=r"kafka\.merge_idle_ms .* kafka\.interleave_idle_ms"):
        assert load_settings(path, env={}).kafka.interleave_idle_ms == 250
    with pytest.warns(FutureWarning, match=r"kafka\.interleave_idle_ms"):
        env = {"STREAMMKL_KAFKA__MERGE_IDLE_MS": "40"}
        assert load_settings(env=env).kafka.interleave_idle_ms == 40
    both = {"STREAMMKL_KAFKA__MERGE_IDLE_MS": "40", "STREAMMKL_KAFKA__INTERLEAVE_IDLE_MS": "5"}
    with pytest.raises(ConfigError, match=r"merge_idle_ms is the old name of kafka\.interleave"):
        load_settings(env=both)
    assert load_settings(env={}).kafka.interleave_idle_ms == 0  # the default, no warning


def test_a_mixing_member_consumes_with_the_client_its_settings_name() -> None:
    """No silent substitution: a mixing group consumes with the client ``kafka.consumer_client``
    names, as one daemon does (it used to be kafka-python whatever the settings said)."""
    from streammkl.daemon.kafka.clients import LIBRARIES, KafkaPythonConsumer, consumer_for

    for name in ("librdkafka", "kafka-python"):
        env = {
            "STREAMMKL_KAFKA__CONSUMER_CLIENT": name,
            "STREAMMKL_MIXING__ENABLED": "true",
            "STREAMMKL_RECORDS__CLASSES": "[0, 1]",
        }
        kafka = load_settings(env=env).kafka
        assert consumer_for(kafka) is LIBRARIES[name].consumer
    assert LIBRARIES["librdkafka"].consumer is not KafkaPythonConsumer


def test_every_client_the_settings_can_name_has_all_its_adapters() -> None:
    """The libraries ``kafka.consumer_client`` / ``kafka.producer_client`` accept are exactly
    those :data:`~streammkl.daemon.kafka.clients.LIBRARIES` has, each with its four adapters."""
    import typing

    from streammkl.daemon.config import KafkaSettings
    from streammkl.daemon.kafka.clients import LIBRARIES

    for field in ("consumer_client", "producer_client"):
        names = typing.get_args(KafkaSettings.model_fields[field].annotation)
        assert set(names) == set(LIBRARIES) == {"librdkafka", "kafka-python"}
    modules = {
        name: {adapter.__module__ for adapter in (
            library.consumer, library.producer, library.mix_reader, library.mix_writer)}
        for name, library in LIBRARIES.items()
    }  # fmt: skip
    assert modules == {  # each library's four adapters, all from its own module
        "librdkafka": {"streammkl.daemon.kafka.clients.confluent"},
        "kafka-python": {"streammkl.daemon.kafka.clients.kafka_python"},
    }
