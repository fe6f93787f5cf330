# SPDX-License-Identifier: Apache-2.0
# nixl_install_test.cmake - where the RADOS_NKV plugin is built against and installed to, for the
# two ways NIXL is installed: with meson from source, and as a wheel. It runs nixl_layout.cmake's
# functions (the very ones the build and `cmake --install` run) against NIXL layouts laid out here
# with empty files and checks that:
# - the plugin goes into NIXL's own plugin directory (<libnixl dir>/plugins: lib/x86_64-linux-gnu/
#   plugins of a meson install, .nixl_cu12.mesonpy.libs/plugins of a wheel), so NIXL keeps seeing
#   its own plugins, which stay byte for byte and time for time as they were;
# - the OBJ alias is installed only on request and never over another OBJ plugin (NIXL's S3 one):
#   the install then stops before writing anything; an install without it removes ours;
# - a wheel (no headers) needs NIXL's source of the same version, and says so;
# - DESTDIR is honoured.
#
#   cmake -DLAYOUT=<nixl_layout.cmake> -DWORK=<scratch dir> -P nixl_install_test.cmake
# (with -DSTEP=<name> it runs one step: the steps expected to fail run in a child cmake.)
cmake_minimum_required(VERSION 3.22)
include(${LAYOUT})

function(fail msg)
  message(FATAL_ERROR "FAIL: ${msg}")
endfunction()

function(expect what got want)
  if(NOT got STREQUAL want)
    fail("${what}: '${got}', want '${want}'")
  endif()
endfunction()

# touch(<path> [content]): an empty (or small) file, its directory made.
function(touch path)
  get_filename_component(d "${path}" DIRECTORY)
  file(MAKE_DIRECTORY "${d}")
  file(WRITE "${path}" "${ARGN}")
endfunction()

set(M "${WORK}/meson")                    # NIXL installed with meson, --prefix ${M}
set(MP "${M}/lib/x86_64-linux-gnu/plugins")
set(SP "${WORK}/venv/lib/python3.11/site-packages") # a nixl-cu12 wheel installed there
set(WL "${SP}/.nixl_cu12.mesonpy.libs")
set(SRC "${WORK}/nixl-src")               # NIXL's source tree at the wheel's version
set(PLUGIN "${WORK}/build/libplugin_RADOS_NKV.so")

if(STEP STREQUAL "wheel_obj_alias")      # the wheel holds NIXL's OBJ plugin: refused
  nixl_install_plugin("${PLUGIN}" "${WL}/plugins" ON)
  return()
elseif(STEP STREQUAL "meson_obj_other_symlink") # libplugin_OBJ.so links elsewhere: refused too
  nixl_install_plugin("${PLUGIN}" "${MP}" ON)
  return()
elseif(STEP STREQUAL "wheel_no_source")   # a wheel ships no headers
  set(NIXL_PREFIX "${SP}")
  set(NIXL_LIB_DIR "${WL}")
  nixl_layout(x)
  return()
elseif(STEP STREQUAL "wheel_other_version")
  set(NIXL_SOURCE_DIR "${SRC}")
  set(NIXL_LIB_DIR "${WL}")
  nixl_layout(x)
  return()
elseif(STEP STREQUAL "lib_dir_without_libnixl")
  set(NIXL_PREFIX "${M}")
  set(NIXL_LIB_DIR "${SP}")
  nixl_layout(x)
  return()
elseif(STEP)
  fail("unknown step ${STEP}")
endif()

