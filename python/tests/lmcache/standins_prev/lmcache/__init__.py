# SPDX-License-Identifier: Apache-2.0
"""The previous LMCache interface (before PR #2314 and #2315), laid over standins/: only the
modules that differ are here; every other lmcache module comes from standins/, which follows on
sys.path (each package here extends its __path__ with the same package there)."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)   # the rest from standins/ (later on sys.path)
