# SPDX-License-Identifier: Apache-2.0
# The package's version: rados-nkv's project(VERSION) in CMakeLists.txt (tests/test_api.py checks they agree).
__version__ = "0.1.0"
