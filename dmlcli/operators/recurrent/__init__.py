"""The recurrent family: RNN, LSTM, GRU (entries.py).
"""
