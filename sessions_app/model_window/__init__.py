"""The model window: the packet's provided model, opened to a candidate once red is captured.

window (when it opens, what is recorded), views (the chat panel and its stream), upstream (the call to the
model server, plain Python).
"""
