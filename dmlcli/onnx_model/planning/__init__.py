"""What a model's plan keeps of each node for the runs after its first: the node's DirectML call or views made again
from its inputs (planned.py), how each array is made of an input (derived.py), and a node that only moves data seen
as a view that copies (copies.py), which a lean run reads through (../lean.py)."""