# run_fail(<step> <regex>): the step must fail with a message matching regex.
function(run_fail step regex)
  execute_process(COMMAND ${CMAKE_COMMAND} -DLAYOUT=${LAYOUT} -DWORK=${WORK} -DSTEP=${step}
                          -P ${CMAKE_CURRENT_LIST_FILE}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    fail("${step} succeeded, should have failed")
  endif()
  string(REGEX REPLACE "[ \n]+" " " err "${err}")
  if(NOT err MATCHES "${regex}")
    fail("${step}: '${err}' does not say '${regex}'")
  endif()
  message(STATUS "ok ${step}: refused")
endfunction()

# stamp(<var> <dir>): every file in dir with its content hash and time, to show nothing changed.
function(stamp var dir)
  file(GLOB fs LIST_DIRECTORIES false "${dir}/*")
  set(s "")
  foreach(f IN LISTS fs)
    if(IS_SYMLINK "${f}")
      file(READ_SYMLINK "${f}" t)
      list(APPEND s "${f}->${t}")
    else()
      file(SHA256 "${f}" h)
      file(TIMESTAMP "${f}" t "%s" UTC)
      list(APPEND s "${f}:${h}:${t}")
    endif()
  endforeach()
  set(${var} "${s}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK}")
touch("${PLUGIN}" "rados-nkv plugin\n")

# --- meson install: include/, lib/x86_64-linux-gnu/{libnixl.so,plugins/} ---------------------
touch("${M}/include/backend/backend_plugin.h")
touch("${M}/include/utils/common/nixl_time.h")
touch("${M}/lib/x86_64-linux-gnu/libnixl.so")
touch("${MP}/libplugin_POSIX.so" "nixl posix\n")
touch("${MP}/libplugin_UCX.so" "nixl ucx\n")
touch("${MP}/libtelemetry_exporter_prometheus.so" "nixl telemetry\n")

set(NIXL_PREFIX "${M}")
nixl_layout(m)
expect("meson: headers" "${m_INCLUDE_DIRS}" "${M}/include;${M}/include/utils")
expect("meson: libnixl" "${m_LIB_DIR}" "${M}/lib/x86_64-linux-gnu")
expect("meson: plugin dir" "${m_PLUGIN_DIR}" "${MP}")
stamp(before "${MP}")
nixl_install_plugin("${PLUGIN}" "${m_PLUGIN_DIR}" OFF)
file(READ "${MP}/libplugin_RADOS_NKV.so" got)
expect("meson: installed plugin" "${got}" "rados-nkv plugin\n")
if(EXISTS "${MP}/libplugin_OBJ.so")
  fail("meson: OBJ alias installed without being asked for")
endif()
stamp(after "${MP}")
list(FILTER after EXCLUDE REGEX "libplugin_RADOS_NKV.so:")
expect("meson: NIXL's own plugins" "${after}" "${before}")
message(STATUS "ok meson: ${m_PLUGIN_DIR}, POSIX/UCX/telemetry untouched")

# OBJ alias where NIXL has no OBJ plugin: a symlink; installing again keeps it.
nixl_install_plugin("${PLUGIN}" "${m_PLUGIN_DIR}" ON)
nixl_install_plugin("${PLUGIN}" "${m_PLUGIN_DIR}" ON)
file(READ_SYMLINK "${MP}/libplugin_OBJ.so" t)
expect("meson: OBJ alias" "${t}" "libplugin_RADOS_NKV.so")
message(STATUS "ok meson: OBJ alias -> libplugin_RADOS_NKV.so, reinstall keeps it")
nixl_install_plugin("${PLUGIN}" "${m_PLUGIN_DIR}" OFF)
if(EXISTS "${MP}/libplugin_OBJ.so" OR IS_SYMLINK "${MP}/libplugin_OBJ.so")
  fail("meson: the OBJ alias stays after an install without it")
endif()
message(STATUS "ok meson: an install without the alias removes ours")

# A libplugin_OBJ.so that is a symlink to anything else (or dangling) is not ours either.
file(CREATE_LINK libplugin_POSIX.so "${MP}/libplugin_OBJ.so" SYMBOLIC)
run_fail(meson_obj_other_symlink "libplugin_OBJ.so is another OBJ plugin")
file(READ_SYMLINK "${MP}/libplugin_OBJ.so" t)
expect("meson: a foreign OBJ symlink kept" "${t}" "libplugin_POSIX.so")

# DESTDIR (packagers): everything under it, nothing in the real directory.
file(REMOVE "${MP}/libplugin_RADOS_NKV.so" "${MP}/libplugin_OBJ.so")
set(ENV{DESTDIR} "${WORK}/stage")
nixl_install_plugin("${PLUGIN}" "${m_PLUGIN_DIR}" ON)
unset(ENV{DESTDIR})
if(NOT EXISTS "${WORK}/stage${MP}/libplugin_RADOS_NKV.so" OR NOT IS_SYMLINK "${WORK}/stage${MP}/libplugin_OBJ.so"
   OR EXISTS "${MP}/libplugin_RADOS_NKV.so")
  fail("DESTDIR not honoured")
endif()
message(STATUS "ok DESTDIR")

# --- wheel: site-packages/{nixl_cu12/, nixl_cu12-1.4.0.dist-info/, .nixl_cu12.mesonpy.libs/} -------
touch("${SP}/nixl_cu12/__init__.py")
touch("${SP}/nixl_cu12-1.4.0.dist-info/METADATA" "Name: nixl-cu12\nVersion: 1.4.0\n")
touch("${WL}/libnixl.so")
touch("${WL}/plugins/libplugin_POSIX.so" "wheel posix\n")
touch("${WL}/plugins/libplugin_UCX.so" "wheel ucx\n")
touch("${WL}/plugins/libplugin_OBJ.so" "wheel s3 obj\n")
touch("${SRC}/meson.build" "project('nixl', 'CPP', version: '1.4.0',\n    default_options: ['cpp_std=c++20'],\n    meson_version: '>= 0.64.0'\n)\n")
touch("${SRC}/src/api/cpp/backend/backend_plugin.h")

run_fail(wheel_no_source "ships none: give NIXL_SOURCE_DIR")
unset(NIXL_PREFIX)
set(NIXL_SOURCE_DIR "${SRC}")
set(NIXL_LIB_DIR "${WL}")
nixl_layout(w)
expect("wheel: headers" "${w_INCLUDE_DIRS}"
       "${SRC}/src/api/cpp;${SRC}/src/utils;${SRC}/src/core/telemetry")
expect("wheel: libnixl" "${w_LIB_DIR}" "${WL}")
expect("wheel: plugin dir" "${w_PLUGIN_DIR}" "${WL}/plugins")
expect("wheel: version" "${w_VERSION}" "1.4.0")
stamp(before "${WL}/plugins")
run_fail(wheel_obj_alias "libplugin_OBJ.so is another OBJ plugin")
stamp(after "${WL}/plugins")
expect("wheel: a refused install writes nothing" "${after}" "${before}")
nixl_install_plugin("${PLUGIN}" "${w_PLUGIN_DIR}" OFF)
stamp(after "${WL}/plugins")
list(FILTER after EXCLUDE REGEX "libplugin_RADOS_NKV.so:")
expect("wheel: NIXL's own plugins, OBJ included" "${after}" "${before}")
message(STATUS "ok wheel: ${w_PLUGIN_DIR}, POSIX/UCX/OBJ untouched")

# A plugin directory given explicitly (relative: under the install prefix).
set(NIXL_PLUGIN_INSTALL_DIR "lib/nixl-extra")
nixl_layout(e)
expect("explicit plugin dir" "${e_PLUGIN_DIR}" "lib/nixl-extra")
unset(NIXL_PLUGIN_INSTALL_DIR)

# Headers of another version than the wheel's libnixl: refused (NIXL checks no ABI).
file(RENAME "${SP}/nixl_cu12-1.4.0.dist-info" "${SP}/nixl_cu12-1.3.2.dist-info")
run_fail(wheel_other_version "headers 1.4.0 .* libnixl is 1.3.2")
run_fail(lib_dir_without_libnixl "no libnixl.so there")

message(STATUS "nixl_install_test: all checks passed")
