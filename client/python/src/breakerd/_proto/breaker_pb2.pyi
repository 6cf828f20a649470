from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
EFFECT_COUNTED_FAILURE: Effect
EFFECT_COUNTED_SUCCESS: Effect
EFFECT_DUPLICATE: Effect
EFFECT_LATE: Effect
EFFECT_NEUTRAL: Effect
EFFECT_UNSPECIFIED: Effect
OUTCOME_AUTH_ERROR: Outcome
OUTCOME_BAD_REQUEST: Outcome
OUTCOME_CANCELLED: Outcome
OUTCOME_CONNECTION_ERROR: Outcome
OUTCOME_RATE_LIMITED: Outcome
OUTCOME_SERVER_ERROR: Outcome
OUTCOME_SOFT_FAILURE: Outcome
OUTCOME_SUCCESS: Outcome
OUTCOME_TIMEOUT: Outcome
OUTCOME_UNSPECIFIED: Outcome
REJECT_REASON_FORCED_OPEN: RejectReason
REJECT_REASON_OPEN: RejectReason
REJECT_REASON_PROBE_IN_FLIGHT: RejectReason
REJECT_REASON_RAMP: RejectReason
REJECT_REASON_RETRY_BUDGET: RejectReason
REJECT_REASON_UNSPECIFIED: RejectReason
STATE_CLOSED: State
STATE_FORCED_CLOSED: State
STATE_FORCED_OPEN: State
STATE_HALF_OPEN: State
STATE_OPEN: State
STATE_UNSPECIFIED: State

