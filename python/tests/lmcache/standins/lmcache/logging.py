# SPDX-License-Identifier: Apache-2.0
"""Mirrors lmcache/logging.py's init_logger() (a named stdlib logger)."""

import logging as _logging


def init_logger(name):
    return _logging.getLogger(name)
