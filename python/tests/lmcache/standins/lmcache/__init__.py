# SPDX-License-Identifier: Apache-2.0
"""Test stand-ins for the few LMCache classes rados_nkv.lmcache touches.

LMCache cannot be installed on the test machines (it needs torch >= 2.1 and PyPI), so these
modules re-create, under LMCache's own module paths, the names, signatures and behaviour the
connector relies on. They are written for these tests, not copied: each module names the upstream
file (github.com/LMCache/LMCache) and commit whose interface it mirrors. conftest.py puts this
directory on sys.path only when a real LMCache is not importable.
"""

STANDIN = True
