"""The hosted session: a workspace on the server with a terminal in the browser.

workspaces (the Workspace's life: start, freeze, restart, stop), consumers (the terminal's websocket),
gate_host (gate commands run from the terminal), views (the workspace's pages). The shell itself runs in
grading.engine.sandbox.shell.
"""
