# The symbol check of both libraries:
#   cmake -DNM=nm -DREADELF=readelf -DSHARED=libattnbwd.so -DSTATIC=libattnbwd.a -DSOVERSION=0 -P check_symbols.cmake
# - every global symbol either library defines is attnbwd_* (so nothing of
#   ours or of our Lua can clash with a program's own symbols);
# - neither defines nor needs any lua_, luaL_ or luaopen_ symbol (Lua 5.4 is
#   inside, local);
# - the shared library's SONAME is libattnbwd.so.SOVERSION, it loads no
#   liblua, and it has no text relocations (Lua's code links as it is).
cmake_minimum_required(VERSION 3.24)

function(tool_output var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${cmd} exited with ${rc}: ${err}")
  endif()
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

# The names in nm's lines "ADDRESS TYPE NAME" (defined) or "U NAME" (undefined).
function(symbol_names var text)
  string(REGEX MATCHALL "[^\n]+" lines "${text}")
  set(names "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^ *([0-9a-fA-F]+ +)?[A-Za-z] +([^ ]+)$")
      list(APPEND names "${CMAKE_MATCH_2}")
    endif()
  endforeach()
  set(${var} "${names}" PARENT_SCOPE)
endfunction()

set(failures "")
foreach(lib IN ITEMS SHARED STATIC)
  if(lib STREQUAL "SHARED")
    set(nm ${NM} -D)
  else()
    set(nm ${NM} -g)
  endif()
  tool_output(defined ${nm} --defined-only ${${lib}})
  symbol_names(defined_names "${defined}")
  list(LENGTH defined_names n)
  if(n EQUAL 0)
    list(APPEND failures "${${lib}} defines no global symbol at all")
  endif()
  foreach(name IN LISTS defined_names)
    if(NOT name MATCHES "^attnbwd_")
      list(APPEND failures "${${lib}} defines the global ${name}")
    endif()
  endforeach()
  tool_output(all ${nm} ${${lib}})
  symbol_names(all_names "${all}")
  foreach(name IN LISTS all_names)
    if(name MATCHES "^(lua|luaL|luaopen)_")
      list(APPEND failures "${${lib}} has the Lua symbol ${name} global (defined or needed)")
    endif()
  endforeach()
endforeach()

tool_output(dynamic ${READELF} -d ${SHARED})
if(NOT dynamic MATCHES "SONAME[^\n]*\\[libattnbwd\\.so\\.${SOVERSION}\\]")
  list(APPEND failures "${SHARED} has no SONAME libattnbwd.so.${SOVERSION}")
endif()
if(dynamic MATCHES "NEEDED[^\n]*liblua")
  list(APPEND failures "${SHARED} loads a liblua")
endif()
if(dynamic MATCHES "TEXTREL")
  list(APPEND failures "${SHARED} has text relocations")
endif()

if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "${text}")
endif()
message(STATUS "only attnbwd_* global in both libraries, no Lua symbol exposed, SONAME libattnbwd.so.${SOVERSION}")
