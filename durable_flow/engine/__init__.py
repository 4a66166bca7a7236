"""The superstep engine: the loop of one thread, tasks, the node context, state views, fork.

Its front door, what the runtime uses: a run's first checkpoint
(``first_checkpoint``), reading and preparing a run without a lease
(``RunReader``, ``Prepared``), going on under the lease (``RunContext``,
``continue_run``), fork, update and migration, and the lease clock.
"""

from ._fork import UpdatePlan, check_no_recorded_work, commit_update, prepare_fork
from ._lazy import plain_state
from ._loop import ThreadOutcome
from ._migrate import MigrationPlan
from ._ownership import LOCAL_EXPIRY, HandBack, LeaseClock
from ._run import RunContext
from ._runs import Prepared, RunReader, continue_run, first_checkpoint
from ._state import DAMAGE, ThreadState, corrupted, encode_field, input_values
from ._uses import Gate, Uses

__all__ = [
    "DAMAGE",
    "LOCAL_EXPIRY",
    "Gate",
    "HandBack",
    "LeaseClock",
    "MigrationPlan",
    "Prepared",
    "RunContext",
    "RunReader",
    "ThreadOutcome",
    "ThreadState",
    "UpdatePlan",
    "Uses",
    "check_no_recorded_work",
    "commit_update",
    "continue_run",
    "corrupted",
    "encode_field",
    "first_checkpoint",
    "input_values",
    "plain_state",
    "prepare_fork",
]
