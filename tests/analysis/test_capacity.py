"""Capacities the traces do not carry: ``--capacity NAME=N[,NAME=N]`` or a TOML file."""

from __future__ import annotations

import pytest

from tests.helpers import hoptrace
from tracer._errors import ConfigError
from tracer.analysis.whatif.capacity import (
    Capacities,
    load_capacity_file,
    parse_capacities,
    parse_capacity_pairs,
)


def test_pairs_give_each_name_its_capacity():
    assert parse_capacity_pairs("gateway=8, engine = 16,app=1.5") == {
        "gateway": 8.0,
        "engine": 16.0,
        "app": 1.5,
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "NAME=N[,NAME=N] or a TOML file"),
        ("gateway", "got 'gateway'"),
        ("gateway=", "got 'gateway='"),
        ("=8", "got '=8'"),
        ("gateway=eight", "must be a positive number, got 'eight'"),
        ("gateway=0", "must be a positive number, got 0.0"),
        ("gateway=-2", "must be a positive number"),
        ("gateway=nan", "must be a positive number"),
        ("gateway=inf", "must be a positive number"),
        ("gateway=8,gateway=4", "'gateway' is given twice"),
        ("my gateway=8", "is not a pool or service name"),
    ],
)
def test_bad_pairs_are_a_config_error_naming_the_option(text, says):
    with pytest.raises(ConfigError, match="--capacity") as caught:
        parse_capacity_pairs(text)
    assert says in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_toml_file_gives_the_capacity_table(tmp_path):
    path = tmp_path / "capacity.toml"
    path.write_text("[capacity]\ngateway = 8\napp = 1.5\n")
    assert load_capacity_file(path) == {"gateway": 8.0, "app": 1.5}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gateway = 8\n", "unknown keys or tables 'gateway'"),
        ("[capacity]\n", "no [capacity] table"),
        ("[capacity]\ngateway = 'eight'\n", "must be a positive number, got 'eight'"),
        ("[capacity]\ngateway = true\n", "must be a positive number, got True"),
        ("[capacity]\ngateway = 0\n", "must be a positive number, got 0"),
        ("[capacity.gateway]\nslots = 8\n", "must be a positive number, got {'slots': 8}"),
        ("[capacity]\n[other]\n", "unknown keys or tables 'other'"),
        ("[capacity\n", "not a TOML file"),
    ],
)
def test_bad_toml_files_are_a_config_error_naming_the_file(tmp_path, text, says):
    path = tmp_path / "capacity.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="capacity.toml") as caught:
        load_capacity_file(path)
    assert says in str(caught.value)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_capacity_file(tmp_path / "absent.toml")


def test_several_options_add_up_in_order(tmp_path):
    path = tmp_path / "capacity.toml"
    path.write_text("[capacity]\nengine = 16\n")
    caps = parse_capacities(["gateway=8", str(path)])
    assert caps == Capacities((("gateway", 8.0), ("engine", 16.0)))
    assert caps.get("engine") == 16.0 and caps.get("app") is None
    assert list(caps) == ["gateway", "engine"] and len(caps) == 2
    assert not parse_capacities([])


def test_a_name_given_by_two_options_is_an_error(tmp_path):
    path = tmp_path / "capacity.toml"
    path.write_text("[capacity]\ngateway = 16\n")
    with pytest.raises(ConfigError, match="'gateway' is given twice"):
        parse_capacities(["gateway=8", str(path)])


def test_whatif_rejects_a_bad_capacity_in_one_line(tmp_path):
    proc = hoptrace(
        "whatif", str(tmp_path), "--stage", "inference", "--speedup", "10",
        "--capacity", "gateway=lots",
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "the capacity of 'gateway' must be a positive number, got 'lots'" in proc.stderr


def test_whatif_accepts_capacities(tmp_path):
    import orjson

    from tests.synthetic import SEED_MS, chain_trace, to_otlp_json

    path = tmp_path / "seed.jsonl"
    t0 = 1_700_000_000_000_000_000
    lines = [
        orjson.dumps(to_otlp_json(chain_trace(f"{i:032x}", t0 + i * 5_000_000_000, SEED_MS)))
        for i in range(1, 6)
    ]
    path.write_bytes(b"\n".join(lines))
    args = ("whatif", str(path), "--stage", "inference", "--speedup", "10", "--format", "json")
    plain = hoptrace(*args)
    given = hoptrace(*args, "--capacity", "gateway=8,engine=16")
    assert given.returncode == 0, given.stderr
    assert given.stdout == plain.stdout  # read and checked; the retiming does not use them
