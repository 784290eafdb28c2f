"""The app model shared by every scheduler: apps, roles, resources, states, run options.

Example:
    >>> from asyncsched.specs import AppDef, Role, named_resources
    >>> app = AppDef(
    ...     name="train",
    ...     roles=[Role("trainer", "my/image", entrypoint="python",
    ...                 resource=named_resources["gpu.small"])],
    ... )
"""

from __future__ import annotations

from asyncsched.errors import (
    AppFileError as AppFileError,
    AppStatusError as AppStatusError,
    InvalidRunConfigException as InvalidRunConfigException,
    MalformedAppHandleException as MalformedAppHandleException,
    SpecError as SpecError,
    UnknownAppException as UnknownAppException,
    UnknownSchedulerException as UnknownSchedulerException,
)

from .app import (
    ALL as ALL,
    MAX_NAME_LENGTH as MAX_NAME_LENGTH,
    MISSING as MISSING,
    NONE as NONE,
    AppDef as AppDef,
    RetryPolicy as RetryPolicy,
    Role as Role,
    Workspace as Workspace,
    validate_app as validate_app,
    validate_session_name as validate_session_name,
)
from .dryrun import AppDryRunInfo as AppDryRunInfo
from .handles import (
    AppHandle as AppHandle,
    ParsedAppHandle as ParsedAppHandle,
    make_app_handle as make_app_handle,
    parse_app_handle as parse_app_handle,
)
from .macros import macros as macros
from .mounts import (
    BindMount as BindMount,
    DeviceMount as DeviceMount,
    MountType as MountType,
    VolumeMount as VolumeMount,
    parse_mounts as parse_mounts,
)
from .reasons import (
    StatusReason as StatusReason,
    exit_code_of_signal as exit_code_of_signal,
    explain_exit_code as explain_exit_code,
    reason_of_exit_code as reason_of_exit_code,
    signal_name as signal_name,
)
from .resources import (
    NULL_RESOURCE as NULL_RESOURCE,
    GiB as GiB,
    Resource as Resource,
    get_named_resources as get_named_resources,
    named_resources as named_resources,
    resource as resource,
)
from .runopts import (
    CfgVal as CfgVal,
    get_type_name as get_type_name,
    runopt as runopt,
    runopts as runopts,
    to_dict as to_dict,
)
from .serialize import (
    app_from_dict as app_from_dict,
    app_to_dict as app_to_dict,
    load_app_file as load_app_file,
    role_from_dict as role_from_dict,
    role_to_dict as role_to_dict,
)
from .status import (
    AppState as AppState,
    AppStatus as AppStatus,
    ReplicaState as ReplicaState,
    ReplicaStatus as ReplicaStatus,
    RoleStatus as RoleStatus,
    deciding_reason as deciding_reason,
    is_started as is_started,
    is_terminal as is_terminal,
    rollup_state as rollup_state,
)

__all__ = [
    "ALL",
    "AppDef",
    "AppDryRunInfo",
    "AppFileError",
    "AppHandle",
    "AppState",
    "AppStatus",
    "AppStatusError",
    "BindMount",
    "CfgVal",
    "DeviceMount",
    "GiB",
    "InvalidRunConfigException",
    "MAX_NAME_LENGTH",
    "MISSING",
    "MalformedAppHandleException",
    "MountType",
    "NONE",
    "NULL_RESOURCE",
    "ParsedAppHandle",
    "ReplicaState",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "SpecError",
    "StatusReason",
    "UnknownAppException",
    "UnknownSchedulerException",
    "VolumeMount",
    "Workspace",
    "app_from_dict",
    "app_to_dict",
    "deciding_reason",
    "exit_code_of_signal",
    "explain_exit_code",
    "get_named_resources",
    "get_type_name",
    "is_started",
    "is_terminal",
    "load_app_file",
    "macros",
    "make_app_handle",
    "named_resources",
    "parse_app_handle",
    "parse_mounts",
    "reason_of_exit_code",
    "resource",
    "role_from_dict",
    "role_to_dict",
    "rollup_state",
    "runopt",
    "runopts",
    "signal_name",
    "to_dict",
    "validate_app",
    "validate_session_name",
]
