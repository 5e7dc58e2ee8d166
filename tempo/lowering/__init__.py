"""The relational lowering of a plan, written once for the DataFrame executors.

A rule here (a window kind, result stamps, the release rule) is stated over ``Dialect``, the
few primitives a DataFrame backend spells in its own way; each executor supplies its dialect
(``tempo.vectorised.dialect`` on polars, ``tempo.spark.dialect`` on Spark) and translates
nothing else of that rule. ``Lowering`` is the part of a compilation every such compiler
shares: the CTI replay and spans it reads, the relations built, the release rule on the
output. A rule registers itself by node class (``tempo.lowering.rules``), and both
compilers take every registered rule. ``bench/lowering_slice/REPORT.md`` measured this
design against ibis as the target.
"""

# Every rule module, each registering its rules in ``tempo.lowering.rules`` as it is defined.
from tempo.lowering import analytics, clip, event_windows, joins, patterns, windows  # noqa: E402, F401
