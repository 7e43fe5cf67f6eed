"""Dask and Zarr: one validated call, run block by block by Dask on its schedulers and clusters.

dmlcli grows no scheduler of its own. The call is validated once from the arrays' metadata (data
types and shapes, engine.plan); Dask's blockwise then runs the same backend kernels (NumPy or CuPy)
on each block, on whichever scheduler the user picks: threads, processes, a LocalCluster, or a
dask.distributed scheduler anywhere.

- settings: the run's Dask options (scheduler, workers, chunks, connect timeout), parsed without importing Dask
- blocks: what a worker runs, one block at a time (the kernel, the operator's hook counts)
- graph: inputs as Dask arrays, the lazy result built with map_blocks, the output's chunking
- execution: schedulers and clusters (connect, start, stop), progress, failures as dmlcli errors
- runner: a run from input arguments (Zarr, .npy, JSON) to a Zarr store or into memory

Nothing here imports the command line; Dask, distributed and zarr are imported only when used
(`pip install 'dmlcli[dask]'`), so `import dmlcli` and `dmlcli --version` stay as fast as before.
"""
