"""Documentation generated from the operator table (docs/reference/): `python -m dmlcli.docs.reference`."""
