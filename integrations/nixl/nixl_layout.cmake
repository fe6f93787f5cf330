# SPDX-License-Identifier: Apache-2.0
# nixl_layout.cmake - where a NIXL keeps its headers, libnixl and its plugins, and how the RADOS_NKV
# plugin is installed among them. Used by CMakeLists.txt here, at configure time and (as an
# install script) at install time, and by test/nixl_install_test.cmake, which runs the same
# functions against NIXL layouts it lays out with empty files.
#
# The layouts (checked against ai-dynamo/nixl v1.4.0, c0a1102b, and main 8770b655):
# - meson install (`meson setup --prefix P && ninja install`): headers in P/include (backend/,
#   utils/common/, ...), libnixl.so in P/<libdir> (P/lib/x86_64-linux-gnu on Debian and Ubuntu),
#   its plugins in P/<libdir>/plugins (meson.build: plugin_install_dir = libdir/plugins).
# - wheel (nixl-cu12, nixl-cu13; pyproject.toml builds with -Dinstall_headers=false): no headers;
#   libnixl.so in site-packages/.nixl_cu12.mesonpy.libs and its plugins in .../plugins beside it
#   (meson-python's directory for internal libraries); the version in nixl_cu12-<v>.dist-info.
# - NIXL's plugin manager (src/core/nixl_plugin_manager.cpp, getPluginDir) loads plugins from ONE
#   directory: $NIXL_PLUGIN_DIR when set, otherwise <the directory of libnixl.so>/plugins.

# nixl_layout(<out>): reads NIXL_PREFIX, NIXL_SOURCE_DIR, NIXL_LIB_DIR and NIXL_PLUGIN_INSTALL_DIR
# and sets, in the caller's scope, <out>_INCLUDE_DIRS (NIXL's header directories), <out>_LIB_DIR
# (the directory of libnixl.so), <out>_PLUGIN_DIR (where the plugin goes: NIXL_PLUGIN_INSTALL_DIR,
# else <out>_LIB_DIR/plugins) and <out>_VERSION (NIXL's version when the layout tells it, else
# empty). Stops with FATAL_ERROR, saying what is missing, when the headers or libnixl are not found
# or when the headers and a wheel's libnixl are of different versions.
function(nixl_layout out)
  set(inc "")
  set(ver "")
  if(NIXL_PREFIX AND EXISTS "${NIXL_PREFIX}/include/backend/backend_plugin.h")
    set(inc "${NIXL_PREFIX}/include" "${NIXL_PREFIX}/include/utils")
  elseif(NIXL_SOURCE_DIR)
    if(NOT EXISTS "${NIXL_SOURCE_DIR}/src/api/cpp/backend/backend_plugin.h")
      message(FATAL_ERROR "NIXL_SOURCE_DIR=${NIXL_SOURCE_DIR}: no src/api/cpp/backend/backend_plugin.h "
              "there (give a NIXL source tree)")
    endif()
    set(inc "${NIXL_SOURCE_DIR}/src/api/cpp" "${NIXL_SOURCE_DIR}/src/utils"
        "${NIXL_SOURCE_DIR}/src/core/telemetry")
    file(READ "${NIXL_SOURCE_DIR}/meson.build" mb LIMIT 4096)
    if(mb MATCHES "project\\('nixl', *'[^']*', *version *: *'([^']+)'")
      set(ver "${CMAKE_MATCH_1}")
    endif()
  elseif(NIXL_PREFIX)
    message(FATAL_ERROR "NIXL_PREFIX=${NIXL_PREFIX}: no include/backend/backend_plugin.h there. A NIXL "
            "installed with meson installs its headers (install_headers=true, the default); a NIXL wheel "
            "ships none: give NIXL_SOURCE_DIR, NIXL's source tree at the wheel's version, and "
            "NIXL_LIB_DIR, the wheel's directory of libnixl.so")
  else()
    message(FATAL_ERROR "no NIXL headers: give NIXL_PREFIX (a meson install) or NIXL_SOURCE_DIR")
  endif()

  if(NIXL_LIB_DIR)
    file(GLOB lib "${NIXL_LIB_DIR}/libnixl.so*")
    if(NOT lib)
      message(FATAL_ERROR "NIXL_LIB_DIR=${NIXL_LIB_DIR}: no libnixl.so there")
    endif()
    set(libdir "${NIXL_LIB_DIR}")
  elseif(NIXL_PREFIX)
    file(GLOB lib "${NIXL_PREFIX}/lib/*/libnixl.so" "${NIXL_PREFIX}/lib64/libnixl.so"
         "${NIXL_PREFIX}/lib/libnixl.so")
    list(LENGTH lib n)
    if(NOT n EQUAL 1)
      message(FATAL_ERROR "NIXL_PREFIX=${NIXL_PREFIX}: ${n} libnixl.so found (${lib}): give NIXL_LIB_DIR, "
              "the directory of the libnixl.so the plugin will be loaded by")
    endif()
    get_filename_component(libdir "${lib}" DIRECTORY)
  else()
    message(FATAL_ERROR "no libnixl.so: give NIXL_LIB_DIR, the directory of the libnixl.so the plugin "
            "will be loaded by (a wheel's: python3 -c \"import os, nixl._api; print(next(os.path.dirname("
            "l.split()[-1]) for l in open('/proc/self/maps') if l.rstrip().endswith('/libnixl.so')))\")")
  endif()

  # A wheel: .<dist>.mesonpy.libs beside <dist>-<version>.dist-info. NIXL checks no ABI when it
  # loads a plugin, so headers of another version make a plugin that fails at run time.
  get_filename_component(base "${libdir}" NAME)
  if(base MATCHES "^\\.(.+)\\.mesonpy\\.libs$")
    file(GLOB di LIST_DIRECTORIES true "${libdir}/../${CMAKE_MATCH_1}-*.dist-info")
    if(di)
      list(GET di 0 di)
      get_filename_component(di "${di}" NAME)
      string(REGEX REPLACE "^[^-]+-(.+)\\.dist-info$" "\\1" wheel_ver "${di}")
      if(ver AND NOT ver STREQUAL wheel_ver)
        message(FATAL_ERROR "NIXL headers ${ver} (${NIXL_SOURCE_DIR}) but the wheel's libnixl is "
                "${wheel_ver} (${di}): check out NIXL's source at v${wheel_ver}")
      endif()
      set(ver "${wheel_ver}")
    endif()
  endif()

  if(NIXL_PLUGIN_INSTALL_DIR)
    set(pdir "${NIXL_PLUGIN_INSTALL_DIR}")
  else()
    set(pdir "${libdir}/plugins")
  endif()
  set(${out}_INCLUDE_DIRS "${inc}" PARENT_SCOPE)
  set(${out}_LIB_DIR "${libdir}" PARENT_SCOPE)
  set(${out}_PLUGIN_DIR "${pdir}" PARENT_SCOPE)
  set(${out}_VERSION "${ver}" PARENT_SCOPE)
