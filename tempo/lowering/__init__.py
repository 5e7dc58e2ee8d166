"""The relational lowering of a plan, written once for the DataFrame executors.

A rule here (a window kind, result stamps, the release rule) is stated over ``Dialect``, the
few primitives a DataFrame backend spells in its own way; each executor supplies its dialect
(``tempo.vectorised.dialect`` on polars, ``tempo.spark.dialect`` on Spark) and translates
nothing else of that rule. ``Lowering`` is the part of a compilation every such compiler
shares: the CTI replay and spans it reads, the relations built, the release rule on the
output. ``bench/lowering_slice/REPORT.md`` measured this design against ibis as the target.
"""
