# SPDX-License-Identifier: Apache-2.0
# install.cmake - install rules (included from the top-level CMakeLists.txt): the daemon and the CLI,
# libnkv (shared with a versioned SONAME, static, public headers, libnkv.pc), the example configuration,
# the systemd unit rados-nkv@.service and the man pages (man/*.scd, where scdoc is installed).
#
# Destinations follow GNUInstallDirs and stay under the install prefix (cmake --install --prefix DIR
# relocates everything), except those given as absolute paths: packagers pass
# -DCMAKE_INSTALL_SYSCONFDIR=/etc, and NKV_SYSTEMD_UNITDIR may be set to /lib/systemd/system.
include(GNUInstallDirs)
set(NKV_SYSTEMD_UNITDIR lib/systemd/system CACHE STRING
    "where rados-nkv@.service goes (relative: under the install prefix)")

install(TARGETS rados-nkv nkv RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET nkv-gpu-demo)
  install(TARGETS nkv-gpu-demo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(TARGETS nkv_shared nkv_client
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# libnkv's API; nkv_target.h (the embedding API) is not installed: no target library is.
install(FILES
  ${CMAKE_SOURCE_DIR}/include/nkv/nkv.h
  ${CMAKE_SOURCE_DIR}/include/nkv/nkv_spec.h
  ${CMAKE_SOURCE_DIR}/include/nkv/nkv_dev.h
  ${CMAKE_SOURCE_DIR}/include/nkv/nkv_devq.h
  ${CMAKE_SOURCE_DIR}/include/nkv/nkv_shm.h
  ${NKV_GEN_INC}/nkv/nkv_version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nkv)
install(FILES ${CMAKE_SOURCE_DIR}/conf/rados-nkv.json RENAME example.json
        DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/rados-nkv)

# libnkv.pc and the unit name installed paths, which are known only at install time (--prefix, and
# DESTDIR must not appear in them): configure them then, from the prefix the install runs with.
set(NKV_PKG_DIR ${CMAKE_BINARY_DIR}/packaging)
# Type=notify only where the daemon sends READY=1 (built with libsystemd): systemctl start then returns
# once it serves. Type=simple otherwise, which never waits for a notification that cannot come.
if(NKV_SYSTEMD)
  set(NKV_SERVICE_TYPE notify)
else()
  set(NKV_SERVICE_TYPE simple)
endif()
install(CODE "
  set(p \"\${CMAKE_INSTALL_PREFIX}\")
  foreach(d LIBDIR:${CMAKE_INSTALL_LIBDIR} INCLUDEDIR:${CMAKE_INSTALL_INCLUDEDIR}
            BINDIR:${CMAKE_INSTALL_BINDIR} SYSCONFDIR:${CMAKE_INSTALL_SYSCONFDIR})
    string(REPLACE \":\" \";\" d \"\${d}\")
    list(GET d 0 name)
    list(GET d 1 dir)
    if(NOT IS_ABSOLUTE \"\${dir}\")
      set(dir \"\${p}/\${dir}\")
    endif()
    set(NKV_\${name} \"\${dir}\")
  endforeach()
  set(NKV_PREFIX \"\${p}\")
  set(NKV_VERSION \"${PROJECT_VERSION}\")
  set(NKV_SERVICE_TYPE \"${NKV_SERVICE_TYPE}\")
  configure_file(\"${CMAKE_SOURCE_DIR}/packaging/libnkv.pc.in\" \"${NKV_PKG_DIR}/libnkv.pc\" @ONLY)
  configure_file(\"${CMAKE_SOURCE_DIR}/packaging/rados-nkv@.service.in\" \"${NKV_PKG_DIR}/rados-nkv@.service\" @ONLY)
")
install(FILES ${NKV_PKG_DIR}/libnkv.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${NKV_PKG_DIR}/rados-nkv@.service DESTINATION ${NKV_SYSTEMD_UNITDIR})

# Man pages, written in scdoc(5) in man/ (Debian: scdoc) and turned into roff at build time: rados-nkv(8),
# nkv(1), nkv-ctl(8), with this version in their footer. CTest man_pages checks that they name every option the programs' --help prints.
# Without scdoc none are built or installed.
find_program(SCDOC scdoc)
if(SCDOC AND NOT CMAKE_CROSSCOMPILING)
  set(NKV_MAN_DIR ${CMAKE_BINARY_DIR}/man)
  set(NKV_MAN_PAGES rados-nkv.8 nkv.1)
  if(TARGET nkv-ctl)
    list(APPEND NKV_MAN_PAGES nkv-ctl.8)
  endif()
  set(NKV_MAN_OUT "")
  foreach(page ${NKV_MAN_PAGES})
    add_custom_command(OUTPUT ${NKV_MAN_DIR}/${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${NKV_MAN_DIR}
      COMMAND sh -c "sed \"s/@NKV_VERSION@/$3/\" \"$1\" | \"$0\" > \"$2\"" ${SCDOC} ${CMAKE_SOURCE_DIR}/man/${page}.scd
              ${NKV_MAN_DIR}/${page} ${PROJECT_VERSION}
      DEPENDS ${CMAKE_SOURCE_DIR}/man/${page}.scd VERBATIM)
    list(APPEND NKV_MAN_OUT ${NKV_MAN_DIR}/${page})
    string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section ${page})
    install(FILES ${NKV_MAN_DIR}/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
  endforeach()
  add_custom_target(man ALL DEPENDS ${NKV_MAN_OUT})
  message(STATUS "man pages: ${SCDOC}")
else()
  message(STATUS "man pages: scdoc not found, none built")
endif()
