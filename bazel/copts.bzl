"""Compiler flags shared by every msgr target (only our own code gets -Werror-level care)."""

MSGR_COPTS = [
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
]
