# SPDX-License-Identifier: Apache-2.0
"""Stand-in for vllm.model_executor (a package holding model_loader)."""
