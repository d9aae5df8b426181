# embed_lua.cmake: cmake -DINPUT=nn.lua -DOUTPUT=nn.lua.h -DNAME=nn_lua -P embed_lua.cmake
# Writes the Lua file as a C++ raw string literal, so the library is part of the tapedeck binary
# (also the exported page's page.css and page.js, viewer/CMakeLists.txt).
file(READ "${INPUT}" content)
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} at build time: do not edit.\nstatic const char ${NAME}[] = R\"__lua__(${content})__lua__\";\n")
