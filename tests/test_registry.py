"""The one registry type (mbrl/registry.py) and the three registries built on it: models,
agents, envs."""

from __future__ import annotations

import pytest

from mbrl.agents import AGENTS, agent_config
from mbrl.config import AgentConfig, ConfigError, ModelConfig
from mbrl.envs import ENVS, env_spec
from mbrl.models import MODELS, model_config, register_model
from mbrl.registry import Registry, target_class


def test_a_registry_reads_as_a_mapping_in_registration_order() -> None:
    colours: Registry[int] = Registry("colour", "a colour")
    assert colours.register("red", 1) == 1
    colours.register("blue", 2)
    colours.register("green", 3)
    assert list(colours) == ["red", "blue", "green"] and len(colours) == 3
    assert colours["blue"] == 2 and "green" in colours and "pink" not in colours
    assert dict(colours.items()) == {"red": 1, "blue": 2, "green": 3}
    assert colours.names() == ["blue", "green", "red"]
    colours.register("red", 4)  # (a plug-in imported again registers its name again)
    assert colours.lookup("red") == 4 and len(colours) == 3


def test_an_unknown_name_names_the_closest_and_lists_all() -> None:
    colours: Registry[int] = Registry("colour", "a colour")
    for i, name in enumerate(["red", "blue", "green"]):
        colours.register(name, i)
    with pytest.raises(ConfigError) as err:
        colours.lookup("gren")
    assert str(err.value) == (
        "colour='gren' is not a colour; did you mean green? allowed: blue, green, red"
    )
    with pytest.raises(ConfigError) as err:
        colours.lookup("zzzzz")  # (nothing close: no hint)
    assert str(err.value) == "colour='zzzzz' is not a colour; allowed: blue, green, red"
    with pytest.raises(KeyError):
        Registry[int]("size", "a size", KeyError).lookup("big")


@pytest.mark.parametrize("name", ["", "a b", "x=1", "a,b", "dir/name", 3])
def test_a_name_that_cannot_be_typed_as_key_equals_name_is_refused(name: object) -> None:
    with pytest.raises(ValueError, match=rf"colour name {name!r} is not allowed; use letters"):
        # (the name 3 is not a str: refused as the others are)
        Registry[int]("colour", "a colour").register(name, 1)  # type: ignore[arg-type]


def test_the_models_agents_and_envs_use_it() -> None:
    assert isinstance(MODELS, Registry) and isinstance(AGENTS, Registry)
    assert isinstance(ENVS, Registry)
    assert {"flow", "gaussian", "deterministic"} <= set(MODELS) and "sac" in AGENTS
    assert model_config("gaussian", members=3).members == 3
    assert agent_config("sac", batch_size=64).batch_size == 64
    with pytest.raises(ConfigError, match=r"model='gausian' is not a model; did you mean gaussian"):
        model_config("gausian")
    with pytest.raises(ConfigError, match=r"agent='sacc' is not an agent; did you mean sac\?"):
        agent_config("sacc")
    with pytest.raises(KeyError, match=r"env='hoper' is not an env; did you mean hopper\?"):
        env_spec("hoper")


def test_register_model_refuses_what_is_not_a_model_config() -> None:
    with pytest.raises(TypeError, match="need a ModelConfig subclass"):
        register_model("not_a_model", AgentConfig)  # type: ignore[arg-type]  # (refused)
    assert "not_a_model" not in MODELS


def test_a_target_that_cannot_be_imported_is_one_config_error() -> None:
    assert target_class("model", "mbrl.config.ModelConfig") is ModelConfig
    with pytest.raises(ConfigError, match=r"model\._target_='mbrl\.nowhere\.X' cannot be imp"):
        target_class("model", "mbrl.nowhere.X")