endfunction()

# nixl_install_plugin(<libplugin_RADOS_NKV.so> <dir> <as_obj>): installs the plugin into <dir> (relative:
# under CMAKE_INSTALL_PREFIX; DESTDIR is honoured), and with <as_obj>
# also libplugin_OBJ.so, a symlink to it. Only these two names are written: NIXL's own plugins in
# <dir> stay as they are. A libplugin_OBJ.so there that is not that symlink (NIXL's S3 plugin) is
# never replaced: the install stops before writing anything. Without <as_obj>, that symlink, left
# by an earlier install, is removed.
function(nixl_install_plugin file dir as_obj)
  if(NOT IS_ABSOLUTE "${dir}")
    set(dir "${CMAKE_INSTALL_PREFIX}/${dir}")
  endif()
  set(real "$ENV{DESTDIR}${dir}") # file(INSTALL) adds DESTDIR itself; the checks below do not
  set(obj "${real}/libplugin_OBJ.so")
  set(target "")
  if(IS_SYMLINK "${obj}")
    file(READ_SYMLINK "${obj}" target)
  endif()
  if(as_obj AND (EXISTS "${obj}" OR IS_SYMLINK "${obj}"))
    if(NOT target STREQUAL "libplugin_RADOS_NKV.so")
      message(FATAL_ERROR "${obj} is another OBJ plugin (NIXL's S3 backend): not replaced. Install "
              "without the OBJ alias (-DNIXL_PLUGIN_AS_OBJ=OFF: frameworks then create the backend "
              "RADOS_NKV), or remove that file first if this NIXL is to load rados-nkv as OBJ")
    endif()
  endif()
  file(INSTALL DESTINATION "${dir}" TYPE MODULE FILES "${file}" PERMISSIONS OWNER_READ OWNER_WRITE
       OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  if(as_obj)
    message(STATUS "Installing: ${obj} -> libplugin_RADOS_NKV.so")
    file(CREATE_LINK libplugin_RADOS_NKV.so "${obj}" SYMBOLIC)
  elseif(target STREQUAL "libplugin_RADOS_NKV.so")
    # An alias an earlier install made: without it asked for now, OBJ is no longer rados-nkv.
    message(STATUS "Removing: ${obj} (the OBJ alias, not asked for)")
    file(REMOVE "${obj}")
  endif()
endfunction()
