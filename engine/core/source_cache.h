// source_cache.h: the text of the scripts nodes were recorded from, read once and kept (bounded); the
// viewer and the debugger read scripts only through it.
#pragma once

#include <string>
#include <vector>

namespace td {

// The lines of `file` (without newlines), or nullptr when it is not a readable file (a chunk typed
// at the prompt, "stdin", "?"). Re-read when the file changed on disk (its mtime or size); at most 16 files (2 MB
// each) are kept, the least recently used one is dropped first.
const std::vector<std::string>* source_lines(const std::string& file);

// Line `line` (1-based) of `file` with leading and trailing blanks removed; "" when unknown.
std::string source_line_text(const std::string& file, int line);

}  // namespace td
