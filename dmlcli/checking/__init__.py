"""Is a result what DirectML should give: --check's comparison within the operator's tolerance, and the
counts of special values that `show` reports."""
