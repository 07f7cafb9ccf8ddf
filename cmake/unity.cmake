# Unity builds: a target's .cpp files are compiled a few at a time as one translation unit.
#
# Why: most of a fresh build's time is not the files' own code but what every file repeats: the
# standard and smelt headers, and the inline functions and templates they bring, optimized again in
# each object. Compiled eight at a time, libsmelt took 356 CPU-seconds instead of 721 (g++ 12, -O3,
# 208 files), the command-line program and the fuzz library 45 instead of 167: what keeps
# `make demo` on a fresh 2-core machine within minutes.
#
# Files are grouped within their own folder only (src/kernels/a..h, src/kernels/i..p, ...), so a
# group never mixes two stages' private helpers. Within a folder, names in anonymous namespaces
# must be distinct: the build sees a clash inside its groups, scripts/check-unity-names.sh one
# anywhere in a folder (a file added later moves the groups' boundaries). SMELT_UNITY=OFF compiles
# file by file (quicker to rebuild after editing one file).

# smelt_unity_groups(<target> <files per group>): gives each .cpp source of <target> a unity group
# named after its folder and its position there, and turns the target's unity build on.
function(smelt_unity_groups target per_group)
  if(NOT SMELT_UNITY)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(seen_dirs)
  foreach(source ${sources})
    if(NOT source MATCHES "\\.cpp$")
      continue()
    endif()
    get_filename_component(path ${source} ABSOLUTE BASE_DIR ${source_dir})
    get_filename_component(dir ${path} DIRECTORY)
    string(MAKE_C_IDENTIFIER "${dir}" key)
    if(NOT DEFINED count_${key})
      set(count_${key} 0)
    endif()
    math(EXPR group "${count_${key}} / ${per_group}")
    math(EXPR count_${key} "${count_${key}} + 1")
    file(RELATIVE_PATH rel_dir ${CMAKE_SOURCE_DIR} ${dir})
    string(MAKE_C_IDENTIFIER "${rel_dir}_${group}" group_name)
    set_property(SOURCE ${source} TARGET_DIRECTORY ${target} PROPERTY UNITY_GROUP ${group_name})
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
endfunction()
