"""The training family: the _GRAD operators, batch normalization's training forms and ADAM_OPTIMIZER.
"""
