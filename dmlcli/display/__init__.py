"""What a person sees on a terminal: tables of values, bit patterns or hex (rendering.py) and the progress
bar (progress.py). Only the command line imports it."""
