"""What an entry of the operator table is (schema, parameter kinds, shape queries, hooks) and how the table is indexed
(which module holds each operator, and DirectML's and ONNX's other names for them). Imports nothing of the families.
"""
