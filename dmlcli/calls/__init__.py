"""A call as DirectML sees it (its tensors, their data types and Sizes, its typed parameters) and its check
against the operator's entry at one feature level (validation.py): below the engine, Dask's blocks and
`dispatch`, which all plan calls."""