class AcquireFirstRequest(_message.Message):
    __slots__ = ["attempt", "chain", "dependencies", "first_tier"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    FIRST_TIER_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    chain: str
    dependencies: _containers.RepeatedScalarFieldContainer[str]
    first_tier: int
    def __init__(self, dependencies: _Optional[_Iterable[str]] = ..., attempt: _Optional[int] = ..., chain: _Optional[str] = ..., first_tier: _Optional[int] = ...) -> None: ...

class AcquireFirstResponse(_message.Message):
    __slots__ = ["allowed", "dependency", "permit", "probe", "reason", "retry_after", "state"]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    PERMIT_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    dependency: str
    permit: int
    probe: bool
    reason: RejectReason
    retry_after: _duration_pb2.Duration
    state: State
    def __init__(self, dependency: _Optional[str] = ..., allowed: bool = ..., permit: _Optional[int] = ..., probe: bool = ..., state: _Optional[_Union[State, str]] = ..., reason: _Optional[_Union[RejectReason, str]] = ..., retry_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AcquireRequest(_message.Message):
    __slots__ = ["attempt", "dependency"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    dependency: str
    def __init__(self, dependency: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ["allowed", "permit", "probe", "reason", "retry_after", "state"]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    PERMIT_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    permit: int
    probe: bool
    reason: RejectReason
    retry_after: _duration_pb2.Duration
    state: State
    def __init__(self, allowed: bool = ..., permit: _Optional[int] = ..., probe: bool = ..., state: _Optional[_Union[State, str]] = ..., reason: _Optional[_Union[RejectReason, str]] = ..., retry_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AdminResponse(_message.Message):
    __slots__ = ["status"]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: BreakerStatus
    def __init__(self, status: _Optional[_Union[BreakerStatus, _Mapping]] = ...) -> None: ...

class BreakerStatus(_message.Message):
    __slots__ = ["admit_share", "consecutive_failures", "dependency", "escalation_level", "failure_rate", "fleet_window_calls", "fleet_window_failures", "generation", "inflight", "mode", "policy", "probe_in_flight", "retry_after", "state", "window_calls", "window_failures", "window_slow_calls"]
    ADMIT_SHARE_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    ESCALATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    FAILURE_RATE_FIELD_NUMBER: _ClassVar[int]
    FLEET_WINDOW_CALLS_FIELD_NUMBER: _ClassVar[int]
    FLEET_WINDOW_FAILURES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PROBE_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_CALLS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FAILURES_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SLOW_CALLS_FIELD_NUMBER: _ClassVar[int]
    admit_share: float
    consecutive_failures: int
    dependency: str
    escalation_level: int
    failure_rate: float
    fleet_window_calls: int
    fleet_window_failures: int
    generation: int
    inflight: int
    mode: str
    policy: str
    probe_in_flight: bool
    retry_after: _duration_pb2.Duration
    state: State
    window_calls: int
    window_failures: int
    window_slow_calls: int
    def __init__(self, dependency: _Optional[str] = ..., state: _Optional[_Union[State, str]] = ..., generation: _Optional[int] = ..., retry_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., window_calls: _Optional[int] = ..., window_failures: _Optional[int] = ..., window_slow_calls: _Optional[int] = ..., failure_rate: _Optional[float] = ..., consecutive_failures: _Optional[int] = ..., escalation_level: _Optional[int] = ..., policy: _Optional[str] = ..., mode: _Optional[str] = ..., probe_in_flight: bool = ..., admit_share: _Optional[float] = ..., inflight: _Optional[int] = ..., fleet_window_calls: _Optional[int] = ..., fleet_window_failures: _Optional[int] = ...) -> None: ...

class ChainDecision(_message.Message):
    __slots__ = ["chain", "count", "none", "tier"]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    NONE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    chain: str
    count: int
    none: bool
    tier: int
    def __init__(self, chain: _Optional[str] = ..., none: bool = ..., tier: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class ClientDecisions(_message.Message):
    __slots__ = ["dependency", "fail_closed", "fail_open", "refused_local"]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    FAIL_CLOSED_FIELD_NUMBER: _ClassVar[int]
    FAIL_OPEN_FIELD_NUMBER: _ClassVar[int]
    REFUSED_LOCAL_FIELD_NUMBER: _ClassVar[int]
    dependency: str
    fail_closed: int
    fail_open: int
    refused_local: int
    def __init__(self, dependency: _Optional[str] = ..., refused_local: _Optional[int] = ..., fail_open: _Optional[int] = ..., fail_closed: _Optional[int] = ...) -> None: ...

class DependencyBatch(_message.Message):
    __slots__ = ["dependency", "generation", "grants", "outcomes"]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    dependency: str
    generation: int
    grants: int
    outcomes: _containers.RepeatedCompositeFieldContainer[LocalOutcome]
    def __init__(self, dependency: _Optional[str] = ..., generation: _Optional[int] = ..., grants: _Optional[int] = ..., outcomes: _Optional[_Iterable[_Union[LocalOutcome, _Mapping]]] = ...) -> None: ...

class ForceCloseRequest(_message.Message):
    __slots__ = ["dependency"]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    dependency: str
    def __init__(self, dependency: _Optional[str] = ...) -> None: ...

class ForceOpenRequest(_message.Message):
    __slots__ = ["dependency"]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    dependency: str
    def __init__(self, dependency: _Optional[str] = ...) -> None: ...

class GetStateRequest(_message.Message):
    __slots__ = ["dependency"]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    dependency: str
    def __init__(self, dependency: _Optional[str] = ...) -> None: ...

class ListStatesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListStatesResponse(_message.Message):
    __slots__ = ["breakers"]
    BREAKERS_FIELD_NUMBER: _ClassVar[int]
    breakers: _containers.RepeatedCompositeFieldContainer[BreakerStatus]
    def __init__(self, breakers: _Optional[_Iterable[_Union[BreakerStatus, _Mapping]]] = ...) -> None: ...

class LocalOutcome(_message.Message):
    __slots__ = ["chain", "grpc_code", "http_status", "latency", "outcome", "retry_after", "tier"]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    GRPC_CODE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    chain: str
    grpc_code: int
    http_status: int
    latency: _duration_pb2.Duration
    outcome: Outcome
    retry_after: _duration_pb2.Duration
    tier: int
    def __init__(self, outcome: _Optional[_Union[Outcome, str]] = ..., http_status: _Optional[int] = ..., grpc_code: _Optional[int] = ..., latency: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., retry_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., chain: _Optional[str] = ..., tier: _Optional[int] = ...) -> None: ...

class ReportBatchRequest(_message.Message):
    __slots__ = ["chains", "client_id", "decisions", "dependencies", "sequence"]
    CHAINS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    chains: _containers.RepeatedCompositeFieldContainer[ChainDecision]
    client_id: str
    decisions: _containers.RepeatedCompositeFieldContainer[ClientDecisions]
    dependencies: _containers.RepeatedCompositeFieldContainer[DependencyBatch]
    sequence: int
    def __init__(self, client_id: _Optional[str] = ..., sequence: _Optional[int] = ..., dependencies: _Optional[_Iterable[_Union[DependencyBatch, _Mapping]]] = ..., chains: _Optional[_Iterable[_Union[ChainDecision, _Mapping]]] = ..., decisions: _Optional[_Iterable[_Union[ClientDecisions, _Mapping]]] = ...) -> None: ...

class ReportBatchResponse(_message.Message):
    __slots__ = ["counted", "late", "refused", "repeated_batch"]
    COUNTED_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    REPEATED_BATCH_FIELD_NUMBER: _ClassVar[int]
    counted: int
    late: int
    refused: int
    repeated_batch: bool
    def __init__(self, counted: _Optional[int] = ..., late: _Optional[int] = ..., refused: _Optional[int] = ..., repeated_batch: bool = ...) -> None: ...

class ReportRequest(_message.Message):
    __slots__ = ["chain", "dependency", "grpc_code", "http_status", "latency", "outcome", "permit", "retry_after", "tier"]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    GRPC_CODE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PERMIT_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    chain: str
    dependency: str
    grpc_code: int
    http_status: int
    latency: _duration_pb2.Duration
    outcome: Outcome
    permit: int
    retry_after: _duration_pb2.Duration
    tier: int
    def __init__(self, dependency: _Optional[str] = ..., permit: _Optional[int] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., http_status: _Optional[int] = ..., grpc_code: _Optional[int] = ..., latency: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., retry_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., chain: _Optional[str] = ..., tier: _Optional[int] = ...) -> None: ...

class ReportResponse(_message.Message):
    __slots__ = ["effect", "state"]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    effect: Effect
    state: State
    def __init__(self, state: _Optional[_Union[State, str]] = ..., effect: _Optional[_Union[Effect, str]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ["dependency"]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    dependency: str
    def __init__(self, dependency: _Optional[str] = ...) -> None: ...

class StateChange(_message.Message):
    __slots__ = ["dependency", "generation", "local_decisions", "mode", "previous", "reason", "retry_after", "state"]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    LOCAL_DECISIONS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    dependency: str
    generation: int
    local_decisions: bool
    mode: str
    previous: State
    reason: str
    retry_after: _duration_pb2.Duration
    state: State
    def __init__(self, dependency: _Optional[str] = ..., state: _Optional[_Union[State, str]] = ..., previous: _Optional[_Union[State, str]] = ..., reason: _Optional[str] = ..., generation: _Optional[int] = ..., retry_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., mode: _Optional[str] = ..., local_decisions: bool = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ["dependencies"]
    DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    dependencies: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dependencies: _Optional[_Iterable[str]] = ...) -> None: ...

class State(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RejectReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Effect(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
