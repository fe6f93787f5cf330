# SPDX-License-Identifier: Apache-2.0
"""Test stand-in for the vllm package (see ../README.md): only what the rados_nkv loader uses."""
STANDIN = True
