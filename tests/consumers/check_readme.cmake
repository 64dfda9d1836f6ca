# The README's "Use from C/CMake" snippets are the text between the readme
# markers of find_package/CMakeLists.txt and find_package/main.c, which the
# consumer tests build and run, so the README cannot show code that does not
# work:   cmake -DREADME=README.md -P check_readme.cmake
cmake_minimum_required(VERSION 3.24)
set(here ${CMAKE_CURRENT_LIST_DIR})

# The lines strictly between the line holding "readme-begin" and the one
# holding "readme-end" in file.
function(marked_region var file)
  file(READ ${file} text)
  string(FIND "${text}" "readme-begin" begin)
  string(FIND "${text}" "readme-end" end)
  if(begin LESS 0 OR end LESS begin)
    message(FATAL_ERROR "${file}: no readme-begin ... readme-end region")
  endif()
  string(SUBSTRING "${text}" ${begin} -1 after_begin)
  string(FIND "${after_begin}" "\n" eol)
  math(EXPR from "${begin} + ${eol} + 1")
  string(SUBSTRING "${text}" 0 ${end} before_end)
  string(FIND "${before_end}" "\n" bol REVERSE)
  math(EXPR length "${bol} + 1 - ${from}")
  string(SUBSTRING "${text}" ${from} ${length} region)
  set(${var} "${region}" PARENT_SCOPE)
endfunction()

# The body of the first ```lang block after heading in text.
function(fenced_block var text heading lang)
  string(FIND "${text}" "\n${heading}\n" at)
  if(at LESS 0)
    message(FATAL_ERROR "README: no heading '${heading}'")
  endif()
  string(SUBSTRING "${text}" ${at} -1 section)
  string(FIND "${section}" "\n```${lang}\n" open)
  if(open LESS 0)
    message(FATAL_ERROR "README: no ```${lang} block after '${heading}'")
  endif()
  string(LENGTH "\n```${lang}\n" skip)
  math(EXPR open "${open} + ${skip}")
  string(SUBSTRING "${section}" ${open} -1 body)
  string(FIND "${body}" "```" close)
  string(SUBSTRING "${body}" 0 ${close} body)
  set(${var} "${body}" PARENT_SCOPE)
endfunction()

file(READ ${README} readme)
set(heading "## Use from C/CMake")
foreach(pair "cmake;CMakeLists.txt" "c;main.c")
  list(GET pair 0 lang)
  list(GET pair 1 name)
  marked_region(expected ${here}/find_package/${name})
  fenced_block(shown "${readme}" "${heading}" ${lang})
  if(NOT shown STREQUAL expected)
    message(FATAL_ERROR "README.md's ```${lang} block under '${heading}' differs from the region in "
      "tests/consumers/find_package/${name}; copy it from there. The README shows:\n${shown}\n"
      "The region is:\n${expected}")
  endif()
endforeach()
message(STATUS "README's C/CMake snippets match tests/consumers/find_package")
