// text_util.h: the small text helpers the debugger's and the REPL's command parsers share.
#pragma once

#include <string>
#include <vector>

// `text` without the spaces and tabs at either end.
std::string text_trim(const std::string& text);

// The words of `text`, split at any of `separators` (empty words left out).
std::vector<std::string> text_split_words(const std::string& text, const char* separators = " \t");
