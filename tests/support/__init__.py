"""What tests share: servers, scripted models, stored fixtures and CLI drivers.

Tests import helpers from here, never from another test module or a conftest, so that a
test file can be moved, renamed or run alone (tests/test_layout.py checks it).
"""
