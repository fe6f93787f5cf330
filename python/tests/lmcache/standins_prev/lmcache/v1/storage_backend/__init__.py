# SPDX-License-Identifier: Apache-2.0
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)   # the rest from standins/ (later on sys.path)
