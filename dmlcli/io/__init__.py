"""Tensors in and out, one module per concern; nothing here knows about operators or validation.

- sources: where an input comes from (.npy or JSON file, '-' for stdin, an inline JSON literal)
- npy: .npy headers read and checked without touching the data, arrays mapped, headers written
- json_tensor: the JSON tensor format, read exactly and written as the shortest exact text
- strided: DirectML buffer-tensor strides (zero strides broadcast) as NumPy views
- atomic: output files written through a temporary file renamed over the target
- room: free disk and available memory, checked before any work
- formats: stdin sniffed (.npy or JSON), .npz members, byte-order marks, other formats named
- targets: the stdout targets of -o (-, -.json, -.npy)
- zarr_names, zarr_store: which arguments are Zarr stores; Zarr arrays read, and written atomically

Import the submodule you need: the command line imports only what a run uses, to start fast.
"""
