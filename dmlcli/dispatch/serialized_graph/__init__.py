"""DxDispatch's `dmlSerializedGraph` dispatchables: a serialized DirectML graph run as a graph of dmlcli's operators.

reader (the FlatBuffers file into records, every offset checked), graph (the records as operator dispatchables,
their constants, edges and bindings, planned before anything runs), generated/ (the schema and the Python flatc
made from it). Nothing here is imported unless a model has such a dispatchable: `flatbuffers` is loaded then.
"""
