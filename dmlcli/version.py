"""The version of dmlcli, alone in its module so that reading it imports nothing else."""

__version__ = "0.1.0"
