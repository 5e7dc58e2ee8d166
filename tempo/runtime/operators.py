"""The names ``tempo.runtime.bulk`` reads from the module the runtime's operators lived in before
they were split by family (issue 32): ``operator`` (the push protocol, ``Operator``),
``stateless``, ``clip``, ``windows``, ``joins``, ``patterns``, ``release_queues`` and ``egress``.
Everything else imports them from there; this module goes once ``bulk`` does too.
"""

from tempo.runtime.joins import Join
from tempo.runtime.release_queues import ByStart
from tempo.runtime.windows import Window

__all__ = ["ByStart", "Join", "Window"]
