"""The exception tree and the JSON-RPC codes it names."""

from __future__ import annotations

from boss_agent import errors


def test_json_rpc_error_codes_are_the_standard_ones_plus_codex_overload() -> None:
    assert errors.PARSE_ERROR == -32700
    assert errors.INVALID_REQUEST == -32600
    assert errors.METHOD_NOT_FOUND == -32601
    assert errors.INVALID_PARAMS == -32602
    assert errors.INTERNAL_ERROR == -32603
    assert errors.SERVER_OVERLOADED == -32001


def test_every_error_class_descends_from_the_one_root() -> None:
    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, Exception)]
    assert len(classes) > 10
    assert all(issubclass(cls, errors.BossAgentError) for cls in classes)


def test_every_error_class_is_drawn_in_the_module_docstring() -> None:
    doc = errors.__doc__ or ""
    classes = [n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, Exception)]
    missing = [name for name in classes if name not in doc]
    assert not missing


def test_a_wire_overload_error_becomes_the_retryable_type() -> None:
    error = errors.rpc_error_from_wire({"code": -32001, "message": "Server overloaded; retry later."})
    assert isinstance(error, errors.ServerOverloaded)
    other = errors.rpc_error_from_wire({"code": -32600, "message": "Not initialized"})
    assert type(other) is errors.RpcError and other.code == -32600


def test_task_errors_carry_device_api_codes() -> None:
    assert errors.TaskRejected("x").code == "invalid_task"
    assert errors.TaskRejected("x", "workdir_not_allowed").code == "workdir_not_allowed"
    assert errors.TurnNotActive("x").code == "turn_not_active"


def test_a_task_groups_one_failure_ends_a_command_as_that_error_would() -> None:
    from boss_agent.cli.exits import failure

    group = ExceptionGroup("unhandled errors in a TaskGroup", [errors.AlreadyRunning(42)])
    assert failure(group) == failure(errors.AlreadyRunning(42))
    assert "ExceptionGroup" not in failure(group)[0]
