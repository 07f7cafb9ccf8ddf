# write_if_changed(path text): writes `text` into `path` unless it already holds exactly that, so
# that nothing depending on a generated file rebuilds when its text did not change. Included by
# the generator scripts (emitter_revision.cmake, embed_texts.cmake).
function(write_if_changed path text)
  if(EXISTS ${path})
    file(READ ${path} old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE ${path} "${text}")
endfunction()
